// MoeRoutedExperts input validation (docs/operators.md §3.3) beyond what the generated table
// checks, shared by every execution provider's kernel: errors name the input and the offending
// value (the messages of onnx_schemas.moe_routed_experts).
#pragma once

#include <array>
#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

namespace ascend_moe {

namespace experts = defs::moe_routed_experts;

using RoutedExpertsInputs = std::array<InputView, experts::kNumIns>;

// Ranks and dims of the inputs (the table checked presence and element types; no data is read):
// the kernel parameters.
cpu::MoeRoutedExpertsParams ValidateMoeRoutedExpertsShapes(const RoutedExpertsInputs& in,
                                                           const experts::Attrs& attrs);

// The first pair (t * k + j) whose index is outside [0, E), or -1; reads expert_idx (host
// memory), allocates nothing.
int64_t FirstBadExpertIndex(const cpu::MoeRoutedExpertsParams& params, const void* expert_idx);

// Fails with the message for the out-of-range index of pair `bad_pair` (t * k + j).
[[noreturn]] void FailExpertIndex(const cpu::MoeRoutedExpertsParams& params, const void* expert_idx,
                                  int64_t bad_pair);

}  // namespace ascend_moe
