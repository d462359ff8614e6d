#include "grouped_matmul_validate.h"

#include <cstdint>
#include <iterator>
#include <utility>

namespace ascend_moe {

namespace {

constexpr const char* kName = gmm_defs::kName;
constexpr int64_t kCumsum = 0, kCount = 1;  // group_list_type values

[[noreturn]] void FailInput(const char* name, const std::string& what_and_value) {
  Fail(Str(kName, ": input '", name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GmmType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GmmType::kBFloat16;
  return cpu::GmmType::kFloat32;
}

}  // namespace

std::string CheckGroupedMatmulAttrs(const GroupedMatmulAttrs& a) {
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

std::string CheckGroupedMatmulBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias) {
  if (x == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
      bias == x || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return {};
  }
  return Str(kName, ": input 'bias' must have the type of x (", TypeName(x), ") or be float, got ", TypeName(bias));
}


cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const InputView& x, const InputView& w, const InputView& g,
                                                     const InputView& bias, const GroupedMatmulAttrs& attrs) {
  const std::pair<const InputView*, const char*> required[] = {{&x, "x"}, {&w, "weight"}, {&g, "group_list"}};
  for (const auto& [v, name] : required) {
    if (!v->present) FailInput(name, "is required, got none");
  }
  const ONNXTensorElementDataType types[] = {x.type, w.type, g.type,
                                             bias.present ? bias.type : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED};
  std::string error = CheckInputTypes(kName, gmm_defs::kInputs, std::size(gmm_defs::kInputs), types);
  if (error.empty() && bias.present) error = CheckGroupedMatmulBiasType(x.type, bias.type);
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

std::vector<int64_t> GroupedMatmulEnds(const InputView& g, int64_t rows, int64_t group_list_type) {
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

}  // namespace ascend_moe
