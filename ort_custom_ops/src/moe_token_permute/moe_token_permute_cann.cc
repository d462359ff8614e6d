#include "moe_token_permute_cann.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_token_permute_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_permute.h"

namespace ascend_moe {

namespace {
namespace tp = defs::moe_token_permute;
}  // namespace

MoeTokenPermuteCannKernel::MoeTokenPermuteCannKernel(const OrtKernelInfo* info)
    : attrs_(tp::ReadAttrs(info)), node_(std::make_unique<NativeOrHost>(info, tp::kName)) {}

void MoeTokenPermuteCannKernel::Compute(Ort::KernelContext& ctx) {
  using namespace tp;
  const TokenPermuteInputs in = GetInputViews(ctx, kName, kInputs);
  const InputView &tokens = in[kInTokens], &idx = in[kInIndices];
  const cpu::MoeInitRoutingParams p = ValidateMoeTokenPermute(tokens, idx, attrs_);
  cann::MoeTokenPermuteDeviceArgs a;
  AclTypeOf(tokens.type, &a.token_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.rows = p.num_out_rows;
  a.indices_rank = static_cast<int>(idx.shape.size());
  a.indices_int64 = p.idx_int64;
  const std::string blocker =
      node_->Blocker(cann::MoeTokenPermuteNativeBlocker(a), cann::kAclnnMoeTokenPermute);
  CannDevice device(ctx, kInTokens);
  // The ids are checked on the host in either case (the fallback's CPU code checks them itself).
  cpu::MoeInitRoutingPlan plan;
  const int64_t bad = blocker.empty() ? plan.Build(p, idx.data) : -1;
  auto run_on_host = [&]() {
    CannHostStage stage(ctx, device.context());
    TokenPermuteInputs host = in;
    for (size_t i = 0; i < host.size(); ++i) host[i] = stage.Host(in[i], i == kInIndices);
    ComputeMoeTokenPermute(ctx, host, attrs_,
                           [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
                             return stage.Output(kName, kOutputs, i, shape, type);
                           });
    stage.Finish();
  };
  if (!blocker.empty() || bad >= 0) {  // a bad id: the CPU code reports it
    if (bad < 0 && p.num_tokens > 0) node_->Fallback(blocker);
    run_on_host();
    return;
  }
  node_->Launch(
      [&]() {
        a.indices_host = idx.data;
        a.x = tokens.data;
        a.permuted =
            GetCheckedOutput(ctx, kName, kOutputs, kOutPermutedTokens, {a.rows, a.hidden}, tokens.type, true);
        a.sorted_indices = GetCheckedOutput(ctx, kName, kOutputs, kOutSortedIndices, {a.tokens * a.k},
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true);
        cann::LaunchMoeTokenPermute(device.context(), a);
      },
      run_on_host);
}

}  // namespace ascend_moe
