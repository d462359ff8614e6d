#include "grouped_matmul_validate.h"

#include <cstdint>
#include <initializer_list>

#include "ops_src/cpu/enum_names.h"

namespace ascend_moe {

using namespace gmm_types;

// y's type for an output_dtype value (0: none).
ONNXTensorElementDataType GroupedMatmulOutputType(int64_t v) {
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

// The type rules the generated table cannot state (docs/operators.md §4.3; the order and messages
// of onnx_schemas.grouped_matmul.mode_and_output_type), from the element types of the inputs
// (UNDEFINED: absent) after the table's checks.
GroupedMatmulTypes CheckGroupedMatmulTypes(const GroupedMatmulTypeList& t, int64_t output_dtype) {
  using namespace gmm;
  GroupedMatmulTypes m;
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
    m.mode = GmmMode::kW8A8;
    if (w != kInt8) {
      m.error = Str(kName, ": input 'weight' must be int8 for int8 x (W8A8), got ", TypeName(w));
    } else if (!absent({kInAntiquantScale, kInAntiquantOffset}, "for int8 x (W8A8 takes scale)")) {
    } else if (t[kInBias] != kNone && t[kInBias] != kInt32) {
      m.error = Str(kName, ": input 'bias' must be int32 for int8 x, got ", TypeName(t[kInBias]));
    } else if (output_dtype == 0) {
      m.error = Str(
          kName, ": attribute 'output_dtype' must be given for int8 x: 6 (int32), 1 (float), 10 (float16) ",
          "or 16 (bfloat16), got 0");
    } else if (GroupedMatmulOutputType(output_dtype) == kInt32) {
      absent({kInScale, kInPerTokenScale}, "with output_dtype 6 (int32 y: the raw sums)");
    } else if (t[kInScale] == kNone) {
      m.error = Str(kName, ": input 'scale' is required for int8 x with output_dtype ", output_dtype, " (",
                    TypeName(GroupedMatmulOutputType(output_dtype)), "), got none");
    }
    m.y = GroupedMatmulOutputType(output_dtype);
    return m;
  }
  m.y = x;
  if (w != x && w != kInt8 && w != kInt32) {
    m.error = Str(kName, ": input 'weight' must have the type of x (", TypeName(x),
                  "), int8 or int32 (int4 in int32 words), got ", TypeName(w));
  } else if (output_dtype != 0 && GroupedMatmulOutputType(output_dtype) != x) {
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
    m.mode = GmmMode::kAntiquant;
    if (t[kInAntiquantScale] == kNone) {
      m.error = Str(kName, ": input 'antiquant_scale' is required for ", TypeName(w), " weight, got none");
    } else if (t[kInAntiquantScale] != x) {
      m.error = Str(kName, ": input 'antiquant_scale' must have the type of x (", TypeName(x), "), got ",
                    TypeName(t[kInAntiquantScale]));
    } else if (t[kInAntiquantOffset] != kNone && t[kInAntiquantOffset] != x) {
      m.error = Str(kName, ": input 'antiquant_offset' must have the type of antiquant_scale (", TypeName(x),
                    "), got ", TypeName(t[kInAntiquantOffset]));
    }
  }
  return m;
}

GroupedMatmulTypeList GroupedMatmulGraphTypes(const std::vector<GraphTensor>& in) {
  std::array<ONNXTensorElementDataType, gmm::kNumIns> t{};
  for (size_t i = 0; i < gmm::kNumIns; ++i) t[i] = i < in.size() ? in[i].type : kNone;
  return t;
}

GroupedMatmulTypeList GroupedMatmulViewTypes(const GroupedMatmulInputs& in) {
  std::array<ONNXTensorElementDataType, gmm::kNumIns> t{};
  for (size_t i = 0; i < gmm::kNumIns; ++i) t[i] = in[i].present ? in[i].type : kNone;
  return t;
}

namespace {

[[noreturn]] void FailInput(gmm::In input, const std::string& what_and_value) {
  Fail(Str(gmm::kName, ": input '", gmm::kInputs[input].name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  static constexpr EnumValue<ONNXTensorElementDataType, cpu::GmmType> kGmmTypes[] = {
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, cpu::GmmType::kFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, cpu::GmmType::kBFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, cpu::GmmType::kInt8},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, cpu::GmmType::kInt32}};
  return ValueOf(kGmmTypes, t, cpu::GmmType::kFloat32);
}

// antiquant_scale [E, N] or [E, G, N] with G dividing K (int4 along k: K / G even), and
// antiquant_offset of its shape: G.
int64_t CheckAntiquantShapes(const GroupedMatmulInputs& in, int64_t e, int64_t k, int64_t n,
                             bool int4_along_k) {
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

}  // namespace

// Types (the rules the table cannot state), ranks and dims (no data is read): the kernel parameters.
cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const GroupedMatmulInputs& in, const gmm::Attrs& attrs) {
  using namespace gmm;
  const GroupedMatmulTypes mt = CheckGroupedMatmulTypes(GroupedMatmulViewTypes(in), attrs.output_dtype);
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
  p.weight = mt.mode == GmmMode::kFloat ? cpu::GmmWeight::kSame
             : int4                     ? cpu::GmmWeight::kInt4
                                        : cpu::GmmWeight::kInt8;
  if (in[kInAntiquantScale].present) p.antiquant_type = ToGmmType(in[kInAntiquantScale].type);
  if (in[kInScale].present) p.scale_type = ToGmmType(in[kInScale].type);
  return p;
}

// The group ends from group_list's values, checked in index order (the first fault is reported).
std::vector<int64_t> GroupedMatmulEnds(const InputView& g, int64_t rows, int64_t group_list_type) {
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

}  // namespace ascend_moe
