#include "grouped_matmul_cann.h"

#include "ops_src/cann/grouped_matmul.h"

namespace ascend_moe {

namespace {

// The quantized forms (int8 / int4 weights, int8 x, their scales) have no CANN kernel yet: the
// input that asks for one, or empty for a float call.
std::string QuantizedInput(const GroupedMatmulInputs& in) {
  using namespace gmm;
  if (in[kInX].type != in[kInWeight].type) return kInputs[kInWeight].name;
  if (in[kInX].type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) return kInputs[kInX].name;
  for (In i : {kInScale, kInOffset, kInAntiquantScale, kInAntiquantOffset, kInPerTokenScale}) {
    if (in[i].present) return kInputs[i].name;
  }
  return {};
}

}  // namespace

GroupedMatmulCannKernel::GroupedMatmulCannKernel(const OrtKernelInfo* info)
    : attrs_(gmm::ReadAttrs(info)), log_(std::make_unique<NodeLog>(info)) {}

void GroupedMatmulCannKernel::Compute(Ort::KernelContext& ctx) {
  using namespace gmm;
  const GroupedMatmulInputs in = GetInputViews(ctx, kName, kInputs);
  const std::string quantized = QuantizedInput(in);
  if (!quantized.empty()) {
    Fail(Str(kName, ": input '", quantized, "' makes a quantized grouped matmul, which has no CANN kernel "
                    "yet; run this node on the CPU execution provider"));
  }
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
  args.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {args.params.rows, args.params.cols}, in[kInX].type,
                            /*required=*/true);
  if (args.params.rows == 0 || args.params.cols == 0) return;
  cann::GroupedMatmulPath path = cann::ChooseGroupedMatmulPath(args);
  if (path.call && rejection_->Get(&path.reason)) path.call = nullptr;
  if (!path.call) log_->WarnOnce(Str(kName, " runs on the host fallback: ", path.reason));
  CannDevice device(ctx, kInX);
  cann::LaunchGroupedMatmul(device.context(), args, &path);
  if (path.rejected) {
    rejection_->Remember(path.reason);
    log_->WarnOnce(Str(kName, " runs on the host fallback: ", path.reason));
  }
}

}  // namespace ascend_moe
