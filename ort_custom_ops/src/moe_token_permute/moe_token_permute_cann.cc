// MoeTokenPermute kernel for the CANN execution provider: validates on the host (indices is a
// host input), then runs aclnnMoeTokenPermute on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_token_permute_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_token_permute.h"

namespace ascend_moe {

namespace {
namespace tp = defs::moe_token_permute;
}  // namespace

class MoeTokenPermuteCann {
 public:
  static constexpr const char* kName = tp::kName;
  // The ids are checked on the host.
  static OrtMemType InputMemoryType(size_t index) {
    return index == defs::moe_token_permute::kInIndices ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeTokenPermuteCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::moe_token_permute::Attrs attrs_;
};

MoeTokenPermuteCann::MoeTokenPermuteCann(const OrtKernelInfo* info) : attrs_(tp::ReadAttrs(info)) {}

void MoeTokenPermuteCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
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
      node.Blocker(cann::MoeTokenPermuteNativeBlocker(a), cann::kAclnnMoeTokenPermute);
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
  node.Run(
      bad >= 0 ? std::string("a bad id: the CPU code reports it") : blocker,
      [&]() {
        a.indices_host = idx.data;
        a.x = tokens.data;
        a.permuted =
            GetCheckedOutput(ctx, kName, kOutputs, kOutPermutedTokens, {a.rows, a.hidden}, tokens.type, true);
        a.sorted_indices = GetCheckedOutput(ctx, kName, kOutputs, kOutSortedIndices, {a.tokens * a.k},
                                            ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true);
        cann::LaunchMoeTokenPermute(device.context(), a);
      },
      run_on_host, bad < 0 && p.num_tokens > 0);
}

const OrtCustomOp* MoeTokenPermuteCannOp() {
  return KernelOp<defs::moe_token_permute::Def, CannKernel<MoeTokenPermuteCann>>();
}

}  // namespace ascend_moe
