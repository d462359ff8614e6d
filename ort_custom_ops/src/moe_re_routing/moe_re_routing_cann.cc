#include "moe_re_routing_cann.h"

#include "ops_src/cann/moe_re_routing.h"

namespace ascend_moe {

using namespace rerouting_defs;

MoeReRoutingCannKernel::MoeReRoutingCannKernel(const OrtKernelInfo* info)
    : attrs_(ReadAttrs(info)), node_(std::make_unique<NativeOrHost>(info, kName, "CANN copy fallback")) {}

void MoeReRoutingCannKernel::Compute(Ort::KernelContext& ctx) {
  const auto in = GetInputViews(ctx, kName, kInputs);
  const InputView& tokens = in[kInTokens];
  const InputView& counts = in[kInExpertTokenNumPerRank];  // host memory
  const InputView& scales = in[kInPerTokenScales];
  cann::MoeReRoutingDeviceArgs args;
  args.params = ValidateMoeReRoutingShapes(tokens, counts, scales, attrs_);
  ValidateMoeReRoutingCounts(args.params, counts.data);
  args.token_type_known = AclTypeOf(tokens.type, &args.token_type);
  args.hidden = tokens.shape[1];
  if (scales.present) {
    AclTypeOf(scales.type, &args.scale_type);
    args.scale_rank = static_cast<int>(scales.shape.size());
  }
  args.counts_host = counts.data;

  auto output = [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
    return GetCheckedOutput(ctx, kName, kOutputs, i, shape, type,
                            /*required=*/true);
  };
  args.tokens = tokens.data;
  args.permute_tokens = output(kOutPermuteTokens, tokens.shape, tokens.type);
  if (scales.present) {
    args.scales = scales.data;
    args.permute_scales = output(kOutPermutePerTokenScales, scales.shape, scales.type);
  } else {
    output(kOutPermutePerTokenScales, {0}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  }
  args.permute_idx = static_cast<int32_t*>(
      output(kOutPermuteTokenIdx, {args.params.num_tokens}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32));
  args.expert_token_num = output(kOutExpertTokenNum, {args.params.num_experts}, counts.type);

  cann::MoeReRoutingPath path = cann::ChooseMoeReRoutingPath(args);
  if (path.call && node_->Rejected(&path.reason)) path.call = nullptr;
  if (!path.call) node_->Fallback(path.reason);
  CannDevice device(ctx, kInTokens);
  cann::LaunchMoeReRouting(device.context(), args, &path);
  if (path.rejected) node_->Reject(path.reason);
}

}  // namespace ascend_moe
