// Op definitions generated from the ONNX schemas (onnx_schemas): names, input/output order,
// optional flags, allowed element types, attribute kinds and defaults.
// Do not edit: regenerate with `python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs`;
// tests/test_op_defs.py fails when this file and the schemas differ.
#pragma once

#include <iterator>

#include "op_utils.h"

namespace ascend_moe::defs {

inline constexpr const char* kDomain = "ascend.moe";
inline constexpr int kOpsetVersion = 1;

// ---- MoeGatingTopKHash
namespace moe_gating_top_k_hash {

inline constexpr const char* kName = "MoeGatingTopKHash";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInBias = 1, kInInputIds = 2, kInTid2eid = 3, kInAdditionalBias = 4, kInAdditionalTokenMask = 5, kNumIns = 6 };
enum Out : size_t { kOutY = 0, kOutExpertIdx = 1, kOutOut = 2, kNumOuts = 3 };
enum Attr : size_t { kAttrEps = 0, kAttrGroupCount = 1, kAttrGroupSelectMode = 2, kAttrK = 3, kAttrKGroup = 4, kAttrNormType = 5, kAttrOutFlag = 6, kAttrRenorm = 7, kAttrRoutedScalingFactor = 8, kNumAttrs = 9 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInInputIdsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInTid2eidTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInAdditionalBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInAdditionalTokenMaskTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL};
inline constexpr ParamSpec kInputs[] = {
    {"x", "T", false, kInXTypes, std::size(kInXTypes)},
    {"bias", "T", true, kInBiasTypes, std::size(kInBiasTypes)},
    {"input_ids", "TI", true, kInInputIdsTypes, std::size(kInInputIdsTypes)},
    {"tid2eid", "TE", true, kInTid2eidTypes, std::size(kInTid2eidTypes)},
    {"additional_bias", "T", true, kInAdditionalBiasTypes, std::size(kInAdditionalBiasTypes)},
    {"additional_token_mask", "", true, kInAdditionalTokenMaskTypes, std::size(kInAdditionalTokenMaskTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kOutExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kOutOutTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "T", false, kOutYTypes, std::size(kOutYTypes)},
    {"expert_idx", "", false, kOutExpertIdxTypes, std::size(kOutExpertIdxTypes)},
    {"out", "", true, kOutOutTypes, std::size(kOutOutTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"eps", AttrSpec::kFloat, false, double{9.999999682655225e-21f}},
    {"group_count", AttrSpec::kInt, false, 1},
    {"group_select_mode", AttrSpec::kInt, false, 0},
    {"k", AttrSpec::kInt, true, 0},
    {"k_group", AttrSpec::kInt, false, 1},
    {"norm_type", AttrSpec::kInt, false, 0},
    {"out_flag", AttrSpec::kInt, false, 0},
    {"renorm", AttrSpec::kInt, false, 0},
    {"routed_scaling_factor", AttrSpec::kFloat, false, double{1.0f}},
};

}  // namespace moe_gating_top_k_hash

// ---- MoeReRouting
namespace moe_re_routing {

inline constexpr const char* kName = "MoeReRouting";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInTokens = 0, kInExpertTokenNumPerRank = 1, kInPerTokenScales = 2, kNumIns = 3 };
enum Out : size_t { kOutPermuteTokens = 0, kOutPermutePerTokenScales = 1, kOutPermuteTokenIdx = 2, kOutExpertTokenNum = 3, kNumOuts = 4 };
enum Attr : size_t { kAttrExpertTokenNumType = 0, kAttrIdxType = 1, kNumAttrs = 2 };

inline constexpr ONNXTensorElementDataType kInTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2};
inline constexpr ONNXTensorElementDataType kInExpertTokenNumPerRankTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInPerTokenScalesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kInputs[] = {
    {"tokens", "TT", false, kInTokensTypes, std::size(kInTokensTypes)},
    {"expert_token_num_per_rank", "TC", false, kInExpertTokenNumPerRankTypes, std::size(kInExpertTokenNumPerRankTypes)},
    {"per_token_scales", "TS", true, kInPerTokenScalesTypes, std::size(kInPerTokenScalesTypes)},
};
inline constexpr ONNXTensorElementDataType kOutPermuteTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2};
inline constexpr ONNXTensorElementDataType kOutPermutePerTokenScalesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kOutPermuteTokenIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kOutExpertTokenNumTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ParamSpec kOutputs[] = {
    {"permute_tokens", "TT", false, kOutPermuteTokensTypes, std::size(kOutPermuteTokensTypes)},
    {"permute_per_token_scales", "TS", false, kOutPermutePerTokenScalesTypes, std::size(kOutPermutePerTokenScalesTypes)},
    {"permute_token_idx", "", false, kOutPermuteTokenIdxTypes, std::size(kOutPermuteTokenIdxTypes)},
    {"expert_token_num", "TC", false, kOutExpertTokenNumTypes, std::size(kOutExpertTokenNumTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"expert_token_num_type", AttrSpec::kInt, false, 1},
    {"idx_type", AttrSpec::kInt, false, 0},
};

}  // namespace moe_re_routing

// ---- MoeRoutedExperts
namespace moe_routed_experts {

inline constexpr const char* kName = "MoeRoutedExperts";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInExpertIdx = 1, kInRoutingWeights = 2, kInGateUpWeights = 3, kInDownWeights = 4, kNumIns = 5 };
enum Out : size_t { kOutY = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrSwigluLimit = 0, kNumAttrs = 1 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInRoutingWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInGateUpWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInDownWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kInputs[] = {
    {"x", "", false, kInXTypes, std::size(kInXTypes)},
    {"expert_idx", "TI", false, kInExpertIdxTypes, std::size(kInExpertIdxTypes)},
    {"routing_weights", "", false, kInRoutingWeightsTypes, std::size(kInRoutingWeightsTypes)},
    {"gate_up_weights", "", false, kInGateUpWeightsTypes, std::size(kInGateUpWeightsTypes)},
    {"down_weights", "", false, kInDownWeightsTypes, std::size(kInDownWeightsTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "", false, kOutYTypes, std::size(kOutYTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"swiglu_limit", AttrSpec::kFloat, false, double{0.0f}},
};

}  // namespace moe_routed_experts

// ---- MoeFinalizeRoutingV2
namespace moe_finalize_routing_v2 {

inline constexpr const char* kName = "MoeFinalizeRoutingV2";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInExpandedX = 0, kInExpandedRowIdx = 1, kInX1 = 2, kInX2 = 3, kInBias = 4, kInScales = 5, kInExpertIdx = 6, kNumIns = 7 };
enum Out : size_t { kOutY = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrDropPadMode = 0, kNumAttrs = 1 };

inline constexpr ONNXTensorElementDataType kInExpandedXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInExpandedRowIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInX1Types[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInX2Types[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInScalesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ParamSpec kInputs[] = {
    {"expanded_x", "T", false, kInExpandedXTypes, std::size(kInExpandedXTypes)},
    {"expanded_row_idx", "TI", false, kInExpandedRowIdxTypes, std::size(kInExpandedRowIdxTypes)},
    {"x1", "T", true, kInX1Types, std::size(kInX1Types)},
    {"x2", "T", true, kInX2Types, std::size(kInX2Types)},
    {"bias", "T", true, kInBiasTypes, std::size(kInBiasTypes)},
    {"scales", "TS", true, kInScalesTypes, std::size(kInScalesTypes)},
    {"expert_idx", "TI2", true, kInExpertIdxTypes, std::size(kInExpertIdxTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "T", false, kOutYTypes, std::size(kOutYTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"drop_pad_mode", AttrSpec::kInt, false, 0},
};

}  // namespace moe_finalize_routing_v2

// ---- MoeTokenUnpermute
namespace moe_token_unpermute {

inline constexpr const char* kName = "MoeTokenUnpermute";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInPermutedTokens = 0, kInSortedIndices = 1, kInProbs = 2, kNumIns = 3 };
enum Out : size_t { kOutUnpermutedTokens = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrPaddedMode = 0, kNumAttrs = 1 };

inline constexpr ONNXTensorElementDataType kInPermutedTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInSortedIndicesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInProbsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kInputs[] = {
    {"permuted_tokens", "T", false, kInPermutedTokensTypes, std::size(kInPermutedTokensTypes)},
    {"sorted_indices", "TI", false, kInSortedIndicesTypes, std::size(kInSortedIndicesTypes)},
    {"probs", "TS", true, kInProbsTypes, std::size(kInProbsTypes)},
};
inline constexpr ONNXTensorElementDataType kOutUnpermutedTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kOutputs[] = {
    {"unpermuted_tokens", "T", false, kOutUnpermutedTokensTypes, std::size(kOutUnpermutedTokensTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"padded_mode", AttrSpec::kInt, false, 0},
};

}  // namespace moe_token_unpermute

}  // namespace ascend_moe::defs
