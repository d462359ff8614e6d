// MoeFinalizeRoutingV2 kernel for the CANN execution provider: validates on the host (the row and
// expert indices are host inputs), then runs aclnnMoeFinalizeRoutingV2 on the EP's stream where
// its limits allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_finalize_routing_v2.h"
#include "weighted_gather_ort.h"

namespace ascend_moe {

namespace {

// The indices are checked on the host (the NPU operator would read out of bounds).
using MoeFinalizeRoutingV2CannOptions = CannOptions<finalize::kInExpandedRowIdx, finalize::kInExpertIdx>;

void RunMoeFinalizeRoutingV2Cann(CannCall<finalize::Def, MoeFinalizeRoutingV2CannOptions>& call) {
  using namespace finalize;
  const finalize::Inputs& in = call.in;
  cpu::WeightedGatherBuffers device_buffers;
  const cpu::WeightedGatherParams p = ValidateMoeFinalizeRoutingV2(in, call.attrs, &device_buffers);
  const ONNXTensorElementDataType type = in[kInExpandedX].type;
  const std::vector<int64_t> y_shape = {p.num_out_rows, p.hidden};
  cann::FinalizeRoutingV2Call c;
  AclTypeOf(type, &c.type);
  if (in[kInScales].present) AclTypeOf(in[kInScales].type, &c.scales_type);
  c.tokens = p.num_out_rows;
  c.k = p.k;
  c.hidden = p.hidden;
  c.drop_pad_mode = call.attrs.drop_pad_mode;
  c.experts = in[kInBias].present ? in[kInBias].shape[0] : 0;
  const std::string blocker = call.node.Blocker(
      cann::MoeFinalizeRoutingV2NativeBlocker(c, in[kInScales].present), cann::kAclnnMoeFinalizeRoutingV2);
  if (p.num_out_rows == 0 || p.hidden == 0) {  // y is empty
    call.Output(kOutY, y_shape, type);
    return;
  }
  CannDevice device(call.ctx, kInExpandedX);
  auto native = [&]() {
    const std::vector<int32_t> index = Int32Values(in[kInExpandedRowIdx]);
    std::vector<int32_t> experts;
    if (in[kInBias].present) experts = Int32Values(in[kInExpertIdx]);
    const InputView& x = in[kInExpandedX];
    auto optional = [&](In i) { return in[i].present ? in[i].data : nullptr; };
    c.rows = x.shape[0];
    c.capacity = x.shape.size() == 3 ? x.shape[1] : 0;
    c.expanded_x = x.data;
    c.x1 = optional(kInX1);
    c.x2 = optional(kInX2);
    c.bias = optional(kInBias);
    c.scales = optional(kInScales);
    c.y = call.Output(kOutY, y_shape, type);
    cann::LaunchMoeFinalizeRoutingV2(device.context(), c, index.data(),
                                     experts.empty() ? nullptr : experts.data());
  };
  call.node.Run(blocker, native,
                [&]() { WeightedGatherOnHost(call, device.context(), ValidateMoeFinalizeRoutingV2); });
}

}  // namespace

const OrtCustomOp* MoeFinalizeRoutingV2CannOp() {
  return CannKernelOp<finalize::Def, MoeFinalizeRoutingV2CannOptions, RunMoeFinalizeRoutingV2Cann>();
}

}  // namespace ascend_moe
