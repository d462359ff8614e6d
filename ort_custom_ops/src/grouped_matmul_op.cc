// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rules and the CPU kernel, which
// runs ops_src/cpu's work items on the session's intra-op pool. The validation is
// grouped_matmul_validate's, shared with the CANN kernel (grouped_matmul_cann).
#include <cstdint>
#include <string>
#include <vector>

#include "grouped_matmul_cann.h"
#include "grouped_matmul_validate.h"
#include "op_base.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

// y is x's type, [M, N] (symbolic dims kept); [?, ?] when a rank is unknown (a wrong rank fails
// at run time with the validation's message). Bad attributes fail here after y is declared.
OrtStatusPtr ORT_API_CALL gmm::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  Attrs attrs;
  attrs.group_list_type = InferAttrInt(api, ctx, kAttrs[kAttrGroupListType]);
  attrs.transpose_weight = InferAttrInt(api, ctx, kAttrs[kAttrTransposeWeight]);
  const std::string error = CheckAttrs(attrs);
  InferredTensor x{}, w{};
  if (GetInferInput(api, ctx, kInX, &x)) {
    InferredTensor y{x.type, {InferDim{}, InferDim{}}, true};
    if (x.dims.size() == 2) y.dims[0] = x.dims[0];
    if (GetInferInput(api, ctx, kInWeight, &w) && w.dims.size() == 3) {
      y.dims[1] = w.dims[attrs.transpose_weight == 1 ? 1 : 2];
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
  return {};
}

namespace {

struct GroupedMatmulCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit GroupedMatmulCpuKernel(const OrtKernelInfo* info) : attrs_(gmm::ReadAttrs(info)) {
    // The bias type rule fails at session creation too (the table's checks ran already).
    const std::vector<GraphTensor> in = KernelInputs(info, gmm::kNumIns);
    const std::string error = CheckGroupedMatmulBiasType(in[gmm::kInX].type, in[gmm::kInBias].type);
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace gmm;
    const GroupedMatmulInputs in = GetInputViews(ctx, kName, kInputs);
    const cpu::GroupedMatmulParams params = ValidateGroupedMatmulShapes(in, attrs_);
    const std::vector<int64_t> ends =
        GroupedMatmulEnds(in[kInGroupList], params.rows, attrs_.group_list_type);
    cpu::GroupedMatmulBuffers b;
    b.x = in[kInX].data;
    b.weight = in[kInWeight].data;
    b.bias = in[kInBias].present ? in[kInBias].data : nullptr;
    b.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.rows, params.cols}, in[kInX].type,
                           /*required=*/true);
    cpu::GroupedMatmulPlan plan;
    plan.Build(params, ends.data());
    plan.Prepare(b);
    ParallelForRange(ctx, plan.num_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.RunItems(b, begin, end); });
    ParallelForRange(ctx, plan.num_finish_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.FinishItems(b, begin, end); });
  }

 private:
  gmm::Attrs attrs_;
};

}  // namespace

std::vector<const OrtCustomOp*> GroupedMatmulOps() {
  static const AscendMoeOp<gmm::Def, GroupedMatmulCpuKernel> cpu_op;
  static const AscendMoeOp<gmm::Def, GroupedMatmulCannKernel> cann_op;
  return {&cpu_op, &cann_op};
}

}  // namespace ascend_moe
