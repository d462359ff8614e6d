// MoeInitRouting kernel for the CANN execution provider: validates on the host (row_idx and
// expert_idx are host inputs), then runs aclnnMoeInitRouting on the EP's stream, or the CPU
// computation on host copies where it cannot. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_init_routing_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_init_routing.h"

namespace ascend_moe {

namespace {
namespace ir = defs::moe_init_routing;
}  // namespace

class MoeInitRoutingCann {
 public:
  static constexpr const char* kName = ir::kName;
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_init_routing;
    return index == kInRowIdx || index == kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeInitRoutingCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::moe_init_routing::Attrs attrs_;
};

MoeInitRoutingCann::MoeInitRoutingCann(const OrtKernelInfo* info) : attrs_(ir::ReadAttrs(info)) {}

void MoeInitRoutingCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
  using namespace ir;
  const InitRoutingInputs in = GetInputViews(ctx, kName, kInputs);
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRouting(in, attrs_);
  cann::MoeInitRoutingDeviceArgs a;
  AclTypeOf(in[kInX].type, &a.x_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.active_num = attrs_.active_num;
  a.rows = p.num_out_rows;
  const std::string blocker = node.Blocker(cann::MoeInitRoutingNativeBlocker(a), cann::kAclnnMoeInitRouting);
  CannDevice device(ctx, kInX);
  auto run_on_host = [&]() {  // the host computation validates the ids and row_idx itself
    CannHostStage stage(ctx, device.context());
    InitRoutingInputs host = in;
    for (size_t i = 0; i < host.size(); ++i) host[i] = stage.Host(in[i], i == kInRowIdx || i == kInExpertIdx);
    ComputeMoeInitRouting(ctx, host, attrs_,
                          [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
                            return stage.Output(kName, kOutputs, i, shape, type);
                          });
    stage.Finish();
  };
  node.Run(
      blocker,
      [&]() {
        CheckMoeInitRoutingIndices(in, p);
        const int64_t pairs = p.num_tokens * p.top_k;
        a.row_idx_host = static_cast<const int32_t*>(in[kInRowIdx].data);
        a.expert_idx_host = static_cast<const int32_t*>(in[kInExpertIdx].data);
        a.x = in[kInX].data;
        a.expanded_x =
            GetCheckedOutput(ctx, kName, kOutputs, kOutExpandedX, {a.rows, a.hidden}, in[kInX].type, true);
        a.expanded_row_idx = GetCheckedOutput(ctx, kName, kOutputs, kOutExpandedRowIdx, {pairs},
                                              ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true);
        a.expanded_expert_idx = GetCheckedOutput(ctx, kName, kOutputs, kOutExpandedExpertIdx, {pairs},
                                                 ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true);
        cann::LaunchMoeInitRouting(device.context(), a);
      },
      run_on_host, p.num_tokens > 0);
}

const OrtCustomOp* MoeInitRoutingCannOp() {
  return KernelOp<defs::moe_init_routing::Def, CannKernel<MoeInitRoutingCann>>();
}

}  // namespace ascend_moe
