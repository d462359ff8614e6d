// MoeTokenUnpermute kernel for the CANN execution provider: validates on the host (sorted_indices
// and probs are host inputs: which slots are read depends on both), then runs
// aclnnMoeTokenUnpermute on the EP's stream where its limits allow, or the CPU kernel on host
// copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_unpermute.h"
#include "weighted_gather_ort.h"

namespace ascend_moe {

namespace {

using MoeTokenUnpermuteCannOptions = CannOptions<unpermute::kInSortedIndices, unpermute::kInProbs>;

void RunMoeTokenUnpermuteCann(CannCall<unpermute::Def, MoeTokenUnpermuteCannOptions>& call) {
  using namespace unpermute;
  cpu::WeightedGatherBuffers device_buffers;
  const cpu::WeightedGatherParams p = ValidateMoeTokenUnpermute(call.in, call.attrs, &device_buffers);
  const InputView &tokens = call.in[kInPermutedTokens], &idx = call.in[kInSortedIndices],
                  &probs = call.in[kInProbs];
  const std::vector<int64_t> out_shape = {p.num_out_rows, p.hidden};
  void* out = call.Output(kOutUnpermutedTokens, out_shape, tokens.type);
  if (p.num_out_rows == 0 || p.hidden == 0) return;  // empty
  cann::MoeTokenUnpermuteDeviceArgs a;
  AclTypeOf(tokens.type, &a.token_type);
  if (probs.present) AclTypeOf(probs.type, &a.probs_type);
  a.tokens = p.num_out_rows;
  a.k = p.k;
  a.hidden = p.hidden;
  a.rows = tokens.shape[0];
  const std::string blocker =
      call.node.Blocker(cann::MoeTokenUnpermuteNativeBlocker(a), cann::kAclnnMoeTokenUnpermute);
  CannDevice device(call.ctx, kInPermutedTokens);
  auto native = [&]() {
    const std::vector<int32_t> index = Int32Values(idx);
    a.index_host = index.data();
    a.probs_host = probs.present ? probs.data : nullptr;
    a.permuted = tokens.data;
    a.out = out;
    cann::LaunchMoeTokenUnpermute(device.context(), a);
  };
  call.node.Run(blocker, native,
                [&]() { WeightedGatherOnHost(call, device.context(), ValidateMoeTokenUnpermute); });
}

}  // namespace

const OrtCustomOp* MoeTokenUnpermuteCannOp() {
  return CannKernelOp<unpermute::Def, MoeTokenUnpermuteCannOptions, RunMoeTokenUnpermuteCann>();
}

}  // namespace ascend_moe
