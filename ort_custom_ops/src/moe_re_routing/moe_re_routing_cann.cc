// MoeReRouting kernel for the CANN execution provider: validates on the host (the counts are a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "moe_re_routing_validate.h"

#include "ops_src/cann/moe_re_routing.h"

namespace ascend_moe {

namespace {

using namespace rerouting_defs;

// The counts are read on the host (validation, copy plan); ORT copies them there.
struct MoeReRoutingCannOptions : CannOptions<kInExpertTokenNumPerRank> {
  static constexpr const char* kFallback = "CANN copy fallback";
};

void RunMoeReRoutingCann(CannCall<Def, MoeReRoutingCannOptions>& call) {
  const InputView& tokens = call.in[kInTokens];
  const InputView& counts = call.in[kInExpertTokenNumPerRank];  // host memory
  const InputView& scales = call.in[kInPerTokenScales];
  cann::MoeReRoutingDeviceArgs args;
  args.params = ValidateMoeReRoutingShapes(tokens, counts, scales, call.attrs);
  ValidateMoeReRoutingCounts(args.params, counts.data);
  args.token_type_known = AclTypeOf(tokens.type, &args.token_type);
  args.hidden = tokens.shape[1];
  if (scales.present) {
    AclTypeOf(scales.type, &args.scale_type);
    args.scale_rank = static_cast<int>(scales.shape.size());
  }
  args.counts_host = counts.data;

  args.tokens = tokens.data;
  args.permute_tokens = call.Output(kOutPermuteTokens, tokens.shape, tokens.type);
  if (scales.present) {
    args.scales = scales.data;
    args.permute_scales = call.Output(kOutPermutePerTokenScales, scales.shape, scales.type);
  } else {
    call.Output(kOutPermutePerTokenScales, {0}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  }
  args.permute_idx = static_cast<int32_t*>(
      call.Output(kOutPermuteTokenIdx, {args.params.num_tokens}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32));
  args.expert_token_num = call.Output(kOutExpertTokenNum, {args.params.num_experts}, counts.type);

  call.RunPath(cann::ChooseMoeReRoutingPath(args), kInTokens,
               [&](const auto& device, auto* path) { cann::LaunchMoeReRouting(device, args, path); });
}

}  // namespace

const OrtCustomOp* MoeReRoutingCannOp() {
  return CannKernelOp<Def, MoeReRoutingCannOptions, RunMoeReRoutingCann>();
}

}  // namespace ascend_moe
