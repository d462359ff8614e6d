// What the three init-routing ops (MoeInitRoutingV3, MoeTokenPermute, MoeInitRouting) share in
// their ORT glue: the kernel's row type of an ONNX element type, where a host computation writes
// its outputs (the CPU kernel: ORT's outputs; the CANN host fallback: host mirrors), and the CPU
// kernel that runs the host computation on ORT's outputs.
#pragma once

#include <functional>
#include <vector>

#include "op_utils.h"
#include "ops_src/cpu/enum_names.h"
#include "ops_src/cpu/expert_sort.h"

namespace ascend_moe {

// Writable host memory for output `index` of `shape` and `type`.
using HostOutputFn =
    std::function<void*(size_t index, const std::vector<int64_t>& shape, ONNXTensorElementDataType type)>;

// Bytes read and written per parallel chunk of the expanded rows.
inline constexpr int64_t kExpertSortChunkBytes = int64_t{1 << 20};

// The row type of x / tokens (the tables allow float, float16, bfloat16 and int8 only).
inline cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  static constexpr EnumValue<ONNXTensorElementDataType, cpu::RowType> kRowTypes[] = {
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, cpu::RowType::kFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, cpu::RowType::kBFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, cpu::RowType::kInt8}};
  return ValueOf(kRowTypes, t, cpu::RowType::kFloat);
}

// The CPU kernel's Run (CpuKernel) of an op whose host computation is `Compute`: its outputs are
// ORT's, checked like every CPU kernel's.
template <typename Def, void (*Compute)(Ort::KernelContext&, const typename Def::Inputs&,
                                        const typename Def::Attrs&, const HostOutputFn&)>
void RunOnKernelOutputs(Ort::KernelContext& ctx, const typename Def::Inputs& in,
                        const typename Def::Attrs& attrs) {
  Compute(ctx, in, attrs, [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
    return GetCheckedOutput(ctx, Def::kName, Def::kOutputs, i, shape, type, /*required=*/true);
  });
}

}  // namespace ascend_moe
