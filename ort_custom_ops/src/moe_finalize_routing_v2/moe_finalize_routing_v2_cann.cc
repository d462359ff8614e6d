// MoeFinalizeRoutingV2 kernel for the CANN execution provider: validates on the host (the row and
// expert indices are host inputs), then runs aclnnMoeFinalizeRoutingV2 on the EP's stream where
// its limits allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "moe_finalize_routing_v2_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_finalize_routing_v2.h"

namespace ascend_moe {

namespace {

std::vector<int32_t> Int32Copy(const InputView& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.size));
  for (int64_t i = 0; i < v.size; ++i) {
    out[i] = v.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                 ? static_cast<int32_t>(static_cast<const int64_t*>(v.data)[i])
                 : static_cast<const int32_t*>(v.data)[i];
  }
  return out;
}

}  // namespace

class MoeFinalizeRoutingV2Cann {
 public:
  static constexpr const char* kName = finalize::kName;
  // The indices are checked on the host (the NPU operator would read out of bounds).
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_finalize_routing_v2;
    return index == kInExpandedRowIdx || index == kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeFinalizeRoutingV2Cann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::moe_finalize_routing_v2::Attrs attrs_;
};

MoeFinalizeRoutingV2Cann::MoeFinalizeRoutingV2Cann(const OrtKernelInfo* info)
    : attrs_(finalize::ReadAttrs(info)) {}

void MoeFinalizeRoutingV2Cann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
  using namespace finalize;
  const FinalizeRoutingV2Inputs in = GetInputViews(ctx, kName, kInputs);
  cpu::WeightedGatherBuffers device_buffers;
  const cpu::WeightedGatherParams p = ValidateMoeFinalizeRoutingV2(in, attrs_.drop_pad_mode, &device_buffers);
  const ONNXTensorElementDataType type = in[kInExpandedX].type;
  cann::FinalizeRoutingV2Call c;
  AclTypeOf(type, &c.type);
  if (in[kInScales].present) AclTypeOf(in[kInScales].type, &c.scales_type);
  c.tokens = p.num_out_rows;
  c.k = p.k;
  c.hidden = p.hidden;
  c.drop_pad_mode = attrs_.drop_pad_mode;
  c.experts = in[kInBias].present ? in[kInBias].shape[0] : 0;
  const std::string blocker = node.Blocker(cann::MoeFinalizeRoutingV2NativeBlocker(c, in[kInScales].present),
                                           cann::kAclnnMoeFinalizeRoutingV2);
  if (p.num_out_rows == 0 || p.hidden == 0) {  // y is empty
    GetCheckedOutput(ctx, kName, kOutputs, kOutY, {p.num_out_rows, p.hidden}, type, /*required=*/true);
    return;
  }
  CannDevice device(ctx, kInExpandedX);
  auto run_on_host = [&]() {
    CannHostStage stage(ctx, device.context());
    FinalizeRoutingV2Inputs host = in;
    for (size_t i = 0; i < host.size(); ++i)
      host[i] = stage.Host(in[i], i == kInExpandedRowIdx || i == kInExpertIdx);
    cpu::WeightedGatherBuffers b;
    const cpu::WeightedGatherParams hp = ValidateMoeFinalizeRoutingV2(host, attrs_.drop_pad_mode, &b);
    b.out = stage.Output(kName, kOutputs, kOutY, {p.num_out_rows, p.hidden}, type);
    cpu::WeightedGatherRows(hp, b, 0, hp.num_out_rows);
    stage.Finish();
  };
  node.Run(
      blocker,
      [&]() {
        const std::vector<int32_t> index = Int32Copy(in[kInExpandedRowIdx]);
        std::vector<int32_t> experts;
        if (in[kInBias].present) experts = Int32Copy(in[kInExpertIdx]);
        const InputView& x = in[kInExpandedX];
        c.rows = x.shape[0];
        c.capacity = x.shape.size() == 3 ? x.shape[1] : 0;
        c.expanded_x = x.data;
        c.x1 = in[kInX1].present ? in[kInX1].data : nullptr;
        c.x2 = in[kInX2].present ? in[kInX2].data : nullptr;
        c.bias = in[kInBias].present ? in[kInBias].data : nullptr;
        c.scales = in[kInScales].present ? in[kInScales].data : nullptr;
        c.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {p.num_out_rows, p.hidden}, type,
                               /*required=*/true);
        cann::LaunchMoeFinalizeRoutingV2(device.context(), c, index.data(),
                                         experts.empty() ? nullptr : experts.data());
      },
      run_on_host);
}

const OrtCustomOp* MoeFinalizeRoutingV2CannOp() {
  return KernelOp<defs::moe_finalize_routing_v2::Def, CannKernel<MoeFinalizeRoutingV2Cann>>();
}

}  // namespace ascend_moe
