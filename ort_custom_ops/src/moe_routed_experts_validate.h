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

// Fails with the message for the out-of-range index of pair `bad_pair` (t * k + j).
[[noreturn]] void FailMoeRoutedExpertsIndex(const cpu::MoeRoutedExpertsParams& params, const void* expert_idx,
                                            int64_t bad_pair);

}  // namespace ascend_moe
