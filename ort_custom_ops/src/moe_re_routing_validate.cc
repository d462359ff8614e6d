#include "moe_re_routing_validate.h"

#include <limits>

namespace ascend_moe {

namespace {

constexpr const char* kTokens = "tokens";
constexpr const char* kCounts = "expert_token_num_per_rank";
constexpr const char* kScales = "per_token_scales";

[[noreturn]] void FailInput(const char* name, const std::string& what_and_value) {
  Fail(Str(kMoeReRoutingName, ": input '", name, "' ", what_and_value));
}

// Decimal text of a non-negative 128-bit value (ostream has no operator for it).
std::string U128Str(unsigned __int128 v) {
  if (v == 0) return "0";
  std::string s;
  while (v > 0) {
    s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
    v /= 10;
  }
  return s;
}

// Bytes of a row of `n` elements, saturated: an empty tensor may declare a row too large to
// exist (its byte size would overflow int64), and no byte of it is ever touched.
int64_t RowBytes(int64_t n, int64_t elem_bytes) {
  int64_t bytes;
  return __builtin_mul_overflow(n, elem_bytes, &bytes) ? std::numeric_limits<int64_t>::max() : bytes;
}

}  // namespace

int64_t MoeReRoutingTokenElemBytes(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2: return 1;
    default: return 0;
  }
}

int64_t MoeReRoutingScaleElemBytes(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return 2;
    default: return 0;
  }
}

std::string CheckMoeReRoutingAttrs(const MoeReRoutingAttrs& attrs) {
  if (attrs.expert_token_num_type != 0 && attrs.expert_token_num_type != 1) {
    return Str(kMoeReRoutingName, ": attribute '", rerouting_defs::kAttrs[rerouting_defs::kAttrExpertTokenNumType].name,
               "' must be 0 (cumulative counts) or 1 (per-expert counts), got ",
               attrs.expert_token_num_type);
  }
  if (attrs.idx_type != 0 && attrs.idx_type != 1) {
    return Str(kMoeReRoutingName, ": attribute '", rerouting_defs::kAttrs[rerouting_defs::kAttrIdxType].name,
               "' must be 0 (gather index) or 1 (scatter index), got ", attrs.idx_type);
  }
  return {};
}

MoeReRoutingAttrs ReadMoeReRoutingAttrs(const OrtKernelInfo* info) {
  using namespace rerouting_defs;
  MoeReRoutingAttrs attrs{};
  attrs.expert_token_num_type = ReadIntAttr(info, kName, kAttrs[kAttrExpertTokenNumType]);
  attrs.idx_type = ReadIntAttr(info, kName, kAttrs[kAttrIdxType]);
  const std::string error = CheckMoeReRoutingAttrs(attrs);
  if (!error.empty()) Fail(error);
  return attrs;
}

cpu::MoeReRoutingParams ValidateMoeReRoutingShapes(const InputView& tokens,
                                                   const InputView& counts,
                                                   const InputView& scales,
                                                   const MoeReRoutingAttrs& attrs) {
  if (!tokens.present) FailInput(kTokens, "is required, got none");
  if (!counts.present) FailInput(kCounts, "is required, got none");

  const int64_t token_bytes = MoeReRoutingTokenElemBytes(tokens.type);
  if (token_bytes == 0) {
    FailInput(kTokens,
              Str("must be float, float16, bfloat16, int8, uint8, float8e4m3fn or float8e5m2, "
                  "got ", TypeName(tokens.type)));
  }
  if (tokens.shape.size() != 2) {
    FailInput(kTokens, Str("must be 2-D [A, H], got shape ", ShapeStr(tokens.shape)));
  }
  const int64_t a = tokens.shape[0], h = tokens.shape[1];
  if (h < 1) FailInput(kTokens, Str("must have H >= 1, got shape ", ShapeStr(tokens.shape)));
  if (a > std::numeric_limits<int32_t>::max()) {
    FailInput(kTokens, Str("must have at most 2147483647 rows (permute_token_idx is int32), "
                           "got A = ", a));
  }

  cpu::CountType count_type;
  if (counts.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) count_type = cpu::CountType::kInt32;
  else if (counts.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) count_type = cpu::CountType::kInt64;
  else FailInput(kCounts, Str("must be int32 or int64, got ", TypeName(counts.type)));
  if (counts.shape.size() != 2) {
    FailInput(kCounts, Str("must be 2-D [N, E], got shape ", ShapeStr(counts.shape)));
  }
  if (counts.shape[0] < 1 || counts.shape[1] < 1) {
    FailInput(kCounts, Str("must have N >= 1 and E >= 1, got shape ", ShapeStr(counts.shape)));
  }

  cpu::MoeReRoutingParams p;
  if (scales.present) {
    const int64_t scale_bytes = MoeReRoutingScaleElemBytes(scales.type);
    if (scale_bytes == 0) {
      FailInput(kScales, Str("must be float, float16 or bfloat16, got ", TypeName(scales.type)));
    }
    if (scales.shape.size() != 1 && scales.shape.size() != 2) {
      FailInput(kScales, Str("must be 1-D [A] or 2-D [A, S], got shape ", ShapeStr(scales.shape)));
    }
    if (scales.shape[0] != a) {
      FailInput(kScales, Str("must have first dimension A = ", a, " (tokens.shape[0]), got shape ",
                             ShapeStr(scales.shape)));
    }
    p.has_scales = true;
    p.scale_row_bytes = scales.shape.size() == 2 ? RowBytes(scales.shape[1], scale_bytes) : scale_bytes;
  }

  p.num_tokens = a;
  p.token_row_bytes = RowBytes(h, token_bytes);
  p.num_ranks = counts.shape[0];
  p.num_experts = counts.shape[1];
  p.count_type = count_type;
  p.expert_token_num_type = attrs.expert_token_num_type;
  p.idx_type = attrs.idx_type;
  return p;
}

void ValidateMoeReRoutingCounts(const cpu::MoeReRoutingParams& p, const void* counts) {
  const int64_t n = p.num_ranks, e = p.num_experts;
  unsigned __int128 sum = 0;  // N*E counts below 2^63 each: exact, never overflows
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t x = 0; x < e; ++x) {
      const int64_t i = r * e + x;
      const int64_t c = p.count_type == cpu::CountType::kInt32
                            ? static_cast<const int32_t*>(counts)[i]
                            : static_cast<const int64_t*>(counts)[i];
      if (c < 0) {
        FailInput(kCounts, Str("must be non-negative, got ", c, " at [", r, ", ", x, "]"));
      }
      sum += static_cast<unsigned __int128>(c);
    }
  }
  if (sum != static_cast<unsigned __int128>(p.num_tokens)) {
    FailInput(kCounts, Str("must sum to the token count A = ", p.num_tokens,
                           " (tokens.shape[0]), got ", U128Str(sum)));
  }
}

}  // namespace ascend_moe
