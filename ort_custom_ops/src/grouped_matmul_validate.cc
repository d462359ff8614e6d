#include "grouped_matmul_validate.h"

#include <cstdint>

namespace ascend_moe {

std::string CheckGroupedMatmulBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias) {
  if (x == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ||
      bias == x || bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) {
    return {};
  }
  return Str(gmm::kName, ": input 'bias' must have the type of x (", TypeName(x), ") or be float, got ",
             TypeName(bias));
}

namespace {

[[noreturn]] void FailInput(gmm::In input, const std::string& what_and_value) {
  Fail(Str(gmm::kName, ": input '", gmm::kInputs[input].name, "' ", what_and_value));
}

cpu::GmmType ToGmmType(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GmmType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GmmType::kBFloat16;
  return cpu::GmmType::kFloat32;
}

}  // namespace

cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const GroupedMatmulInputs& in, const gmm::Attrs& attrs) {
  using namespace gmm;
  const InputView &x = in[kInX], &w = in[kInWeight], &g = in[kInGroupList], &bias = in[kInBias];
  if (bias.present) {
    const std::string error = CheckGroupedMatmulBiasType(x.type, bias.type);
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
