// MoeReRouting attribute table and input validation (docs/operators.md §2.3), shared by every execution
// provider's kernel: errors name the input or attribute and the offending value.
#pragma once

#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

namespace rerouting_defs = defs::moe_re_routing;
inline constexpr const char* kMoeReRoutingName = rerouting_defs::kName;

// Input and output positions (generated from the schema; short names for the kernels).
enum MoeReRoutingInput : size_t {
  kRrTokens = rerouting_defs::kInTokens,
  kRrCounts = rerouting_defs::kInExpertTokenNumPerRank,
  kRrScales = rerouting_defs::kInPerTokenScales,
  kRrNumInputs = rerouting_defs::kNumIns
};
enum MoeReRoutingOutput : size_t {
  kRrPermuteTokens = rerouting_defs::kOutPermuteTokens,
  kRrPermuteScales = rerouting_defs::kOutPermutePerTokenScales,
  kRrPermuteIdx = rerouting_defs::kOutPermuteTokenIdx,
  kRrExpertTokenNum = rerouting_defs::kOutExpertTokenNum,
  kRrNumOutputs = rerouting_defs::kNumOuts
};

// Attribute values as the kernels use them, read through the generated table (which holds the
// defaults): expert_token_num_type 1 = per-expert counts, 0 = inclusive prefix sums;
// idx_type 0 = gather index, 1 = scatter index.
struct MoeReRoutingAttrs {
  int64_t expert_token_num_type;
  int64_t idx_type;
};

// The error message for invalid attribute values; empty when they are valid.
std::string CheckMoeReRoutingAttrs(const MoeReRoutingAttrs& attrs);

// Reads the attributes (defaults from the table) and fails on another kind or invalid values.
MoeReRoutingAttrs ReadMoeReRoutingAttrs(const OrtKernelInfo* info);

// Checks ranks, dims and element types of the inputs (no data is read) and returns the kernel
// parameters. `scales.present` false means no per_token_scales.
cpu::MoeReRoutingParams ValidateMoeReRoutingShapes(const InputView& tokens,
                                                   const InputView& counts,
                                                   const InputView& scales,
                                                   const MoeReRoutingAttrs& attrs);

// Checks the count values (host memory): every count >= 0 and their exact sum equals A.
void ValidateMoeReRoutingCounts(const cpu::MoeReRoutingParams& params, const void* counts);

// Bytes of one element of a token / scale type; 0 when the type is not allowed there.
int64_t MoeReRoutingTokenElemBytes(ONNXTensorElementDataType type);
int64_t MoeReRoutingScaleElemBytes(ONNXTensorElementDataType type);

}  // namespace ascend_moe
