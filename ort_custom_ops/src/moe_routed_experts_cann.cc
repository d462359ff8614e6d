#include "moe_routed_experts_cann.h"

#include "ops_src/cann/moe_routed_experts.h"

namespace ascend_moe {

MoeRoutedExpertsCannKernel::MoeRoutedExpertsCannKernel(const OrtKernelInfo* info)
    : attrs_(experts::ReadAttrs(info)), log_(std::make_unique<NodeLog>(info)) {}

void MoeRoutedExpertsCannKernel::Compute(Ort::KernelContext& ctx) {
  using namespace experts;
  const RoutedExpertsInputs in = GetInputViews(ctx, kName, kInputs);
  cann::MoeRoutedExpertsDeviceArgs args;
  args.params = ValidateMoeRoutedExpertsShapes(in, attrs_);
  args.expert_idx_host = in[kInExpertIdx].data;
  const int64_t bad = FirstBadExpertIndex(args.params, args.expert_idx_host);
  if (bad >= 0) FailExpertIndex(args.params, args.expert_idx_host, bad);
  args.y = static_cast<float*>(GetCheckedOutput(ctx, kName, kOutputs, kOutY,
                                                {args.params.tokens, args.params.hidden},
                                                ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true));
  if (args.params.tokens == 0 || args.params.hidden == 0) return;  // y is empty
  args.x = static_cast<const float*>(in[kInX].data);
  args.routing_weights = static_cast<const float*>(in[kInRoutingWeights].data);
  args.gate_up = static_cast<const float*>(in[kInGateUpWeights].data);
  args.down = static_cast<const float*>(in[kInDownWeights].data);
  const cann::MoeRoutedExpertsPath path = cann::ChooseMoeRoutedExpertsPath(args.params);
  if (!path.native) log_->WarnOnce(Str(kName, " runs on the host fallback: ", path.reason));
  CannDevice device(ctx, kInX);
  cann::LaunchMoeRoutedExperts(device.context(), args, path);
}

}  // namespace ascend_moe
