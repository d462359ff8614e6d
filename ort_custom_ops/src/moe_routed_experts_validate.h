// MoeRoutedExperts attribute reading and input validation (docs/operators.md §3.3): errors name
// the input or attribute and the offending value (the messages of onnx_schemas.moe_routed_experts).
#pragma once

#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_routed_experts.h"

namespace ascend_moe {

namespace experts_defs = defs::moe_routed_experts;
inline constexpr const char* kMoeRoutedExpertsName = experts_defs::kName;

// The message for an invalid swiglu_limit; empty when it is valid.
std::string CheckMoeRoutedExpertsLimit(float swiglu_limit);

// Reads swiglu_limit (default from the table) and fails on another kind or an invalid value.
float ReadMoeRoutedExpertsLimit(const OrtKernelInfo* info);

// Checks presence, element types, ranks and dims of the inputs (no data is read) and returns the
// kernel parameters (swiglu_limit included).
cpu::MoeRoutedExpertsParams ValidateMoeRoutedExpertsShapes(const InputView& x, const InputView& expert_idx,
                                                           const InputView& routing_weights,
                                                           const InputView& gate_up, const InputView& down,
                                                           float swiglu_limit);

// The first pair (t * k + j) whose index is outside [0, E), or -1; reads expert_idx, allocates nothing.
int64_t FirstBadMoeRoutedExpertsIndex(const cpu::MoeRoutedExpertsParams& params, const void* expert_idx);

// Fails, naming the inputs that set them, when the kernel's scratch (T*k*I floats of activations
// plus per-pair and per-expert bookkeeping) overflows or `allocation_failed`: checked before
// allocating (overflow-safe) and again when the allocation itself fails.
void CheckMoeRoutedExpertsScratch(const cpu::MoeRoutedExpertsParams& params, bool allocation_failed = false);

// Fails with the message for the out-of-range index of pair `bad_pair` (t * k + j).
[[noreturn]] void FailMoeRoutedExpertsIndex(const cpu::MoeRoutedExpertsParams& params, const void* expert_idx,
                                            int64_t bad_pair);

}  // namespace ascend_moe
