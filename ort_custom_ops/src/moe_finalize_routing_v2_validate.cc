#include "moe_finalize_routing_v2_validate.h"

#include <iterator>
#include <limits>

namespace ascend_moe {

namespace {

constexpr const char* kX = "expanded_x";
constexpr const char* kRowIdx = "expanded_row_idx";
constexpr const char* kScales = "scales";
constexpr const char* kBias = "bias";
constexpr const char* kExperts = "expert_idx";

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

std::string DimsStr(int64_t a, int64_t b) { return Str("[", a, ", ", b, "]"); }

}  // namespace

cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::RowType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::RowType::kBFloat16;
  return cpu::RowType::kFloat32;
}

cpu::IndexType IndexTypeOf(ONNXTensorElementDataType t) {
  return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 ? cpu::IndexType::kInt64 : cpu::IndexType::kInt32;
}

// The element types again at run time (kernel creation checked the graph's declared types).
void CheckTypes(const char* op, const ParamSpec* specs, size_t n, const InputView* inputs) {
  std::vector<ONNXTensorElementDataType> types(n);
  for (size_t i = 0; i < n; ++i) types[i] = inputs[i].present ? inputs[i].type : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  const std::string error = CheckInputTypes(op, specs, n, types.data());
  if (!error.empty()) Fail(error);
}

[[noreturn]] void FailInput(const char* op, const char* name, const std::string& what_and_value) {
  Fail(Str(op, ": input '", name, "' ", what_and_value));
}

std::string CheckDropPadMode(int64_t mode) {
  if (mode >= 0 && mode <= 3) return {};
  return Str(finalize_defs::kName, ": attribute '", finalize_defs::kAttrs[finalize_defs::kAttrDropPadMode].name,
             "' must be 0, 1, 2 or 3 (0, 2: dropless; 1, 3: drop-pad; 0, 1: slot-major index; 2, 3: "
             "token-major index), got ", mode);
}

cpu::WeightedGatherParams ValidateMoeFinalizeRoutingV2(const InputView* in, int64_t mode,
                                                       cpu::WeightedGatherBuffers* buffers) {
  using namespace finalize_defs;
  const char* op = kName;
  CheckTypes(op, kInputs, std::size(kInputs), in);
  const InputView &x = in[kInExpandedX], &idx = in[kInExpandedRowIdx], &scales = in[kInScales];
  const InputView &bias = in[kInBias], &experts = in[kInExpertIdx];
  const bool drop_pad = mode == 1 || mode == 3;
  const char* modes = drop_pad ? "1 or 3" : "0 or 2";
  if (x.shape.size() != (drop_pad ? 3u : 2u)) {
    FailInput(op, kX, Str("must be ", drop_pad ? "3-D [E, C, H]" : "2-D [N*K, H]", " when drop_pad_mode is ",
                          modes, ", got shape ", ShapeStr(x.shape)));
  }
  const int64_t h = x.shape.back();
  const int64_t r = drop_pad ? SaturatingMul(x.shape[0], x.shape[1]) : x.shape[0];
  if (idx.shape.size() != 1) FailInput(op, kRowIdx, Str("must be 1-D [N*K], got shape ", ShapeStr(idx.shape)));
  int64_t n = idx.shape[0], k = 1;
  if (scales.present) {
    if (scales.shape.size() != 2 || scales.shape[1] < 1) {
      FailInput(op, kScales, Str("must be 2-D [N, K] with K >= 1, got shape ", ShapeStr(scales.shape)));
    }
    n = scales.shape[0];
    k = scales.shape[1];
    if (idx.shape[0] != n * k) {
      FailInput(op, kRowIdx, Str("must have N*K = ", n * k, " elements (N = ", n, ", K = ", k,
                                 " from scales), got shape ", ShapeStr(idx.shape)));
    }
  }
  if (!drop_pad && x.shape[0] != n * k) {
    FailInput(op, kX, Str("must have N*K = ", n * k, " rows when drop_pad_mode is 0 or 2, got shape ",
                          ShapeStr(x.shape)));
  }
  const std::pair<size_t, const char*> skips[] = {{kInX1, "x1"}, {kInX2, "x2"}};
  for (const auto& [i, name] : skips) {
    if (in[i].present && in[i].shape != std::vector<int64_t>{n, h}) {
      FailInput(op, name, Str("must be [N, H] = ", DimsStr(n, h), ", got shape ", ShapeStr(in[i].shape)));
    }
  }
  if (in[kInX2].present && !in[kInX1].present) FailInput(op, "x2", "must be absent when x1 is absent");
  if (bias.present) {
    if (!experts.present) FailInput(op, kBias, "needs expert_idx (the expert of each slot), got no expert_idx");
    if (bias.shape.size() != 2 || bias.shape[0] < 1 || bias.shape[1] != h) {
      FailInput(op, kBias, Str("must be 2-D [E, H] with E >= 1 and H = ", h, " (expanded_x.shape[-1]), got shape ",
                               ShapeStr(bias.shape)));
    }
    if (drop_pad && bias.shape[0] != x.shape[0]) {
      FailInput(op, kBias, Str("must have E = ", x.shape[0], " rows (expanded_x.shape[0]) when drop_pad_mode is "
                               "1 or 3, got shape ", ShapeStr(bias.shape)));
    }
  }
  if (experts.present && experts.shape != std::vector<int64_t>{n, k}) {
    FailInput(op, kExperts, Str("must be [N, K] = ", DimsStr(n, k), ", got shape ", ShapeStr(experts.shape)));
  }
  const cpu::IndexType idx_type = IndexTypeOf(idx.type);
  const int64_t bad = cpu::FirstIndexOutside(idx.data, idx_type, idx.size, drop_pad ? -1 : 0, r);
  if (bad >= 0) {
    const int64_t v = cpu::IndexAt(idx.data, idx_type, bad);
    if (drop_pad) {
      FailInput(op, kRowIdx, Str("must be -1 (dropped) or in [0, E*C) = [0, ", r, ") when drop_pad_mode is 1 or 3, got ",
                                 v, " at [", bad, "]"));
    }
    FailInput(op, kRowIdx, Str("must be in [0, N*K) = [0, ", r, ") when drop_pad_mode is 0 or 2, got ", v, " at [",
                               bad, "]"));
  }
  cpu::WeightedGatherParams p;
  if (bias.present) {
    p.has_bias = true;
    p.expert_type = IndexTypeOf(experts.type);
    const int64_t e = bias.shape[0];
    const int64_t bad_e = cpu::FirstIndexOutside(experts.data, p.expert_type, experts.size, 0, e);
    if (bad_e >= 0) {
      FailInput(op, kExperts, Str("must be in [0, E) = [0, ", e, ") (rows of bias), got ",
                                  cpu::IndexAt(experts.data, p.expert_type, bad_e), " at [", bad_e / k, ", ",
                                  bad_e % k, "]"));
    }
    buffers->bias = bias.data;
    buffers->expert_index = experts.data;
  }
  p.num_out_rows = n;
  p.k = k;
  p.hidden = h;
  p.num_rows = r;
  p.row_type = RowTypeOf(x.type);
  p.index_type = idx_type;
  p.token_major = mode == 2 || mode == 3;
  p.drop_pad_mode = mode;
  if (scales.present) {
    p.has_weights = true;
    p.weight_type = RowTypeOf(scales.type);
    buffers->weights = scales.data;
  }
  for (const auto& [i, name] : skips) {
    if (in[i].present) buffers->base[p.num_base++] = in[i].data;
  }
  buffers->rows = x.data;
  buffers->row_index = idx.data;
  return p;
}

}  // namespace ascend_moe
