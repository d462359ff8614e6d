// GroupedMatmul kernel for the CANN execution provider: validates on the host (group_list is a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "grouped_matmul_validate.h"

#include "ops_src/cann/grouped_matmul.h"

namespace ascend_moe {

class GroupedMatmulCann {
 public:
  static constexpr const char* kName = gmm::kName;
  // The group list is checked on the host (monotonic, within M) and sizes the plan.
  static OrtMemType InputMemoryType(size_t index) {
    return index == gmm::kInGroupList ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit GroupedMatmulCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  gmm::Attrs attrs_;
};

GroupedMatmulCann::GroupedMatmulCann(const OrtKernelInfo* info) : attrs_(gmm::ReadAttrs(info)) {
  // The type rules fail at session creation, as on the CPU EP.
  const GroupedMatmulTypes types =
      CheckGroupedMatmulTypes(GroupedMatmulGraphTypes(KernelInputs(info, gmm::kNumIns)), attrs_.output_dtype);
  if (!types.error.empty()) Fail(types.error);
}

void GroupedMatmulCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
  using namespace gmm;
  const GroupedMatmulInputs in = GetInputViews(ctx, kName, kInputs);
  const InputView& g = in[kInGroupList];  // host memory
  cann::GroupedMatmulDeviceArgs args;
  args.params = ValidateGroupedMatmulShapes(in, attrs_);
  args.ends = GroupedMatmulEnds(g, args.params.rows, attrs_.group_list_type);
  args.group_list_type = attrs_.group_list_type;
  args.group_list.resize(static_cast<size_t>(g.size));
  for (int64_t i = 0; i < g.size; ++i) {
    args.group_list[i] = g.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                             ? static_cast<const int64_t*>(g.data)[i]
                             : static_cast<const int32_t*>(g.data)[i];
  }
  args.has_bias = in[kInBias].present;
  args.x = in[kInX].data;
  args.weight = in[kInWeight].data;
  args.bias = args.has_bias ? in[kInBias].data : nullptr;
  auto optional = [&](In i) { return in[i].present ? in[i].data : nullptr; };
  args.scale = optional(kInScale);
  args.antiquant_scale = optional(kInAntiquantScale);
  args.antiquant_offset = optional(kInAntiquantOffset);
  args.per_token_scale = optional(kInPerTokenScale);
  const ONNXTensorElementDataType y_type =
      CheckGroupedMatmulTypes(GroupedMatmulViewTypes(in), attrs_.output_dtype).y;
  args.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {args.params.rows, args.params.cols}, y_type,
                            /*required=*/true);
  if (args.params.rows == 0 || args.params.cols == 0) return;
  cann::GroupedMatmulPath path = cann::ChooseGroupedMatmulPath(args);
  if (path.call && node.Rejected(&path.reason)) path.call = nullptr;
  if (!path.call) node.Fallback(path.reason);
  CannDevice device(ctx, kInX);
  cann::LaunchGroupedMatmul(device.context(), args, &path);
  if (path.rejected) node.Reject(path.reason);
}

const OrtCustomOp* GroupedMatmulCannOp() {
  return KernelOp<GroupedMatmulDef, CannKernel<GroupedMatmulCann>>();
}

}  // namespace ascend_moe
