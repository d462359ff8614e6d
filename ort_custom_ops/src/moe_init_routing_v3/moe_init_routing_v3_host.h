// MoeInitRoutingV3's validation and host computation, shared by the CPU kernel and the CANN
// kernel (its host fallback, and the validation of every call).
#pragma once

#include <array>
#include <vector>

#include "expert_sort_ort.h"
#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/expert_sort.h"

namespace ascend_moe {

using InitRoutingV3Inputs = std::array<InputView, defs::moe_init_routing_v3::kNumIns>;

// Ranks, dims and the combinations with the attributes (the table checked presence and element
// types; no data is read): the kernel parameters.
cpu::MoeInitRoutingParams ValidateMoeInitRoutingV3(const InputView& x, const InputView& expert_idx,
                                                   const InputView& scale, const InputView& offset,
                                                   const defs::moe_init_routing_v3::Attrs& attrs);
// expert_tokens_count_or_cumsum's shape.
std::vector<int64_t> MoeInitRoutingV3CountsShape(const defs::moe_init_routing_v3::Attrs& attrs);
// Validates and computes on host memory (inputs and outputs); rows on the session's intra-op pool.
void ComputeMoeInitRoutingV3(Ort::KernelContext& ctx, const InitRoutingV3Inputs& in,
                             const defs::moe_init_routing_v3::Attrs& attrs, const HostOutputFn& output);

// The generated definition plus the output type the attributes decide.
struct MoeInitRoutingV3Def : defs::moe_init_routing_v3::Def {
  // expanded_x is x's type without quantisation and int8 with it.
  static std::vector<ONNXTensorElementDataType> OutputTypes(const OrtKernelInfo* info,
                                                            const std::vector<GraphTensor>& inputs) {
    std::vector<ONNXTensorElementDataType> types(kNumOutputs, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED);
    const int64_t quant =
        ReadIntAttr(info, defs::moe_init_routing_v3::kName,
                    defs::moe_init_routing_v3::kAttrs[defs::moe_init_routing_v3::kAttrQuantMode]);
    types[defs::moe_init_routing_v3::kOutExpandedX] =
        quant != -1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 : inputs[defs::moe_init_routing_v3::kInX].type;
    return types;
  }
};

}  // namespace ascend_moe
