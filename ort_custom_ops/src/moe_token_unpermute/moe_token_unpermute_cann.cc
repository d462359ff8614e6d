// MoeTokenUnpermute kernel for the CANN execution provider: validates on the host (sorted_indices
// and probs are host inputs: which slots are read depends on both), then runs
// aclnnMoeTokenUnpermute on the EP's stream where its limits allow, or the CPU kernel on host
// copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_token_unpermute_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_unpermute.h"

namespace ascend_moe {

class MoeTokenUnpermuteCann {
 public:
  static constexpr const char* kName = unpermute::kName;
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_token_unpermute;
    return index == kInSortedIndices || index == kInProbs ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeTokenUnpermuteCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::moe_token_unpermute::Attrs attrs_;
};

MoeTokenUnpermuteCann::MoeTokenUnpermuteCann(const OrtKernelInfo* info)
    : attrs_(unpermute::ReadAttrs(info)) {}

void MoeTokenUnpermuteCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
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
      node.Blocker(cann::MoeTokenUnpermuteNativeBlocker(a), cann::kAclnnMoeTokenUnpermute);
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
  node.Run(
      blocker,
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

const OrtCustomOp* MoeTokenUnpermuteCannOp() {
  return KernelOp<defs::moe_token_unpermute::Def, CannKernel<MoeTokenUnpermuteCann>>();
}

}  // namespace ascend_moe
