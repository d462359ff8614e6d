#include "moe_re_routing_validate.h"

#include <limits>

namespace ascend_moe {

using namespace rerouting_defs;

namespace {

[[noreturn]] void FailInput(In input, const std::string& what_and_value) {
  Fail(Str(kName, ": input '", kInputs[input].name, "' ", what_and_value));
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

// Bytes of one element of a type the table allows for tokens / per_token_scales.
int64_t ElemBytes(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return 4;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return 2;
    default:
      return 1;  // int8, uint8, float8e4m3fn, float8e5m2
  }
}

}  // namespace

std::string rerouting_defs::CheckAttrs(const Attrs& attrs) {
  if (attrs.expert_token_num_type != 0 && attrs.expert_token_num_type != 1) {
    return Str(kName, ": attribute '", kAttrs[kAttrExpertTokenNumType].name,
               "' must be 0 (cumulative counts) or 1 (per-expert counts), got ", attrs.expert_token_num_type);
  }
  if (attrs.idx_type != 0 && attrs.idx_type != 1) {
    return Str(kName, ": attribute '", kAttrs[kAttrIdxType].name,
               "' must be 0 (gather index) or 1 (scatter index), got ", attrs.idx_type);
  }
  return {};
}

cpu::MoeReRoutingParams ValidateMoeReRoutingShapes(const InputView& tokens, const InputView& counts,
                                                   const InputView& scales, const Attrs& attrs) {
  const int64_t token_bytes = ElemBytes(tokens.type);
  if (tokens.shape.size() != 2) {
    FailInput(kInTokens, Str("must be 2-D [A, H], got shape ", ShapeStr(tokens.shape)));
  }
  const int64_t a = tokens.shape[0], h = tokens.shape[1];
  if (h < 1) FailInput(kInTokens, Str("must have H >= 1, got shape ", ShapeStr(tokens.shape)));
  if (a > limits::moe_re_routing::kMaxTokens) {
    FailInput(kInTokens, Str("must have at most ", limits::moe_re_routing::kMaxTokens,
                             " rows (permute_token_idx is int32), got A = ", a));
  }

  const cpu::CountType count_type =
      counts.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ? cpu::CountType::kInt32 : cpu::CountType::kInt64;
  if (counts.shape.size() != 2) {
    FailInput(kInExpertTokenNumPerRank, Str("must be 2-D [N, E], got shape ", ShapeStr(counts.shape)));
  }
  if (counts.shape[0] < 1 || counts.shape[1] < 1) {
    FailInput(kInExpertTokenNumPerRank,
              Str("must have N >= 1 and E >= 1, got shape ", ShapeStr(counts.shape)));
  }

  cpu::MoeReRoutingParams p;
  if (scales.present) {
    const int64_t scale_bytes = ElemBytes(scales.type);
    if (scales.shape.size() != 1 && scales.shape.size() != 2) {
      FailInput(kInPerTokenScales, Str("must be 1-D [A] or 2-D [A, S], got shape ", ShapeStr(scales.shape)));
    }
    if (scales.shape[0] != a) {
      FailInput(kInPerTokenScales, Str("must have first dimension A = ", a, " (tokens.shape[0]), got shape ",
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
      const int64_t c = p.count_type == cpu::CountType::kInt32 ? static_cast<const int32_t*>(counts)[i]
                                                               : static_cast<const int64_t*>(counts)[i];
      if (c < 0) {
        FailInput(kInExpertTokenNumPerRank, Str("must be non-negative, got ", c, " at [", r, ", ", x, "]"));
      }
      sum += static_cast<unsigned __int128>(c);
    }
  }
  if (sum != static_cast<unsigned __int128>(p.num_tokens)) {
    FailInput(kInExpertTokenNumPerRank, Str("must sum to the token count A = ", p.num_tokens,
                                            " (tokens.shape[0]), got ", U128Str(sum)));
  }
}

}  // namespace ascend_moe
