// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): the op definition (inputs,
// outputs, attributes, shape inference), its validation (the messages of
// onnx_schemas.grouped_matmul) and the CPU kernel, which runs ops_src/cpu's work items on the
// session's intra-op pool. CPU execution provider only: on a session with another provider ORT
// places the node on the CPU.
#include <iterator>
#include <string>
#include <vector>

#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace {

namespace gmm_defs = defs::grouped_matmul;
constexpr const char* kName = gmm_defs::kName;
constexpr int64_t kCumsum = 0, kCount = 1;

struct GroupedMatmulAttrs {
  int64_t group_list_type = 0;
  int64_t transpose_weight = 0;
};

std::string CheckAttrs(const GroupedMatmulAttrs& a) {
  if (a.group_list_type != kCumsum && a.group_list_type != kCount) {
    return Str(kName, ": attribute 'group_list_type' must be 0 (cumulative ends) or 1 (rows per group), got ",
               a.group_list_type);
  }
  if (a.transpose_weight != 0 && a.transpose_weight != 1) {
    return Str(kName, ": attribute 'transpose_weight' must be 0 (weight [E, K, N]) or 1 (weight [E, N, K]), got ",
               a.transpose_weight);
  }
  return {};
}

// "bias must be x's type or float": the one type rule the generated tables cannot state. Empty
// when it holds or either type is unknown.
std::string CheckBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias) {
  if (x == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
      bias == x || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return {};
  }
  return Str(kName, ": input 'bias' must have the type of x (", TypeName(x), ") or be float, got ", TypeName(bias));
}

[[noreturn]] void FailInput(const char* name, const std::string& what_and_value) {
  Fail(Str(kName, ": input '", name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GmmType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GmmType::kBFloat16;
  return cpu::GmmType::kFloat32;
}

// Presence, types, ranks and dims (docs/operators.md §4.3); group_list values: GroupEnds.
cpu::GroupedMatmulParams ValidateShapes(const InputView& x, const InputView& w, const InputView& g,
                                        const InputView& bias, const GroupedMatmulAttrs& attrs) {
  const std::pair<const InputView*, const char*> required[] = {{&x, "x"}, {&w, "weight"}, {&g, "group_list"}};
  for (const auto& [v, name] : required) {
    if (!v->present) FailInput(name, "is required, got none");
  }
  const ONNXTensorElementDataType types[] = {x.type, w.type, g.type,
                                             bias.present ? bias.type : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED};
  std::string error = CheckInputTypes(kName, gmm_defs::kInputs, std::size(gmm_defs::kInputs), types);
  if (error.empty() && bias.present) error = CheckBiasType(x.type, bias.type);
  if (!error.empty()) Fail(error);
  if (x.shape.size() != 2) FailInput("x", Str("must be 2-D [M, K], got shape ", ShapeStr(x.shape)));
  const int64_t m = x.shape[0], k = x.shape[1];
  const bool t = attrs.transpose_weight != 0;
  const size_t k_axis = t ? 2 : 1;
  if (w.shape.size() != 3 || w.shape[0] < 1 || w.shape[k_axis] != k) {
    FailInput("weight", Str("must be 3-D ", t ? "[E, N, K]" : "[E, K, N]", " with E >= 1 and K = ", k,
                            " (x.shape[1]), got shape ", ShapeStr(w.shape)));
  }
  const int64_t e = w.shape[0], n = w.shape[3 - k_axis];
  if (g.shape.size() != 1 || g.shape[0] != e) {
    FailInput("group_list", Str("must be 1-D [E] with E = ", e, " (weight.shape[0]), got shape ", ShapeStr(g.shape)));
  }
  if (bias.present && bias.shape != std::vector<int64_t>{e, n}) {
    FailInput("bias", Str("must be [E, N] = [", e, ", ", n, "] (from weight), got shape ", ShapeStr(bias.shape)));
  }
  cpu::GroupedMatmulParams p;
  p.rows = m;
  p.depth = k;
  p.cols = n;
  p.groups = e;
  p.type = ToGmmType(x.type);
  p.bias_float32 = bias.present && bias.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  p.transpose_weight = t;
  return p;
}

// The group ends from group_list's values, checked in index order (first fault reported).
std::vector<int64_t> GroupEnds(const InputView& g, int64_t rows, int64_t group_list_type) {
  const bool is64 = g.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  std::vector<int64_t> ends(static_cast<size_t>(g.size));
  int64_t total = 0;  // <= rows throughout
  for (int64_t i = 0; i < g.size; ++i) {
    const int64_t v = is64 ? static_cast<const int64_t*>(g.data)[i] : static_cast<const int32_t*>(g.data)[i];
    if (group_list_type == kCount) {
      if (v < 0) FailInput("group_list", Str("(rows per group) must be non-negative, got ", v, " at [", i, "]"));
      if (v > rows - total) {  // total + v > rows, without overflow; the exact sum fits in uint64
        const uint64_t sum = static_cast<uint64_t>(total) + static_cast<uint64_t>(v);
        FailInput("group_list", Str("(rows per group) must sum to at most M = ", rows, " (x.shape[0]), got ", sum,
                                    " at [", i, "]"));
      }
      total += v;
    } else {
      if (v < total) {
        FailInput("group_list", Str("(cumulative ends) must be non-decreasing from 0, got ", v, " at [", i,
                                    "] after ", total));
      }
      if (v > rows) {
        FailInput("group_list", Str("(cumulative ends) must be at most M = ", rows, " (x.shape[0]), got ", v, " at [",
                                    i, "]"));
      }
      total = v;
    }
    ends[static_cast<size_t>(i)] = total;
  }
  return ends;
}

// y is x's type, [M, N] (symbolic dims kept); [?, ?] when a rank is unknown (a wrong rank fails
// at run time with the validation's message). Bad attributes fail here after y is declared.
OrtStatusPtr ORT_API_CALL InferGroupedMatmulShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  GroupedMatmulAttrs attrs;
  attrs.group_list_type = InferAttrInt(api, ctx, gmm_defs::kAttrs[gmm_defs::kAttrGroupListType]);
  attrs.transpose_weight = InferAttrInt(api, ctx, gmm_defs::kAttrs[gmm_defs::kAttrTransposeWeight]);
  const std::string error = CheckAttrs(attrs);
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
    std::string error = CheckAttrs(attrs_);
    if (error.empty()) {  // the generic checks ran already; the bias rule fails at session creation too
      const std::vector<GraphTensor> in = KernelInputs(info, std::size(gmm_defs::kInputs));
      error = CheckBiasType(in[gmm_defs::kInX].type, in[gmm_defs::kInBias].type);
    }
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    const InputView x = GetInputView(ctx, gmm_defs::kInX);
    const InputView w = GetInputView(ctx, gmm_defs::kInWeight);
    const InputView g = GetInputView(ctx, gmm_defs::kInGroupList);
    const InputView bias = GetInputView(ctx, gmm_defs::kInBias);
    const cpu::GroupedMatmulParams params = ValidateShapes(x, w, g, bias, attrs_);
    const std::vector<int64_t> ends = GroupEnds(g, params.rows, attrs_.group_list_type);
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
