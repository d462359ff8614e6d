// Attribute defaults and size limits generated from the ONNX schemas (onnx_schemas: each op
// module's SCHEMA and LIMITS), for the kernels' parameter structs and checks.
// Do not edit: regenerate with `python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs`;
// tests/test_op_table.py::test_generated_headers_are_current fails when this file and the schemas differ.
#pragma once

#include <cstdint>

namespace ascend_moe::attr_defaults {

namespace moe_gating_top_k_hash {
inline constexpr float kEps = 1e-20f;
inline constexpr int64_t kGroupCount = 1;
inline constexpr int64_t kGroupSelectMode = 0;
inline constexpr int64_t kKGroup = 1;
inline constexpr int64_t kNormType = 0;
inline constexpr int64_t kOutFlag = 0;
inline constexpr int64_t kRenorm = 0;
inline constexpr float kRoutedScalingFactor = 1.0f;
}  // namespace moe_gating_top_k_hash

namespace moe_re_routing {
inline constexpr int64_t kExpertTokenNumType = 1;
inline constexpr int64_t kIdxType = 0;
}  // namespace moe_re_routing

namespace moe_routed_experts {
inline constexpr int64_t kActQuant = 0;
inline constexpr float kActivationAlpha = 1.0f;
inline constexpr float kActivationBeta = 0.0f;
inline constexpr int64_t kBlockSize = 0;
inline constexpr float kSwigluLimit = 0.0f;
inline constexpr int64_t kWeightBits = 8;
}  // namespace moe_routed_experts

namespace grouped_matmul {
inline constexpr int64_t kGroupListType = 0;
inline constexpr int64_t kOutputDtype = 0;
inline constexpr int64_t kTransposeWeight = 0;
}  // namespace grouped_matmul

namespace moe_init_routing_v3 {
inline constexpr int64_t kActiveExpertEnd = -1;
inline constexpr int64_t kActiveExpertStart = 0;
inline constexpr int64_t kActiveNum = -1;
inline constexpr int64_t kDropPadMode = 0;
inline constexpr int64_t kExpertCapacity = -1;
inline constexpr int64_t kExpertNum = -1;
inline constexpr int64_t kExpertTokensNumFlag = 0;
inline constexpr int64_t kExpertTokensNumType = 0;
inline constexpr int64_t kQuantMode = -1;
inline constexpr int64_t kRowIdxType = 0;
}  // namespace moe_init_routing_v3

namespace moe_init_routing {
}  // namespace moe_init_routing

namespace moe_token_permute {
inline constexpr int64_t kNumOutTokens = 0;
inline constexpr int64_t kPaddedMode = 0;
}  // namespace moe_token_permute

namespace moe_finalize_routing_v2 {
inline constexpr int64_t kDropPadMode = 0;
}  // namespace moe_finalize_routing_v2

namespace moe_token_unpermute {
inline constexpr int64_t kPaddedMode = 0;
}  // namespace moe_token_unpermute

namespace swi_glu {
inline constexpr int64_t kDim = -1;
}  // namespace swi_glu

}  // namespace ascend_moe::attr_defaults

namespace ascend_moe::limits {

namespace moe_gating_top_k_hash {
inline constexpr int64_t kMaxK = 64;
inline constexpr int64_t kMaxExperts = 2048;
}  // namespace moe_gating_top_k_hash

namespace moe_re_routing {
inline constexpr int64_t kMaxTokens = 2147483647;
}  // namespace moe_re_routing

namespace moe_routed_experts {
inline constexpr int64_t kA8Step = 8;
inline constexpr int64_t kA8MaxInputs = 131072;
}  // namespace moe_routed_experts

namespace moe_init_routing_v3 {
inline constexpr int64_t kMaxPairs = 2147483647;
}  // namespace moe_init_routing_v3

namespace moe_init_routing {
inline constexpr int64_t kMaxPairs = 2147483647;
inline constexpr int64_t kMaxExpertId = 2147483647;
}  // namespace moe_init_routing

namespace moe_token_permute {
inline constexpr int64_t kMaxPairs = 2147483647;
inline constexpr int64_t kMaxExpertId = 2147483647;
}  // namespace moe_token_permute

}  // namespace ascend_moe::limits
