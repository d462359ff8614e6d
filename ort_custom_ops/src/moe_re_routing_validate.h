// MoeReRouting attribute table and input validation (docs/operators.md §2.3), shared by every execution
// provider's kernel: errors name the input or attribute and the offending value.
#pragma once

#include <string>

#include "op_utils.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

inline constexpr const char* kMoeReRoutingName = "MoeReRouting";

// Input and output positions (docs/operators.md §2.1).
enum MoeReRoutingInput : size_t { kRrTokens = 0, kRrCounts = 1, kRrScales = 2, kRrNumInputs = 3 };
enum MoeReRoutingOutput : size_t {
  kRrPermuteTokens = 0,
  kRrPermuteScales = 1,
  kRrPermuteIdx = 2,
  kRrExpertTokenNum = 3,
  kRrNumOutputs = 4
};

// Attribute table: the kernels read attributes through it and the manifest publishes it.
enum MoeReRoutingAttrIndex : size_t { kRrExpertTokenNumType = 0, kRrIdxType = 1 };
inline constexpr AttrSpec kMoeReRoutingAttrs[] = {
    {"expert_token_num_type", AttrSpec::kInt, false, 1},
    {"idx_type", AttrSpec::kInt, false, 0},
};

struct MoeReRoutingAttrs {
  int64_t expert_token_num_type = 1;  // 1 = per-expert counts, 0 = inclusive prefix sums
  int64_t idx_type = 0;               // 0 = gather index, 1 = scatter index
};

// The error message for invalid attribute values; empty when they are valid.
std::string CheckMoeReRoutingAttrs(const MoeReRoutingAttrs& attrs);

// Reads the attributes (defaults from the table) and fails on invalid values.
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
