// MoeRoutedExperts kernel for the CANN execution provider: validates on the host (expert_idx is a
// host input), then runs ops_src/cann's operator chain on the EP's stream. Registered beside the
// CPU kernel.
#include "cann_kernel.h"
#include "moe_routed_experts_validate.h"

#include "ops_src/cann/moe_routed_experts.h"

namespace ascend_moe {

namespace {

// The expert ids are checked on the host (the NPU operators would read out of bounds).
using MoeRoutedExpertsCannOptions = CannOptions<experts::kInExpertIdx>;

void RunMoeRoutedExpertsCann(CannCall<experts::Def, MoeRoutedExpertsCannOptions>& call) {
  using namespace experts;
  const RoutedExpertsInputs& in = call.in;
  cann::MoeRoutedExpertsDeviceArgs args;
  args.params = ValidateMoeRoutedExpertsShapes(in, call.attrs);
  args.expert_idx_host = in[kInExpertIdx].data;
  const int64_t bad = FirstBadExpertIndex(args.params, args.expert_idx_host);
  if (bad >= 0) FailExpertIndex(args.params, args.expert_idx_host, bad);
  args.y = static_cast<float*>(
      call.Output(kOutY, {args.params.tokens, args.params.hidden}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT));
  if (args.params.tokens == 0 || args.params.hidden == 0) return;  // y is empty
  args.x = static_cast<const float*>(in[kInX].data);
  args.routing_weights = static_cast<const float*>(in[kInRoutingWeights].data);
  if (args.params.quant_bits == 0) {
    args.gate_up = static_cast<const float*>(in[kInGateUpWeights].data);
    args.down = static_cast<const float*>(in[kInDownWeights].data);
  } else {
    auto bytes = [&](In i, size_t element) {
      return static_cast<size_t>(NumElements(in[i].shape)) * element;
    };
    args.gate_up_q = static_cast<const int8_t*>(in[kInGateUpWeights].data);
    args.down_q = static_cast<const int8_t*>(in[kInDownWeights].data);
    args.gate_up_scales = static_cast<const float*>(in[kInGateUpScales].data);
    args.down_scales = static_cast<const float*>(in[kInDownScales].data);
    args.gate_up_q_bytes = bytes(kInGateUpWeights, 1);
    args.down_q_bytes = bytes(kInDownWeights, 1);
    args.gate_up_scales_bytes = bytes(kInGateUpScales, sizeof(float));
    args.down_scales_bytes = bytes(kInDownScales, sizeof(float));
  }
  args.gate_up_bias = static_cast<const float*>(in[kInGateUpBias].data);  // null when absent
  args.down_bias = static_cast<const float*>(in[kInDownBias].data);
  call.RunPath(cann::ChooseMoeRoutedExpertsPath(args.params), kInX,
               [&](const auto& device, auto* path) { cann::LaunchMoeRoutedExperts(device, args, path); });
}

}  // namespace

const OrtCustomOp* MoeRoutedExpertsCannOp() {
  return CannKernelOp<experts::Def, MoeRoutedExpertsCannOptions, RunMoeRoutedExpertsCann>();
}

}  // namespace ascend_moe
