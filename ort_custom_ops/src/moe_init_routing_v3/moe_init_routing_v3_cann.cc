// MoeInitRoutingV3 kernel for the CANN execution provider: validates on the host (expert_idx is a
// host input), then runs aclnnMoeInitRoutingV3 on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_init_routing_v3_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_init_routing_v3.h"

namespace ascend_moe {

namespace {

namespace v3 = defs::moe_init_routing_v3;

[[noreturn]] void FailBadId(const cpu::MoeInitRoutingParams& p, const void* idx, int64_t bad) {
  const int64_t v =
      p.idx_int64 ? static_cast<const int64_t*>(idx)[bad] : static_cast<const int32_t*>(idx)[bad];
  Fail(Str(v3::kName, ": input 'expert_idx' must hold expert ids in [0, expert_num) = [0, ", p.expert_num,
           "), got ", v, " at [", bad / p.top_k, ", ", bad % p.top_k, "]"));
}

}  // namespace

class MoeInitRoutingV3Cann {
 public:
  static constexpr const char* kName = v3::kName;
  // The expert ids are checked on the host (the NPU operator would write out of bounds).
  static OrtMemType InputMemoryType(size_t index) {
    return index == defs::moe_init_routing_v3::kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeInitRoutingV3Cann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::moe_init_routing_v3::Attrs attrs_;
};

MoeInitRoutingV3Cann::MoeInitRoutingV3Cann(const OrtKernelInfo* info) : attrs_(v3::ReadAttrs(info)) {}

void MoeInitRoutingV3Cann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
  using namespace v3;
  const InitRoutingV3Inputs in = GetInputViews(ctx, kName, kInputs);
  const InputView &x = in[kInX], &idx = in[kInExpertIdx], &scale = in[kInScale];
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRoutingV3(x, idx, scale, in[kInOffset], attrs_);
  cann::MoeInitRoutingV3DeviceArgs a;
  a.x_type = cann::kAclFloat;
  AclTypeOf(x.type, &a.x_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.expert_num = p.expert_num;
  a.expert_start = p.expert_start;
  a.expert_end = p.expert_end;
  a.tokens_num_type = p.tokens_num_type;
  a.row_idx_type = p.row_idx_type;
  a.quant_mode = p.quant_mode;
  a.drop_pad_mode = p.drop_pad_mode;
  const std::string blocker =
      node.Blocker(cann::MoeInitRoutingV3NativeBlocker(a), cann::kAclnnMoeInitRoutingV3);
  CannDevice device(ctx, kInX);
  auto run_on_host = [&]() {
    CannHostStage stage(ctx, device.context());
    InitRoutingV3Inputs host = in;
    for (size_t i = 0; i < host.size(); ++i) host[i] = stage.Host(in[i], i == kInExpertIdx);
    ComputeMoeInitRoutingV3(ctx, host, attrs_,
                            [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
                              return stage.Output(kName, kOutputs, i, shape, type);
                            });
    stage.Finish();
  };
  node.Run(
      blocker,
      [&]() {
        // The ids are checked and the counts computed on the host, as the CPU kernel does.
        cpu::MoeInitRoutingPlan plan;
        const int64_t bad = plan.Build(p, idx.data);
        if (bad >= 0) FailBadId(p, idx.data, bad);
        const int64_t pairs = p.num_tokens * p.top_k;
        std::vector<int32_t> ids(static_cast<size_t>(pairs));
        for (int64_t i = 0; i < pairs; ++i) {
          ids[i] = p.idx_int64 ? static_cast<int32_t>(static_cast<const int64_t*>(idx.data)[i])
                               : static_cast<const int32_t*>(idx.data)[i];
        }
        const std::vector<int64_t> counts_shape = MoeInitRoutingV3CountsShape(attrs_);
        std::vector<int64_t> counts(static_cast<size_t>(NumElements(counts_shape)));
        plan.WriteCounts(counts.data());
        a.rows = plan.out_rows();
        a.expert_idx_host = ids.data();
        a.counts_host = counts.data();
        a.x = x.data;
        a.scale = scale.present ? scale.data : nullptr;
        auto output = [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
          return GetCheckedOutput(ctx, kName, kOutputs, i, shape, type, /*required=*/true);
        };
        a.expanded_x = output(kOutExpandedX, {a.rows, p.cols}, x.type);
        a.expanded_row_idx = output(kOutExpandedRowIdx, {pairs}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
        a.counts = output(kOutExpertTokensCountOrCumsum, counts_shape, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64);
        a.expanded_scale = output(kOutExpandedScale, {a.rows}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
        cann::LaunchMoeInitRoutingV3(device.context(), a);
      },
      run_on_host, p.num_tokens > 0);
}

const OrtCustomOp* MoeInitRoutingV3CannOp() {
  return KernelOp<MoeInitRoutingV3Def, CannKernel<MoeInitRoutingV3Cann>>();
}

}  // namespace ascend_moe
