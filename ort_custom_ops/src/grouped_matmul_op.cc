// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): the op definition (inputs,
// outputs, attributes, shape inference) and the CPU kernel, which validates
// (grouped_matmul_validate) and runs ops_src/cpu's work items on the session's intra-op pool.
// CPU execution provider only: on a session with another provider ORT places the node on the CPU.
#include <iterator>
#include <string>
#include <vector>

#include "grouped_matmul_validate.h"
#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace {

constexpr const char* kName = gmm_defs::kName;

// y is x's type, [M, N] (symbolic dims kept); [?, ?] when a rank is unknown (a wrong rank fails
// at run time with the validation's message). Bad attributes fail here after y is declared.
OrtStatusPtr ORT_API_CALL InferGroupedMatmulShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  GroupedMatmulAttrs attrs;
  attrs.group_list_type = InferAttrInt(api, ctx, gmm_defs::kAttrs[gmm_defs::kAttrGroupListType]);
  attrs.transpose_weight = InferAttrInt(api, ctx, gmm_defs::kAttrs[gmm_defs::kAttrTransposeWeight]);
  const std::string error = CheckGroupedMatmulAttrs(attrs);
  InferredTensor x{}, w{};
  if (GetInferInput(api, ctx, gmm_defs::kInX, &x)) {
    InferredTensor y{x.type, {InferDim{}, InferDim{}}, true};
    if (x.dims.size() == 2) y.dims[0] = x.dims[0];
    if (GetInferInput(api, ctx, gmm_defs::kInWeight, &w) && w.dims.size() == 3) {
      y.dims[1] = w.dims[attrs.transpose_weight == 1 ? 1 : 2];
    }
    if (OrtStatusPtr s = SetInferOutput(api, ctx, gmm_defs::kOutY, y)) return s;
  }
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

struct GroupedMatmulCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit GroupedMatmulCpuKernel(const OrtKernelInfo* info) {
    attrs_.group_list_type = ReadIntAttr(info, kName, gmm_defs::kAttrs[gmm_defs::kAttrGroupListType]);
    attrs_.transpose_weight = ReadIntAttr(info, kName, gmm_defs::kAttrs[gmm_defs::kAttrTransposeWeight]);
    std::string error = CheckGroupedMatmulAttrs(attrs_);
    if (error.empty()) {  // the generic checks ran already; the bias rule fails at session creation too
      const std::vector<GraphTensor> in = KernelInputs(info, std::size(gmm_defs::kInputs));
      error = CheckGroupedMatmulBiasType(in[gmm_defs::kInX].type, in[gmm_defs::kInBias].type);
    }
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    const InputView x = GetInputView(ctx, gmm_defs::kInX);
    const InputView w = GetInputView(ctx, gmm_defs::kInWeight);
    const InputView g = GetInputView(ctx, gmm_defs::kInGroupList);
    const InputView bias = GetInputView(ctx, gmm_defs::kInBias);
    const cpu::GroupedMatmulParams params = ValidateGroupedMatmulShapes(x, w, g, bias, attrs_);
    const std::vector<int64_t> ends = GroupedMatmulEnds(g, params.rows, attrs_.group_list_type);
    cpu::GroupedMatmulBuffers b;
    b.x = x.data;
    b.weight = w.data;
    b.bias = bias.present ? bias.data : nullptr;
    b.y = GetCheckedOutput(ctx, kName, gmm_defs::kOutputs, gmm_defs::kOutY, {params.rows, params.cols}, x.type,
                           /*required=*/true);
    cpu::GroupedMatmulPlan plan;
    plan.Build(params, ends.data());
    plan.Prepare(b);
    ParallelForRange(ctx, plan.num_items(), 1, [&](int64_t begin, int64_t end) { plan.RunItems(b, begin, end); });
    ParallelForRange(ctx, plan.num_finish_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.FinishItems(b, begin, end); });
  }

 private:
  GroupedMatmulAttrs attrs_;
};

// The op definition (docs/operators.md §4.1).
struct GroupedMatmulDef {
  static constexpr const char* kName = gmm_defs::kName;
  static constexpr int kSinceVersion = gmm_defs::kSinceVersion;
  static constexpr const ParamSpec* kInputs = gmm_defs::kInputs;
  static constexpr size_t kNumInputs = std::size(gmm_defs::kInputs);
  static constexpr const ParamSpec* kOutputs = gmm_defs::kOutputs;
  static constexpr size_t kNumOutputs = std::size(gmm_defs::kOutputs);
  static constexpr const AttrSpec* kAttrs = gmm_defs::kAttrs;
  static constexpr size_t kNumAttrs = std::size(gmm_defs::kAttrs);
  static constexpr auto InferShapes = &InferGroupedMatmulShapes;
};

}  // namespace

std::vector<const OrtCustomOp*> GroupedMatmulOps() {
  static const AscendMoeOp<GroupedMatmulDef, GroupedMatmulCpuKernel> cpu_op;
  return {&cpu_op};
}

}  // namespace ascend_moe
