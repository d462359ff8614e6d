// MoeTokenPermute kernel for the CANN execution provider: validates on the host (indices is a
// host input), then runs aclnnMoeTokenPermute on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include "moe_token_permute_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_permute.h"

namespace ascend_moe {

namespace {

namespace tp = defs::moe_token_permute;

// The ids are checked on the host.
using MoeTokenPermuteCannOptions = CannOptions<tp::kInIndices>;

void RunMoeTokenPermuteCann(CannCall<tp::Def, MoeTokenPermuteCannOptions>& call) {
  using namespace tp;
  const InputView &tokens = call.in[kInTokens], &idx = call.in[kInIndices];
  const cpu::MoeInitRoutingParams p = ValidateMoeTokenPermute(tokens, idx, call.attrs);
  cann::MoeTokenPermuteDeviceArgs a;
  AclTypeOf(tokens.type, &a.token_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.rows = p.num_out_rows;
  a.indices_rank = static_cast<int>(idx.shape.size());
  a.indices_int64 = p.idx_int64;
  const std::string blocker =
      call.node.Blocker(cann::MoeTokenPermuteNativeBlocker(a), cann::kAclnnMoeTokenPermute);
  CannDevice device(call.ctx, kInTokens);
  // The ids are checked on the host in either case (the fallback's CPU code checks them itself).
  cpu::MoeInitRoutingPlan plan;
  const int64_t bad = blocker.empty() ? plan.Build(p, idx.data) : -1;
  auto native = [&]() {
    a.indices_host = idx.data;
    a.x = tokens.data;
    a.permuted = call.Output(kOutPermutedTokens, {a.rows, a.hidden}, tokens.type);
    a.sorted_indices = call.Output(kOutSortedIndices, {a.tokens * a.k}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    cann::LaunchMoeTokenPermute(device.context(), a);
  };
  auto on_host = [&]() {
    call.OnHostCopies(device.context(), [&](const TokenPermuteInputs& host, const HostOutputFn& output) {
      ComputeMoeTokenPermute(call.ctx, host, call.attrs, output);
    });
  };
  call.node.Run(bad >= 0 ? std::string("a bad id: the CPU code reports it") : blocker, native, on_host,
                bad < 0 && p.num_tokens > 0);
}

}  // namespace

const OrtCustomOp* MoeTokenPermuteCannOp() {
  return CannKernelOp<tp::Def, MoeTokenPermuteCannOptions, RunMoeTokenPermuteCann>();
}

}  // namespace ascend_moe
