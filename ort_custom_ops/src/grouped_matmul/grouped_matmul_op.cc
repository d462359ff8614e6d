// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rules and the CPU kernel, which
// runs ops_src/cpu's work items on the session's intra-op pool. The type, shape and group_list
// validation (docs/operators.md §4.3) is grouped_matmul_validate's, shared with the CANN kernel.
#include <cstdint>
#include <string>
#include <vector>

#include "cann_kernel.h"
#include "grouped_matmul_validate.h"
#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

namespace ascend_moe {

namespace gmm = defs::grouped_matmul;

using namespace gmm_types;

// y is x's type, [M, N] (symbolic dims kept); [?, ?] when a rank is unknown (a wrong rank fails
// at run time with the validation's message). Bad attributes fail here after y is declared.
OrtStatusPtr ORT_API_CALL gmm::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  const Attrs attrs = InferAttrs(api, ctx, &error);
  InferredTensor x{}, w{};
  if (GetInferInput(api, ctx, kInX, &x)) {
    // int8 x: output_dtype's type (float when it is missing: the kernel refuses the node)
    const ONNXTensorElementDataType y_type = x.type != kInt8 ? x.type
                                             : GroupedMatmulOutputType(attrs.output_dtype) != kNone
                                                 ? GroupedMatmulOutputType(attrs.output_dtype)
                                                 : kFloat;
    InferredTensor y{y_type, {InferDim{}, InferDim{}}, true};
    if (x.dims.size() == 2) y.dims[0] = x.dims[0];
    if (GetInferInput(api, ctx, kInWeight, &w) && w.dims.size() == 3) {
      y.dims[1] = w.dims[attrs.transpose_weight == 1 ? 1 : 2];
      if (w.type == kInt32 && attrs.transpose_weight != 1) {  // int4 words along N
        y.dims[1] = InferDim{y.dims[1].value >= 0 ? y.dims[1].value * kInt4PerWord : -1, {}};
      }
    }
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutY, y)) return s;
  }
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

std::string gmm::CheckAttrs(const Attrs& a) {
  if (a.group_list_type != kCumsum && a.group_list_type != kCount) {
    return Str(kName, ": attribute '", kAttrs[kAttrGroupListType].name,
               "' must be 0 (cumulative ends) or 1 (rows per group), got ", a.group_list_type);
  }
  if (a.transpose_weight != 0 && a.transpose_weight != 1) {
    return Str(kName, ": attribute '", kAttrs[kAttrTransposeWeight].name,
               "' must be 0 (weight [E, K, N]) or 1 (weight [E, N, K]), got ", a.transpose_weight);
  }
  if (a.output_dtype != 0 && GroupedMatmulOutputType(a.output_dtype) == kNone) {
    return Str(kName, ": attribute '", kAttrs[kAttrOutputDtype].name,
               "' must be 0 (x's type), 1 (float), 10 (float16), 16 (bfloat16) or 6 (int32), got ",
               a.output_dtype);
  }
  return {};
}

namespace {

void RunGroupedMatmulCpu(Ort::KernelContext& ctx, const GroupedMatmulInputs& in, const gmm::Attrs& attrs) {
  using namespace gmm;
  const cpu::GroupedMatmulParams params = ValidateGroupedMatmulShapes(in, attrs);
  const std::vector<int64_t> ends = GroupedMatmulEnds(in[kInGroupList], params.rows, attrs.group_list_type);
  const GroupedMatmulTypes mt = CheckGroupedMatmulTypes(GroupedMatmulViewTypes(in), attrs.output_dtype);
  cpu::GroupedMatmulBuffers b;
  b.x = in[kInX].data;
  b.weight = in[kInWeight].data;
  auto optional = [&](In i) { return in[i].present ? in[i].data : nullptr; };
  b.bias = optional(kInBias);
  b.scale = optional(kInScale);
  b.antiquant_scale = optional(kInAntiquantScale);
  b.antiquant_offset = optional(kInAntiquantOffset);
  b.per_token_scale = static_cast<const float*>(optional(kInPerTokenScale));
  b.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.rows, params.cols}, mt.y, /*required=*/true);
  cpu::GroupedMatmulPlan plan;
  plan.Build(params, ends.data());
  plan.Prepare(b);
  ParallelForRange(ctx, plan.num_items(), 1,
                   [&](int64_t begin, int64_t end) { plan.RunItems(b, begin, end); });
  ParallelForRange(ctx, plan.num_finish_items(), 1,
                   [&](int64_t begin, int64_t end) { plan.FinishItems(b, begin, end); });
}

}  // namespace

std::vector<const OrtCustomOp*> GroupedMatmulOps() {
  return OpKernels<GroupedMatmulDef, CpuKernel<GroupedMatmulDef, RunGroupedMatmulCpu>>(GroupedMatmulCannOp());
}

}  // namespace ascend_moe
