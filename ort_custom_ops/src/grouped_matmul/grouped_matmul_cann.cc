#include "grouped_matmul_cann.h"

#include "ops_src/cann/grouped_matmul.h"

namespace ascend_moe {

GroupedMatmulCannKernel::GroupedMatmulCannKernel(const OrtKernelInfo* info)
    : attrs_(gmm::ReadAttrs(info)), node_(std::make_unique<NativeOrHost>(info, gmm::kName)) {
  // The type rules fail at session creation, as on the CPU EP.
  const GroupedMatmulTypes types =
      CheckGroupedMatmulTypes(GroupedMatmulGraphTypes(KernelInputs(info, gmm::kNumIns)), attrs_.output_dtype);
  if (!types.error.empty()) Fail(types.error);
}

void GroupedMatmulCannKernel::Compute(Ort::KernelContext& ctx) {
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
  if (path.call && node_->Rejected(&path.reason)) path.call = nullptr;
  if (!path.call) node_->Fallback(path.reason);
  CannDevice device(ctx, kInX);
  cann::LaunchGroupedMatmul(device.context(), args, &path);
  if (path.rejected) node_->Reject(path.reason);
}

}  // namespace ascend_moe
