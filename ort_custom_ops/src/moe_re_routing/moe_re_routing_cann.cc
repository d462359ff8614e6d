// MoeReRouting kernel for the CANN execution provider: validates on the host (the counts are a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "moe_re_routing_validate.h"

#include "ops_src/cann/moe_re_routing.h"

namespace ascend_moe {

using namespace rerouting_defs;

class MoeReRoutingCann {
 public:
  static constexpr const char* kName = rerouting_defs::kName;
  static constexpr const char* kFallback = "CANN copy fallback";
  // The counts are read on the host (validation, copy plan); ORT copies them there.
  static OrtMemType InputMemoryType(size_t index) {
    return index == rerouting_defs::kInExpertTokenNumPerRank ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeReRoutingCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  rerouting_defs::Attrs attrs_;
};

MoeReRoutingCann::MoeReRoutingCann(const OrtKernelInfo* info) : attrs_(ReadAttrs(info)) {}

void MoeReRoutingCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
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
  if (path.call && node.Rejected(&path.reason)) path.call = nullptr;
  if (!path.call) node.Fallback(path.reason);
  CannDevice device(ctx, kInTokens);
  cann::LaunchMoeReRouting(device.context(), args, &path);
  if (path.rejected) node.Reject(path.reason);
}

const OrtCustomOp* MoeReRoutingCannOp() {
  return KernelOp<defs::moe_re_routing::Def, CannKernel<MoeReRoutingCann>>();
}

}  // namespace ascend_moe
