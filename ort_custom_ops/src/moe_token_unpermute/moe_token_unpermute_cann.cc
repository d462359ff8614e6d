#include "moe_token_unpermute_cann.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_token_unpermute_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_unpermute.h"

namespace ascend_moe {

MoeTokenUnpermuteCannKernel::MoeTokenUnpermuteCannKernel(const OrtKernelInfo* info)
    : attrs_(unpermute::ReadAttrs(info)), node_(std::make_unique<NativeOrHost>(info, unpermute::kName)) {}

void MoeTokenUnpermuteCannKernel::Compute(Ort::KernelContext& ctx) {
  using namespace unpermute;
  const TokenUnpermuteInputs in = GetInputViews(ctx, kName, kInputs);
  cpu::WeightedGatherBuffers device_buffers;
  const cpu::WeightedGatherParams p = ValidateMoeTokenUnpermute(in, &device_buffers);
  const InputView &tokens = in[kInPermutedTokens], &idx = in[kInSortedIndices], &probs = in[kInProbs];
  void* out =
      GetCheckedOutput(ctx, kName, kOutputs, kOutUnpermutedTokens, {p.num_out_rows, p.hidden}, tokens.type,
                       /*required=*/true);
  if (p.num_out_rows == 0 || p.hidden == 0) return;  // empty
  cann::MoeTokenUnpermuteDeviceArgs a;
  AclTypeOf(tokens.type, &a.token_type);
  if (probs.present) AclTypeOf(probs.type, &a.probs_type);
  a.tokens = p.num_out_rows;
  a.k = p.k;
  a.hidden = p.hidden;
  a.rows = tokens.shape[0];
  const std::string blocker =
      node_->Blocker(cann::MoeTokenUnpermuteNativeBlocker(a), cann::kAclnnMoeTokenUnpermute);
  CannDevice device(ctx, kInPermutedTokens);
  auto run_on_host = [&]() {
    CannHostStage stage(ctx, device.context());
    TokenUnpermuteInputs host = in;
    host[kInPermutedTokens] = stage.Host(tokens, false);
    cpu::WeightedGatherBuffers b;
    const cpu::WeightedGatherParams hp = ValidateMoeTokenUnpermute(host, &b);
    b.out = stage.Output(kName, kOutputs, kOutUnpermutedTokens, {p.num_out_rows, p.hidden}, tokens.type);
    cpu::WeightedGatherRows(hp, b, 0, hp.num_out_rows);
    stage.Finish();
  };
  if (!blocker.empty()) {
    node_->Fallback(blocker);
    run_on_host();
    return;
  }
  node_->Launch(
      [&]() {
        std::vector<int32_t> index(static_cast<size_t>(idx.size));
        for (int64_t i = 0; i < idx.size; ++i) {
          index[i] = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                         ? static_cast<int32_t>(static_cast<const int64_t*>(idx.data)[i])
                         : static_cast<const int32_t*>(idx.data)[i];
        }
        a.index_host = index.data();
        a.probs_host = probs.present ? probs.data : nullptr;
        a.permuted = tokens.data;
        a.out = out;
        cann::LaunchMoeTokenUnpermute(device.context(), a);
      },
      run_on_host);
}

}  // namespace ascend_moe
