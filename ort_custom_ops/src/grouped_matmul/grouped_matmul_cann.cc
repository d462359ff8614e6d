// GroupedMatmul kernel for the CANN execution provider: validates on the host (group_list is a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "grouped_matmul_validate.h"

#include "ops_src/cann/grouped_matmul.h"

namespace ascend_moe {

namespace {

// The group list is checked on the host (monotonic, within M) and sizes the plan.
using GroupedMatmulCannOptions = CannOptions<gmm::kInGroupList>;

void RunGroupedMatmulCann(CannCall<GroupedMatmulDef, GroupedMatmulCannOptions>& call) {
  using namespace gmm;
  const GroupedMatmulInputs& in = call.in;
  const InputView& g = in[kInGroupList];  // host memory
  cann::GroupedMatmulDeviceArgs args;
  args.params = ValidateGroupedMatmulShapes(in, call.attrs);
  args.ends = GroupedMatmulEnds(g, args.params.rows, call.attrs.group_list_type);
  args.group_list_type = call.attrs.group_list_type;
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
  args.y = call.Output(kOutY, {args.params.rows, args.params.cols},
                       CheckGroupedMatmulTypes(GroupedMatmulViewTypes(in), call.attrs.output_dtype).y);
  if (args.params.rows == 0 || args.params.cols == 0) return;
  call.RunPath(cann::ChooseGroupedMatmulPath(args), kInX,
               [&](const auto& device, auto* path) { cann::LaunchGroupedMatmul(device, args, path); });
}

}  // namespace

const OrtCustomOp* GroupedMatmulCannOp() {
  return CannKernelOp<GroupedMatmulDef, GroupedMatmulCannOptions, RunGroupedMatmulCann>();
}

}  // namespace ascend_moe
