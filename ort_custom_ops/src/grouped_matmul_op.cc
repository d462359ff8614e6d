// ascend.moe::GroupedMatmul for ONNX Runtime (docs/operators.md §4): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rules, the bias type rule, the
// shape and group_list validation (docs/operators.md §4.3; the messages of
// onnx_schemas.grouped_matmul) and the CPU kernel, which runs ops_src/cpu's work items on the
// session's intra-op pool.
// The CANN kernel (grouped_matmul_cann) shares grouped_matmul_validate's float validation.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

#include "grouped_matmul_cann.h"
#include "grouped_matmul_validate.h"
#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace gmm = defs::grouped_matmul;

namespace {

constexpr int64_t kInt4PerWord = 8;         // int4 weights: 8 per int32 word
constexpr ONNXTensorElementDataType kFloat = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
constexpr ONNXTensorElementDataType kInt8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
constexpr ONNXTensorElementDataType kInt32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
constexpr ONNXTensorElementDataType kNone = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;

enum class Mode { kFloat, kAntiquant, kW8A8 };

// y's type for an output_dtype value (0: none).
ONNXTensorElementDataType OutputDtype(int64_t v) {
  switch (v) {
    case 1:
      return kFloat;
    case 10:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16;
    case 16:
      return ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
    case 6:
      return kInt32;
    default:
      return kNone;
  }
}

struct ModeTypes {
  Mode mode = Mode::kFloat;
  ONNXTensorElementDataType y = kNone;
  std::string error;  // the first rule broken, empty when all hold
};

// The type rules the generated table cannot state (docs/operators.md §4.3; the order and messages
// of onnx_schemas.grouped_matmul.mode_and_output_type), from the element types of the inputs
// (UNDEFINED: absent) after the table's checks.
ModeTypes CheckModeTypes(const std::array<ONNXTensorElementDataType, gmm::kNumIns>& t, int64_t output_dtype) {
  using namespace gmm;
  ModeTypes m;
  auto absent = [&](std::initializer_list<In> inputs, const std::string& why) {
    for (In i : inputs) {
      if (m.error.empty() && t[i] != kNone) {
        m.error =
            Str(kName, ": input '", kInputs[i].name, "' must be absent ", why, ", got ", TypeName(t[i]));
      }
    }
    return m.error.empty();
  };
  const ONNXTensorElementDataType x = t[kInX], w = t[kInWeight];
  if (!absent({kInOffset}, "(torch_npu's npu_grouped_matmul takes offset=None)")) return m;
  if (x == kInt8) {
    m.mode = Mode::kW8A8;
    if (w != kInt8) {
      m.error = Str(kName, ": input 'weight' must be int8 for int8 x (W8A8), got ", TypeName(w));
    } else if (!absent({kInAntiquantScale, kInAntiquantOffset}, "for int8 x (W8A8 takes scale)")) {
    } else if (t[kInBias] != kNone && t[kInBias] != kInt32) {
      m.error = Str(kName, ": input 'bias' must be int32 for int8 x, got ", TypeName(t[kInBias]));
    } else if (output_dtype == 0) {
      m.error = Str(
          kName, ": attribute 'output_dtype' must be given for int8 x: 6 (int32), 1 (float), 10 (float16) ",
          "or 16 (bfloat16), got 0");
    } else if (OutputDtype(output_dtype) == kInt32) {
      absent({kInScale, kInPerTokenScale}, "with output_dtype 6 (int32 y: the raw sums)");
    } else if (t[kInScale] == kNone) {
      m.error = Str(kName, ": input 'scale' is required for int8 x with output_dtype ", output_dtype, " (",
                    TypeName(OutputDtype(output_dtype)), "), got none");
    }
    m.y = OutputDtype(output_dtype);
    return m;
  }
  m.y = x;
  if (w != x && w != kInt8 && w != kInt32) {
    m.error = Str(kName, ": input 'weight' must have the type of x (", TypeName(x),
                  "), int8 or int32 (int4 in int32 words), got ", TypeName(w));
  } else if (output_dtype != 0 && OutputDtype(output_dtype) != x) {
    m.error = Str(kName, ": attribute 'output_dtype' must be 0 or ", static_cast<int>(x), " (x's type) for ",
                  TypeName(x), " x, got ", output_dtype);
  } else if (t[kInBias] != kNone && t[kInBias] != x && t[kInBias] != kFloat) {
    m.error = Str(kName, ": input 'bias' must have the type of x (", TypeName(x), ") or be float, got ",
                  TypeName(t[kInBias]));
  } else if (!absent({kInScale, kInPerTokenScale},
                     Str("for ", TypeName(x), " x (scale and per_token_scale are for int8 x)"))) {
  } else if (w == x) {
    absent({kInAntiquantScale, kInAntiquantOffset},
           Str("for ", TypeName(w),
               " weight (antiquant_scale and antiquant_offset are for int8 / int4 weights)"));
  } else {
    m.mode = Mode::kAntiquant;
    if (t[kInAntiquantScale] == kNone) {
      m.error = Str(kName, ": input 'antiquant_scale' is required for ", TypeName(w), " weight, got none");
    } else if (t[kInAntiquantScale] != x) {
      m.error = Str(kName, ": input 'antiquant_scale' must have the type of x (", TypeName(x), "), got ",
                    TypeName(t[kInAntiquantScale]));
    }
  }
  return m;
}

std::array<ONNXTensorElementDataType, gmm::kNumIns> GraphTypes(const std::vector<GraphTensor>& in) {
  std::array<ONNXTensorElementDataType, gmm::kNumIns> t{};
  for (size_t i = 0; i < gmm::kNumIns; ++i) t[i] = i < in.size() ? in[i].type : kNone;
  return t;
}

}  // namespace

// y is x's type, [M, N] (symbolic dims kept); [?, ?] when a rank is unknown (a wrong rank fails
// at run time with the validation's message). Bad attributes fail here after y is declared.
OrtStatusPtr ORT_API_CALL gmm::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  Attrs attrs;
  attrs.group_list_type = InferAttrInt(api, ctx, kAttrs[kAttrGroupListType]);
  attrs.transpose_weight = InferAttrInt(api, ctx, kAttrs[kAttrTransposeWeight]);
  attrs.output_dtype = InferAttrInt(api, ctx, kAttrs[kAttrOutputDtype]);
  const std::string error = CheckAttrs(attrs);
  InferredTensor x{}, w{};
  if (GetInferInput(api, ctx, kInX, &x)) {
    // int8 x: output_dtype's type (float when it is missing: the kernel refuses the node)
    const ONNXTensorElementDataType y_type = x.type != kInt8 ? x.type
                                             : OutputDtype(attrs.output_dtype) != kNone
                                                 ? OutputDtype(attrs.output_dtype)
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
  if (a.output_dtype != 0 && OutputDtype(a.output_dtype) == kNone) {
    return Str(kName, ": attribute '", kAttrs[kAttrOutputDtype].name,
               "' must be 0 (x's type), 1 (float), 10 (float16), 16 (bfloat16) or 6 (int32), got ",
               a.output_dtype);
  }
  return {};
}

namespace {

using Inputs = std::array<InputView, gmm::kNumIns>;

[[noreturn]] void FailInput(gmm::In input, const std::string& what_and_value) {
  Fail(Str(gmm::kName, ": input '", gmm::kInputs[input].name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return cpu::GmmType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return cpu::GmmType::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      return cpu::GmmType::kInt8;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return cpu::GmmType::kInt32;
    default:
      return cpu::GmmType::kFloat32;
  }
}

std::array<ONNXTensorElementDataType, gmm::kNumIns> ViewTypes(const Inputs& in) {
  std::array<ONNXTensorElementDataType, gmm::kNumIns> t{};
  for (size_t i = 0; i < gmm::kNumIns; ++i) t[i] = in[i].present ? in[i].type : kNone;
  return t;
}

// antiquant_scale [E, N] or [E, G, N] with G dividing K (int4 along k: K / G even), and
// antiquant_offset of its shape: G.
int64_t CheckAntiquantShapes(const Inputs& in, int64_t e, int64_t k, int64_t n, bool int4_along_k) {
  using namespace gmm;
  const std::vector<int64_t>& s = in[kInAntiquantScale].shape;
  const bool rank_ok = s.size() == 2 || s.size() == 3;
  const int64_t g = s.size() == 3 ? s[1] : 1;
  const bool ok = rank_ok && s.front() == e && s.back() == n && g >= 1 && k % g == 0 &&
                  !(int4_along_k && (k / g) % 2 != 0);
  if (!ok) {
    FailInput(kInAntiquantScale, Str("must be [E, N] = [", e, ", ", n, "] or [E, G, N] with G dividing K = ",
                                     k, int4_along_k ? " and K / G even (int4 weight [E, N, K/8])" : "",
                                     ", got shape ", ShapeStr(s)));
  }
  const InputView& o = in[kInAntiquantOffset];
  if (o.present && o.shape != s) {
    FailInput(kInAntiquantOffset,
              Str("must have the shape of antiquant_scale ", ShapeStr(s), ", got shape ", ShapeStr(o.shape)));
  }
  return g;
}

// Types (the rules the table cannot state), ranks and dims (no data is read): the kernel parameters.
cpu::GroupedMatmulParams ValidateShapes(const Inputs& in, const gmm::Attrs& attrs) {
  using namespace gmm;
  const ModeTypes mt = CheckModeTypes(ViewTypes(in), attrs.output_dtype);
  if (!mt.error.empty()) Fail(mt.error);
  const InputView &x = in[kInX], &w = in[kInWeight], &g = in[kInGroupList];
  if (x.shape.size() != 2) FailInput(kInX, Str("must be 2-D [M, K], got shape ", ShapeStr(x.shape)));
  const int64_t m = x.shape[0], k = x.shape[1];
  const bool t = attrs.transpose_weight != 0;
  const bool int4 = w.type == kInt32;
  const size_t k_axis = t ? 2 : 1;
  const char* layout = t ? (int4 ? "[E, N, K/8] (int4 in int32 words)" : "[E, N, K]")
                         : (int4 ? "[E, K, N/8] (int4 in int32 words)" : "[E, K, N]");
  const int64_t w_k = w.shape.size() == 3 ? w.shape[k_axis] * (int4 && t ? kInt4PerWord : 1) : -1;
  if (w.shape.size() != 3 || w.shape[0] < 1 || w_k != k) {
    FailInput(kInWeight, Str("must be 3-D ", layout, " with E >= 1 and K = ", k, " (x.shape[1]), got shape ",
                             ShapeStr(w.shape)));
  }
  const int64_t e = w.shape[0], n = w.shape[3 - k_axis] * (int4 && !t ? kInt4PerWord : 1);
  if (g.shape.size() != 1 || g.shape[0] != e) {
    FailInput(kInGroupList,
              Str("must be 1-D [E] with E = ", e, " (weight.shape[0]), got shape ", ShapeStr(g.shape)));
  }
  for (In i : {kInBias, kInScale}) {
    if (in[i].present && in[i].shape != std::vector<int64_t>{e, n}) {
      FailInput(i,
                Str("must be [E, N] = [", e, ", ", n, "] (from weight), got shape ", ShapeStr(in[i].shape)));
    }
  }
  cpu::GroupedMatmulParams p;
  if (in[kInAntiquantScale].present) p.antiquant_groups = CheckAntiquantShapes(in, e, k, n, int4 && t);
  const InputView& pts = in[kInPerTokenScale];
  if (pts.present && pts.shape != std::vector<int64_t>{m}) {
    FailInput(kInPerTokenScale, Str("must be [M] = [", m, "] (x.shape[0]), got shape ", ShapeStr(pts.shape)));
  }
  p.rows = m;
  p.depth = k;
  p.cols = n;
  p.groups = e;
  p.type = ToGmmType(x.type);
  p.out_type = ToGmmType(mt.y);
  p.bias_float32 = in[kInBias].present && in[kInBias].type == kFloat;
  p.transpose_weight = t;
  p.weight = mt.mode == Mode::kFloat ? cpu::GmmWeight::kSame
             : int4                  ? cpu::GmmWeight::kInt4
                                     : cpu::GmmWeight::kInt8;
  if (in[kInAntiquantScale].present) p.antiquant_type = ToGmmType(in[kInAntiquantScale].type);
  if (in[kInScale].present) p.scale_type = ToGmmType(in[kInScale].type);
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
    // The type rules fail at session creation too (the table's checks ran already).
    const ModeTypes mt = CheckModeTypes(GraphTypes(KernelInputs(info, gmm::kNumIns)), attrs_.output_dtype);
    if (!mt.error.empty()) Fail(mt.error);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace gmm;
    const Inputs in = GetInputViews(ctx, kName, kInputs);
    const cpu::GroupedMatmulParams params = ValidateShapes(in, attrs_);
    const std::vector<int64_t> ends = GroupEnds(in[kInGroupList], params.rows, attrs_.group_list_type);
    const ModeTypes mt = CheckModeTypes(ViewTypes(in), attrs_.output_dtype);
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

 private:
  gmm::Attrs attrs_;
};

// The generated definition plus y's type, which output_dtype decides for int8 x.
struct Def : gmm::Def {
  static std::vector<ONNXTensorElementDataType> OutputTypes(const OrtKernelInfo* info,
                                                            const std::vector<GraphTensor>& inputs) {
    const int64_t output_dtype = ReadIntAttr(info, gmm::kName, gmm::kAttrs[gmm::kAttrOutputDtype]);
    const ONNXTensorElementDataType x = inputs[gmm::kInX].type;
    // int8 x without output_dtype: float, as shape inference declares it (the constructor refuses the node)
    const ONNXTensorElementDataType y = x != kInt8                           ? x
                                        : OutputDtype(output_dtype) != kNone ? OutputDtype(output_dtype)
                                                                             : kFloat;
    return {y};
  }
};

}  // namespace

std::vector<const OrtCustomOp*> GroupedMatmulOps() {
  static const AscendMoeOp<Def, GroupedMatmulCpuKernel> cpu_op;
  static const AscendMoeOp<Def, GroupedMatmulCannKernel> cann_op;
  return {&cpu_op, &cann_op};
}

}  // namespace ascend_moe
