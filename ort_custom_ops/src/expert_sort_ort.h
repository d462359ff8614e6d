// What the three init-routing ops (MoeInitRoutingV3, MoeTokenPermute, MoeInitRouting) share in
// their ORT glue: the kernel's row type of an ONNX element type, and where a host computation
// writes its outputs (the CPU kernel: ORT's outputs; the CANN host fallback: host mirrors).
#pragma once

#include <functional>
#include <vector>

#include "op_utils.h"
#include "ops_src/cpu/expert_sort.h"

namespace ascend_moe {

// Writable host memory for output `index` of `shape` and `type`.
using HostOutputFn =
    std::function<void*(size_t index, const std::vector<int64_t>& shape, ONNXTensorElementDataType type)>;

// The row type of x / tokens (the tables allow float, float16, bfloat16 and int8 only).
inline cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return cpu::RowType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return cpu::RowType::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      return cpu::RowType::kInt8;
    default:
      return cpu::RowType::kFloat;
  }
}

}  // namespace ascend_moe
