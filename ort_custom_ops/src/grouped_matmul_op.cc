// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rules, the bias type rule, the
// shape and group_list validation (docs/operators.md §4.3; the messages of
// onnx_schemas.grouped_matmul) and the CPU kernel, which runs ops_src/cpu's work items on the
// session's intra-op pool.
// CPU execution provider only: on a session with another provider ORT places the node on the CPU.
#include <cstdint>
#include <string>
#include <vector>

#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace gmm = defs::grouped_matmul;

namespace {

constexpr int64_t kCumsum = 0, kCount = 1;  // group_list_type values

// "bias must be x's type or float", the one type rule the generated tables cannot state. Empty
// when it holds or either type is unknown (UNDEFINED).
std::string CheckBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias) {
  if (x == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
      bias == x || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return {};
  }
  return Str(gmm::kName, ": input 'bias' must have the type of x (", TypeName(x), ") or be float, got ",
             TypeName(bias));
}

}  // namespace

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

using Inputs = std::array<InputView, gmm::kNumIns>;

[[noreturn]] void FailInput(gmm::In input, const std::string& what_and_value) {
  Fail(Str(gmm::kName, ": input '", gmm::kInputs[input].name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GmmType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GmmType::kBFloat16;
  return cpu::GmmType::kFloat32;
}

// Ranks and dims of the inputs, the bias type rule (the table checked presence and the other
// types; no data is read): the kernel parameters.
cpu::GroupedMatmulParams ValidateShapes(const Inputs& in, const gmm::Attrs& attrs) {
  using namespace gmm;
  const InputView &x = in[kInX], &w = in[kInWeight], &g = in[kInGroupList], &bias = in[kInBias];
  if (bias.present) {
    const std::string error = CheckBiasType(x.type, bias.type);
    if (!error.empty()) Fail(error);
  }
  if (x.shape.size() != 2) FailInput(kInX, Str("must be 2-D [M, K], got shape ", ShapeStr(x.shape)));
  const int64_t m = x.shape[0], k = x.shape[1];
  const bool t = attrs.transpose_weight != 0;
  const size_t k_axis = t ? 2 : 1;
  if (w.shape.size() != 3 || w.shape[0] < 1 || w.shape[k_axis] != k) {
    FailInput(kInWeight, Str("must be 3-D ", t ? "[E, N, K]" : "[E, K, N]", " with E >= 1 and K = ", k,
                             " (x.shape[1]), got shape ", ShapeStr(w.shape)));
  }
  const int64_t e = w.shape[0], n = w.shape[3 - k_axis];
  if (g.shape.size() != 1 || g.shape[0] != e) {
    FailInput(kInGroupList,
              Str("must be 1-D [E] with E = ", e, " (weight.shape[0]), got shape ", ShapeStr(g.shape)));
  }
  if (bias.present && bias.shape != std::vector<int64_t>{e, n}) {
    FailInput(kInBias,
              Str("must be [E, N] = [", e, ", ", n, "] (from weight), got shape ", ShapeStr(bias.shape)));
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

// The group ends from group_list's values, checked in index order (the first fault is reported).
std::vector<int64_t> GroupEnds(const InputView& g, int64_t rows, int64_t group_list_type) {
  const bool is64 = g.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  std::vector<int64_t> ends(static_cast<size_t>(g.size));
  int64_t total = 0;  // <= rows throughout
  for (int64_t i = 0; i < g.size; ++i) {
    const int64_t v = is64 ? static_cast<const int64_t*>(g.data)[i] : static_cast<const int32_t*>(g.data)[i];
    if (group_list_type == kCount) {
      if (v < 0)
        FailInput(gmm::kInGroupList, Str("(rows per group) must be non-negative, got ", v, " at [", i, "]"));
      if (v > rows - total) {  // total + v > rows, without overflow; the exact sum fits in uint64
        const uint64_t sum = static_cast<uint64_t>(total) + static_cast<uint64_t>(v);
        FailInput(gmm::kInGroupList, Str("(rows per group) must sum to at most M = ", rows,
                                         " (x.shape[0]), got ", sum, " at [", i, "]"));
      }
      total += v;
    } else {
      if (v < total) {
        FailInput(gmm::kInGroupList, Str("(cumulative ends) must be non-decreasing from 0, got ", v, " at [",
                                         i, "] after ", total));
      }
      if (v > rows) {
        FailInput(gmm::kInGroupList, Str("(cumulative ends) must be at most M = ", rows,
                                         " (x.shape[0]), got ", v, " at [", i, "]"));
      }
      total = v;
    }
    ends[static_cast<size_t>(i)] = total;
  }
  return ends;
}

struct GroupedMatmulCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit GroupedMatmulCpuKernel(const OrtKernelInfo* info) : attrs_(gmm::ReadAttrs(info)) {
    // The bias type rule fails at session creation too (the table's checks ran already).
    const std::vector<GraphTensor> in = KernelInputs(info, gmm::kNumIns);
    const std::string error = CheckBiasType(in[gmm::kInX].type, in[gmm::kInBias].type);
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace gmm;
    const Inputs in = GetInputViews(ctx, kName, kInputs);
    const cpu::GroupedMatmulParams params = ValidateShapes(in, attrs_);
    const std::vector<int64_t> ends = GroupEnds(in[kInGroupList], params.rows, attrs_.group_list_type);
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
  return {&cpu_op};
}

}  // namespace ascend_moe
