// The graph-engine plugin's tables, generated from the ONNX schemas (onnx_schemas), GE's recorded
// operator IR (ge_plugin/ge_ir.py: names, order, types, defaults, source and commit) and the mapping
// (ge_plugin/mapping.py). Do not edit: regenerate with
// `python -m ascend_moe_onnx.ge_plugin.generate`; tests/test_ge_plugin.py fails when it is stale.
#pragma once

#include <cmath>
#include <iterator>

#include "mapping_types.h"

namespace ascend_moe_ge {

inline constexpr const char* kDomain = "ascend.moe";

// ---- MoeGatingTopKHash (domain version 1)
inline constexpr OnnxInputSpec kMoeGatingTopKHashV1OnnxInputs[] = {
    {"x", false, nullptr},
    {"bias", true, nullptr},
    {"input_ids", true, nullptr},
    {"tid2eid", true, nullptr},
    {"additional_bias", true, "GE's MoeGatingTopKHash has no additional_bias input (its IR: x, bias, input_ids, tid2eid)"},
    {"additional_token_mask", true, "GE's MoeGatingTopKHash has no additional_token_mask input (its IR: x, bias, input_ids, tid2eid)"},
};
inline constexpr OnnxAttrSpec kMoeGatingTopKHashV1OnnxAttrs[] = {
    {"eps", OnnxAttrKind::kFloat, false, 0, 9.999999682655225e-21f},
    {"group_count", OnnxAttrKind::kInt, false, 1, 0.0f},
    {"group_select_mode", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"k", OnnxAttrKind::kInt, true, 0, 0.0f},
    {"k_group", OnnxAttrKind::kInt, false, 1, 0.0f},
    {"norm_type", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"out_flag", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"renorm", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"routed_scaling_factor", OnnxAttrKind::kFloat, false, 0, 1.0f},
};
inline constexpr GeInputSpec kMoeGatingTopKHashV10Inputs[] = {
    {"x", GeInputKind::kRequired, 0, -1},
    {"bias", GeInputKind::kOptional, 1, -1},
    {"input_ids", GeInputKind::kOptional, 2, -1},
    {"tid2eid", GeInputKind::kOptional, 3, -1},
};
inline constexpr GeInputSpec kMoeGatingTopKHashV10Outputs[] = {
    {"y", GeInputKind::kRequired, 0, -1},
    {"expert_idx", GeInputKind::kRequired, 1, -1},
    {"out", GeInputKind::kRequired, 2, -1},
};
inline constexpr GeAttrSpec kMoeGatingTopKHashV10Attrs[] = {
    {"k", GeAttrKind::kInt, GeAttrSource::kOnnx, 3, -1, 0, 0.0f, nullptr, 0},
    {"k_group", GeAttrKind::kInt, GeAttrSource::kOnnx, 4, -1, 0, 0.0f, nullptr, 0},
    {"group_count", GeAttrKind::kInt, GeAttrSource::kOnnx, 1, -1, 0, 0.0f, nullptr, 0},
    {"group_select_mode", GeAttrKind::kInt, GeAttrSource::kOnnx, 2, -1, 0, 0.0f, nullptr, 0},
    {"renorm", GeAttrKind::kInt, GeAttrSource::kOnnx, 7, -1, 0, 0.0f, nullptr, 0},
    {"norm_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 5, -1, 0, 0.0f, nullptr, 0},
    {"out_flag", GeAttrKind::kBool, GeAttrSource::kOnnx, 6, -1, 0, 0.0f, nullptr, 0},
    {"routed_scaling_factor", GeAttrKind::kFloat, GeAttrSource::kOnnx, 8, -1, 0, 0.0f, nullptr, 0},
    {"eps", GeAttrKind::kFloat, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr GeInputSpec kMoeGatingTopKHashV11Inputs[] = {
    {"x", GeInputKind::kRequired, 0, -1},
    {"bias", GeInputKind::kOptional, 1, -1},
};
inline constexpr GeInputSpec kMoeGatingTopKHashV11Outputs[] = {
    {"y", GeInputKind::kRequired, 0, -1},
    {"expert_idx", GeInputKind::kRequired, 1, -1},
    {"out", GeInputKind::kRequired, 2, -1},
};
inline constexpr GeAttrSpec kMoeGatingTopKHashV11Attrs[] = {
    {"k", GeAttrKind::kInt, GeAttrSource::kOnnx, 3, -1, 0, 0.0f, nullptr, 0},
    {"k_group", GeAttrKind::kInt, GeAttrSource::kOnnx, 4, -1, 0, 0.0f, nullptr, 0},
    {"group_count", GeAttrKind::kInt, GeAttrSource::kOnnx, 1, -1, 0, 0.0f, nullptr, 0},
    {"group_select_mode", GeAttrKind::kInt, GeAttrSource::kOnnx, 2, -1, 0, 0.0f, nullptr, 0},
    {"renorm", GeAttrKind::kInt, GeAttrSource::kOnnx, 7, -1, 0, 0.0f, nullptr, 0},
    {"norm_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 5, -1, 0, 0.0f, nullptr, 0},
    {"out_flag", GeAttrKind::kBool, GeAttrSource::kOnnx, 6, -1, 0, 0.0f, nullptr, 0},
    {"routed_scaling_factor", GeAttrKind::kFloat, GeAttrSource::kOnnx, 8, -1, 0, 0.0f, nullptr, 0},
    {"eps", GeAttrKind::kFloat, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeGatingTopKHashV1Variants[] = {
    {"MoeGatingTopKHash", 12, 0, kMoeGatingTopKHashV10Inputs, std::size(kMoeGatingTopKHashV10Inputs), kMoeGatingTopKHashV10Attrs, std::size(kMoeGatingTopKHashV10Attrs), kMoeGatingTopKHashV10Outputs, std::size(kMoeGatingTopKHashV10Outputs)},
    {"MoeGatingTopK", 0, 12, kMoeGatingTopKHashV11Inputs, std::size(kMoeGatingTopKHashV11Inputs), kMoeGatingTopKHashV11Attrs, std::size(kMoeGatingTopKHashV11Attrs), kMoeGatingTopKHashV11Outputs, std::size(kMoeGatingTopKHashV11Outputs)},
};
inline constexpr OpSpec kMoeGatingTopKHashV1 = {"MoeGatingTopKHash", 1, nullptr, kMoeGatingTopKHashV1OnnxInputs, std::size(kMoeGatingTopKHashV1OnnxInputs), kMoeGatingTopKHashV1OnnxAttrs, std::size(kMoeGatingTopKHashV1OnnxAttrs), 3, kMoeGatingTopKHashV1Variants, std::size(kMoeGatingTopKHashV1Variants), nullptr, 0, true};

// ---- MoeReRouting (domain version 1)
inline constexpr OnnxInputSpec kMoeReRoutingV1OnnxInputs[] = {
    {"tokens", false, nullptr},
    {"expert_token_num_per_rank", false, nullptr},
    {"per_token_scales", true, nullptr},
};
inline constexpr OnnxAttrSpec kMoeReRoutingV1OnnxAttrs[] = {
    {"expert_token_num_type", OnnxAttrKind::kInt, false, 1, 0.0f},
    {"idx_type", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeReRoutingV10Inputs[] = {
    {"tokens", GeInputKind::kRequired, 0, -1},
    {"expert_token_num_per_rank", GeInputKind::kRequired, 1, -1},
    {"per_token_scales", GeInputKind::kOptional, 2, -1},
};
inline constexpr GeInputSpec kMoeReRoutingV10Outputs[] = {
    {"permute_tokens", GeInputKind::kRequired, 0, -1},
    {"permute_per_token_scales", GeInputKind::kRequired, 1, -1},
    {"permute_token_idx", GeInputKind::kRequired, 2, -1},
    {"expert_token_num", GeInputKind::kRequired, 3, -1},
};
inline constexpr GeAttrSpec kMoeReRoutingV10Attrs[] = {
    {"expert_token_num_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
    {"idx_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 1, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeReRoutingV1Variants[] = {
    {"MoeReRouting", 0, 0, kMoeReRoutingV10Inputs, std::size(kMoeReRoutingV10Inputs), kMoeReRoutingV10Attrs, std::size(kMoeReRoutingV10Attrs), kMoeReRoutingV10Outputs, std::size(kMoeReRoutingV10Outputs)},
};
inline constexpr OpSpec kMoeReRoutingV1 = {"MoeReRouting", 1, nullptr, kMoeReRoutingV1OnnxInputs, std::size(kMoeReRoutingV1OnnxInputs), kMoeReRoutingV1OnnxAttrs, std::size(kMoeReRoutingV1OnnxAttrs), 4, kMoeReRoutingV1Variants, std::size(kMoeReRoutingV1Variants), nullptr, 0, false};

// ---- MoeRoutedExperts (domain version 1)
inline constexpr OnnxInputSpec kMoeRoutedExpertsV1OnnxInputs[] = {
    {"x", false, nullptr},
    {"expert_idx", false, nullptr},
    {"routing_weights", false, nullptr},
    {"gate_up_weights", false, nullptr},
    {"down_weights", false, nullptr},
    {"gate_up_scales", true, nullptr},
    {"down_scales", true, nullptr},
    {"gate_up_bias", true, nullptr},
    {"down_bias", true, nullptr},
};
inline constexpr OnnxAttrSpec kMoeRoutedExpertsV1OnnxAttrs[] = {
    {"act_quant", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"activation_alpha", OnnxAttrKind::kFloat, false, 0, 1.0f},
    {"activation_beta", OnnxAttrKind::kFloat, false, 0, 0.0f},
    {"block_size", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"swiglu_limit", OnnxAttrKind::kFloat, false, 0, 0.0f},
    {"weight_bits", OnnxAttrKind::kInt, false, 8, 0.0f},
};
inline constexpr OpSpec kMoeRoutedExpertsV1 = {"MoeRoutedExperts", 1, "no GE operator computes it; export with --target ge, which writes the op family's chain (MoeInitRoutingV3, GroupedMatmul, SwiGlu, GroupedMatmul, MoeFinalizeRoutingV2) with [E, K, N] weights", kMoeRoutedExpertsV1OnnxInputs, std::size(kMoeRoutedExpertsV1OnnxInputs), kMoeRoutedExpertsV1OnnxAttrs, std::size(kMoeRoutedExpertsV1OnnxAttrs), 1, nullptr, 0, nullptr, 0, false};

// ---- GroupedMatmul (domain version 1)
inline constexpr OnnxInputSpec kGroupedMatmulV1OnnxInputs[] = {
    {"x", false, nullptr},
    {"weight", false, nullptr},
    {"group_list", false, nullptr},
    {"bias", true, nullptr},
    {"scale", true, nullptr},
    {"offset", true, nullptr},
    {"antiquant_scale", true, nullptr},
    {"antiquant_offset", true, nullptr},
    {"per_token_scale", true, nullptr},
};
inline constexpr OnnxAttrSpec kGroupedMatmulV1OnnxAttrs[] = {
    {"group_list_type", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"output_dtype", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"transpose_weight", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr ValuePair kGroupedMatmulV10OutputDtypeValues[] = {{0, 0}, {1, 3}, {3, -1}, {6, 2}, {10, 0}, {16, 1}};
inline constexpr RefusedValue kGroupedMatmulV1Refused[] = {
    {2, 1, "GE's GroupedMatmul transpose_weight is reserved, not enabled: weights must be [E, K, N] (export with --target ge)"},
};
inline constexpr GeInputSpec kGroupedMatmulV10Inputs[] = {
    {"x", GeInputKind::kDynamic, 0, -1},
    {"weight", GeInputKind::kDynamic, 1, -1},
    {"bias", GeInputKind::kDynamic, 3, -1},
    {"scale", GeInputKind::kDynamic, 4, -1},
    {"offset", GeInputKind::kDynamic, 5, -1},
    {"antiquant_scale", GeInputKind::kDynamic, 6, -1},
    {"antiquant_offset", GeInputKind::kDynamic, 7, -1},
    {"group_list", GeInputKind::kOptional, 2, 9},
    {"per_token_scale", GeInputKind::kOptional, 8, -1},
};
inline constexpr GeInputSpec kGroupedMatmulV10Outputs[] = {
    {"y", GeInputKind::kDynamic, 0, -1},
};
inline constexpr GeAttrSpec kGroupedMatmulV10Attrs[] = {
    {"split_item", GeAttrKind::kInt, GeAttrSource::kFixed, -1, -1, 3, 0.0f, nullptr, 0},
    {"dtype", GeAttrKind::kInt, GeAttrSource::kOnnx, 1, -1, 0, 0.0f, kGroupedMatmulV10OutputDtypeValues, 6},
    {"transpose_weight", GeAttrKind::kBool, GeAttrSource::kOnnx, 2, -1, 0, 0.0f, nullptr, 0},
    {"group_type", GeAttrKind::kInt, GeAttrSource::kFixed, -1, -1, 0, 0.0f, nullptr, 0},
    {"group_list_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kGroupedMatmulV1Variants[] = {
    {"GroupedMatmul", 0, 0, kGroupedMatmulV10Inputs, std::size(kGroupedMatmulV10Inputs), kGroupedMatmulV10Attrs, std::size(kGroupedMatmulV10Attrs), kGroupedMatmulV10Outputs, std::size(kGroupedMatmulV10Outputs)},
};
inline constexpr OpSpec kGroupedMatmulV1 = {"GroupedMatmul", 1, nullptr, kGroupedMatmulV1OnnxInputs, std::size(kGroupedMatmulV1OnnxInputs), kGroupedMatmulV1OnnxAttrs, std::size(kGroupedMatmulV1OnnxAttrs), 1, kGroupedMatmulV1Variants, std::size(kGroupedMatmulV1Variants), kGroupedMatmulV1Refused, std::size(kGroupedMatmulV1Refused), true};

// ---- MoeInitRoutingV3 (domain version 1)
inline constexpr OnnxInputSpec kMoeInitRoutingV3V1OnnxInputs[] = {
    {"x", false, nullptr},
    {"expert_idx", false, nullptr},
    {"scale", true, nullptr},
    {"offset", true, nullptr},
};
inline constexpr OnnxAttrSpec kMoeInitRoutingV3V1OnnxAttrs[] = {
    {"active_expert_end", OnnxAttrKind::kInt, false, -1, 0.0f},
    {"active_expert_start", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"active_num", OnnxAttrKind::kInt, false, -1, 0.0f},
    {"drop_pad_mode", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"expert_capacity", OnnxAttrKind::kInt, false, -1, 0.0f},
    {"expert_num", OnnxAttrKind::kInt, false, -1, 0.0f},
    {"expert_tokens_num_flag", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"expert_tokens_num_type", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"quant_mode", OnnxAttrKind::kInt, false, -1, 0.0f},
    {"row_idx_type", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeInitRoutingV3V10Inputs[] = {
    {"x", GeInputKind::kRequired, 0, -1},
    {"expert_idx", GeInputKind::kRequired, 1, 3},
    {"scale", GeInputKind::kOptional, 2, -1},
    {"offset", GeInputKind::kOptional, 3, -1},
};
inline constexpr GeInputSpec kMoeInitRoutingV3V10Outputs[] = {
    {"expanded_x", GeInputKind::kRequired, 0, -1},
    {"expanded_row_idx", GeInputKind::kRequired, 1, -1},
    {"expert_tokens_count_or_cumsum", GeInputKind::kRequired, 2, -1},
    {"expanded_scale", GeInputKind::kRequired, 3, -1},
};
inline constexpr GeAttrSpec kMoeInitRoutingV3V10Attrs[] = {
    {"active_num", GeAttrKind::kInt, GeAttrSource::kOnnx, 2, -1, 0, 0.0f, nullptr, 0},
    {"expert_capacity", GeAttrKind::kInt, GeAttrSource::kOnnx, 4, -1, 0, 0.0f, nullptr, 0},
    {"expert_num", GeAttrKind::kInt, GeAttrSource::kOnnx, 5, -1, 0, 0.0f, nullptr, 0},
    {"drop_pad_mode", GeAttrKind::kInt, GeAttrSource::kOnnx, 3, -1, 0, 0.0f, nullptr, 0},
    {"expert_tokens_num_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 7, -1, 0, 0.0f, nullptr, 0},
    {"expert_tokens_num_flag", GeAttrKind::kBool, GeAttrSource::kOnnx, 6, -1, 0, 0.0f, nullptr, 0},
    {"quant_mode", GeAttrKind::kInt, GeAttrSource::kOnnx, 8, -1, 0, 0.0f, nullptr, 0},
    {"active_expert_range", GeAttrKind::kListInt, GeAttrSource::kExpertRange, 1, 0, 0, 0.0f, nullptr, 0},
    {"row_idx_type", GeAttrKind::kInt, GeAttrSource::kOnnx, 9, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeInitRoutingV3V1Variants[] = {
    {"MoeInitRoutingV3", 0, 0, kMoeInitRoutingV3V10Inputs, std::size(kMoeInitRoutingV3V10Inputs), kMoeInitRoutingV3V10Attrs, std::size(kMoeInitRoutingV3V10Attrs), kMoeInitRoutingV3V10Outputs, std::size(kMoeInitRoutingV3V10Outputs)},
};
inline constexpr OpSpec kMoeInitRoutingV3V1 = {"MoeInitRoutingV3", 1, nullptr, kMoeInitRoutingV3V1OnnxInputs, std::size(kMoeInitRoutingV3V1OnnxInputs), kMoeInitRoutingV3V1OnnxAttrs, std::size(kMoeInitRoutingV3V1OnnxAttrs), 4, kMoeInitRoutingV3V1Variants, std::size(kMoeInitRoutingV3V1Variants), nullptr, 0, true};

// ---- MoeInitRouting (domain version 1)
inline constexpr OnnxInputSpec kMoeInitRoutingV1OnnxInputs[] = {
    {"x", false, nullptr},
    {"row_idx", false, nullptr},
    {"expert_idx", false, nullptr},
};
inline constexpr OnnxAttrSpec kMoeInitRoutingV1OnnxAttrs[] = {
    {"active_num", OnnxAttrKind::kInt, true, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeInitRoutingV10Inputs[] = {
    {"x", GeInputKind::kRequired, 0, -1},
    {"row_idx", GeInputKind::kRequired, 1, -1},
    {"expert_idx", GeInputKind::kRequired, 2, -1},
};
inline constexpr GeInputSpec kMoeInitRoutingV10Outputs[] = {
    {"expanded_x", GeInputKind::kRequired, 0, -1},
    {"expanded_row_idx", GeInputKind::kRequired, 1, -1},
    {"expanded_expert_idx", GeInputKind::kRequired, 2, -1},
};
inline constexpr GeAttrSpec kMoeInitRoutingV10Attrs[] = {
    {"active_num", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeInitRoutingV1Variants[] = {
    {"MoeInitRouting", 0, 0, kMoeInitRoutingV10Inputs, std::size(kMoeInitRoutingV10Inputs), kMoeInitRoutingV10Attrs, std::size(kMoeInitRoutingV10Attrs), kMoeInitRoutingV10Outputs, std::size(kMoeInitRoutingV10Outputs)},
};
inline constexpr OpSpec kMoeInitRoutingV1 = {"MoeInitRouting", 1, nullptr, kMoeInitRoutingV1OnnxInputs, std::size(kMoeInitRoutingV1OnnxInputs), kMoeInitRoutingV1OnnxAttrs, std::size(kMoeInitRoutingV1OnnxAttrs), 3, kMoeInitRoutingV1Variants, std::size(kMoeInitRoutingV1Variants), nullptr, 0, false};

// ---- MoeTokenPermute (domain version 1)
inline constexpr OnnxInputSpec kMoeTokenPermuteV1OnnxInputs[] = {
    {"tokens", false, nullptr},
    {"indices", false, nullptr},
};
inline constexpr OnnxAttrSpec kMoeTokenPermuteV1OnnxAttrs[] = {
    {"num_out_tokens", OnnxAttrKind::kInt, false, 0, 0.0f},
    {"padded_mode", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeTokenPermuteV10Inputs[] = {
    {"tokens", GeInputKind::kRequired, 0, -1},
    {"indices", GeInputKind::kRequired, 1, -1},
};
inline constexpr GeInputSpec kMoeTokenPermuteV10Outputs[] = {
    {"permute_tokens", GeInputKind::kRequired, 0, -1},
    {"sorted_indices", GeInputKind::kRequired, 1, -1},
};
inline constexpr GeAttrSpec kMoeTokenPermuteV10Attrs[] = {
    {"num_out_tokens", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
    {"padded_mode", GeAttrKind::kBool, GeAttrSource::kOnnx, 1, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeTokenPermuteV1Variants[] = {
    {"MoeTokenPermute", 0, 0, kMoeTokenPermuteV10Inputs, std::size(kMoeTokenPermuteV10Inputs), kMoeTokenPermuteV10Attrs, std::size(kMoeTokenPermuteV10Attrs), kMoeTokenPermuteV10Outputs, std::size(kMoeTokenPermuteV10Outputs)},
};
inline constexpr OpSpec kMoeTokenPermuteV1 = {"MoeTokenPermute", 1, nullptr, kMoeTokenPermuteV1OnnxInputs, std::size(kMoeTokenPermuteV1OnnxInputs), kMoeTokenPermuteV1OnnxAttrs, std::size(kMoeTokenPermuteV1OnnxAttrs), 2, kMoeTokenPermuteV1Variants, std::size(kMoeTokenPermuteV1Variants), nullptr, 0, false};

// ---- MoeFinalizeRoutingV2 (domain version 1)
inline constexpr OnnxInputSpec kMoeFinalizeRoutingV2V1OnnxInputs[] = {
    {"expanded_x", false, nullptr},
    {"expanded_row_idx", false, nullptr},
    {"x1", true, nullptr},
    {"x2", true, nullptr},
    {"bias", true, nullptr},
    {"scales", true, nullptr},
    {"expert_idx", true, nullptr},
};
inline constexpr OnnxAttrSpec kMoeFinalizeRoutingV2V1OnnxAttrs[] = {
    {"drop_pad_mode", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeFinalizeRoutingV2V10Inputs[] = {
    {"expanded_x", GeInputKind::kRequired, 0, -1},
    {"expanded_row_idx", GeInputKind::kRequired, 1, 3},
    {"x1", GeInputKind::kOptional, 2, -1},
    {"x2", GeInputKind::kOptional, 3, -1},
    {"bias", GeInputKind::kOptional, 4, -1},
    {"scales", GeInputKind::kOptional, 5, -1},
    {"expert_idx", GeInputKind::kOptional, 6, 3},
};
inline constexpr GeInputSpec kMoeFinalizeRoutingV2V10Outputs[] = {
    {"y", GeInputKind::kRequired, 0, -1},
};
inline constexpr GeAttrSpec kMoeFinalizeRoutingV2V10Attrs[] = {
    {"drop_pad_mode", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeFinalizeRoutingV2V1Variants[] = {
    {"MoeFinalizeRoutingV2", 0, 0, kMoeFinalizeRoutingV2V10Inputs, std::size(kMoeFinalizeRoutingV2V10Inputs), kMoeFinalizeRoutingV2V10Attrs, std::size(kMoeFinalizeRoutingV2V10Attrs), kMoeFinalizeRoutingV2V10Outputs, std::size(kMoeFinalizeRoutingV2V10Outputs)},
};
inline constexpr OpSpec kMoeFinalizeRoutingV2V1 = {"MoeFinalizeRoutingV2", 1, nullptr, kMoeFinalizeRoutingV2V1OnnxInputs, std::size(kMoeFinalizeRoutingV2V1OnnxInputs), kMoeFinalizeRoutingV2V1OnnxAttrs, std::size(kMoeFinalizeRoutingV2V1OnnxAttrs), 1, kMoeFinalizeRoutingV2V1Variants, std::size(kMoeFinalizeRoutingV2V1Variants), nullptr, 0, true};

// ---- MoeTokenUnpermute (domain version 1)
inline constexpr OnnxInputSpec kMoeTokenUnpermuteV1OnnxInputs[] = {
    {"permuted_tokens", false, nullptr},
    {"sorted_indices", false, nullptr},
    {"probs", true, nullptr},
};
inline constexpr OnnxAttrSpec kMoeTokenUnpermuteV1OnnxAttrs[] = {
    {"padded_mode", OnnxAttrKind::kInt, false, 0, 0.0f},
};
inline constexpr GeInputSpec kMoeTokenUnpermuteV10Inputs[] = {
    {"permuted_tokens", GeInputKind::kRequired, 0, -1},
    {"sorted_indices", GeInputKind::kRequired, 1, 3},
    {"probs", GeInputKind::kOptional, 2, -1},
};
inline constexpr GeInputSpec kMoeTokenUnpermuteV10Outputs[] = {
    {"unpermuted_tokens", GeInputKind::kRequired, 0, -1},
};
inline constexpr GeAttrSpec kMoeTokenUnpermuteV10Attrs[] = {
    {"padded_mode", GeAttrKind::kBool, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kMoeTokenUnpermuteV1Variants[] = {
    {"MoeTokenUnpermute", 0, 0, kMoeTokenUnpermuteV10Inputs, std::size(kMoeTokenUnpermuteV10Inputs), kMoeTokenUnpermuteV10Attrs, std::size(kMoeTokenUnpermuteV10Attrs), kMoeTokenUnpermuteV10Outputs, std::size(kMoeTokenUnpermuteV10Outputs)},
};
inline constexpr OpSpec kMoeTokenUnpermuteV1 = {"MoeTokenUnpermute", 1, nullptr, kMoeTokenUnpermuteV1OnnxInputs, std::size(kMoeTokenUnpermuteV1OnnxInputs), kMoeTokenUnpermuteV1OnnxAttrs, std::size(kMoeTokenUnpermuteV1OnnxAttrs), 1, kMoeTokenUnpermuteV1Variants, std::size(kMoeTokenUnpermuteV1Variants), nullptr, 0, true};

// ---- SwiGlu (domain version 1)
inline constexpr OnnxInputSpec kSwiGluV1OnnxInputs[] = {
    {"x", false, nullptr},
};
inline constexpr OnnxAttrSpec kSwiGluV1OnnxAttrs[] = {
    {"dim", OnnxAttrKind::kInt, false, -1, 0.0f},
};
inline constexpr GeInputSpec kSwiGluV10Inputs[] = {
    {"x", GeInputKind::kRequired, 0, -1},
};
inline constexpr GeInputSpec kSwiGluV10Outputs[] = {
    {"y", GeInputKind::kRequired, 0, -1},
};
inline constexpr GeAttrSpec kSwiGluV10Attrs[] = {
    {"dim", GeAttrKind::kInt, GeAttrSource::kOnnx, 0, -1, 0, 0.0f, nullptr, 0},
};
inline constexpr VariantSpec kSwiGluV1Variants[] = {
    {"SwiGlu", 0, 0, kSwiGluV10Inputs, std::size(kSwiGluV10Inputs), kSwiGluV10Attrs, std::size(kSwiGluV10Attrs), kSwiGluV10Outputs, std::size(kSwiGluV10Outputs)},
};
inline constexpr OpSpec kSwiGluV1 = {"SwiGlu", 1, nullptr, kSwiGluV1OnnxInputs, std::size(kSwiGluV1OnnxInputs), kSwiGluV1OnnxAttrs, std::size(kSwiGluV1OnnxAttrs), 1, kSwiGluV1Variants, std::size(kSwiGluV1Variants), nullptr, 0, false};

// Every op and domain version the exporters write.
inline constexpr const OpSpec* kOps[] = {
    &kMoeGatingTopKHashV1,
    &kMoeReRoutingV1,
    &kMoeRoutedExpertsV1,
    &kGroupedMatmulV1,
    &kMoeInitRoutingV3V1,
    &kMoeInitRoutingV1,
    &kMoeTokenPermuteV1,
    &kMoeFinalizeRoutingV2V1,
    &kMoeTokenUnpermuteV1,
    &kSwiGluV1,
};

}  // namespace ascend_moe_ge

// X(n) for every row n of kOps: the plugin's one registration per op and domain version.
#define ASCEND_MOE_GE_FOR_EACH_OP(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9)
