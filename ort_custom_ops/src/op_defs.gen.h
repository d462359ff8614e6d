// Op definitions generated from the ONNX schemas (onnx_schemas): per op its names, input/output
// order, optional flags, allowed element types, attribute kinds and defaults, the Attrs struct
// and ReadAttrs, the Def that AscendMoeOp takes; and AllOps().
// Do not edit: regenerate with `python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs`;
// tests/test_op_table.py::test_generated_headers_are_current fails when this file and the schemas differ.
#pragma once

#include <array>
#include <cstdint>
#include <iterator>
#include <string>
#include <vector>

#include "op_utils.h"

namespace ascend_moe {
namespace defs {

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

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  float eps = 9.999999682655225e-21f;
  int64_t group_count = 1;
  int64_t group_select_mode = 0;
  int64_t k = 0;  // required
  int64_t k_group = 1;
  int64_t norm_type = 0;
  int64_t out_flag = 0;
  int64_t renorm = 0;
  float routed_scaling_factor = 1.0f;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_gating_top_k_hash/moe_gating_top_k_hash_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.eps = ReadFloatAttr(info, kName, kAttrs[kAttrEps]);
  a.group_count = ReadIntAttr(info, kName, kAttrs[kAttrGroupCount]);
  a.group_select_mode = ReadIntAttr(info, kName, kAttrs[kAttrGroupSelectMode]);
  a.k = ReadIntAttr(info, kName, kAttrs[kAttrK]);
  a.k_group = ReadIntAttr(info, kName, kAttrs[kAttrKGroup]);
  a.norm_type = ReadIntAttr(info, kName, kAttrs[kAttrNormType]);
  a.out_flag = ReadIntAttr(info, kName, kAttrs[kAttrOutFlag]);
  a.renorm = ReadIntAttr(info, kName, kAttrs[kAttrRenorm]);
  a.routed_scaling_factor = ReadFloatAttr(info, kName, kAttrs[kAttrRoutedScalingFactor]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.group_count = InferAttrInt(api, ctx, kAttrs[kAttrGroupCount]);
  a.group_select_mode = InferAttrInt(api, ctx, kAttrs[kAttrGroupSelectMode]);
  a.k = InferAttrInt(api, ctx, kAttrs[kAttrK]);
  a.k_group = InferAttrInt(api, ctx, kAttrs[kAttrKGroup]);
  a.norm_type = InferAttrInt(api, ctx, kAttrs[kAttrNormType]);
  a.out_flag = InferAttrInt(api, ctx, kAttrs[kAttrOutFlag]);
  a.renorm = InferAttrInt(api, ctx, kAttrs[kAttrRenorm]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_gating_top_k_hash/moe_gating_top_k_hash_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_gating_top_k_hash::kName;
  static constexpr int kSinceVersion = moe_gating_top_k_hash::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_gating_top_k_hash::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_gating_top_k_hash::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_gating_top_k_hash::kAttrs;
  static constexpr size_t kNumAttrs = moe_gating_top_k_hash::kNumAttrs;
  static constexpr auto InferShapes = &moe_gating_top_k_hash::InferShapes;
  using Attrs = moe_gating_top_k_hash::Attrs;
  using Inputs = moe_gating_top_k_hash::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_gating_top_k_hash::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_gating_top_k_hash::kInputs); }
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

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t expert_token_num_type = 1;
  int64_t idx_type = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_re_routing/moe_re_routing_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.expert_token_num_type = ReadIntAttr(info, kName, kAttrs[kAttrExpertTokenNumType]);
  a.idx_type = ReadIntAttr(info, kName, kAttrs[kAttrIdxType]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.expert_token_num_type = InferAttrInt(api, ctx, kAttrs[kAttrExpertTokenNumType]);
  a.idx_type = InferAttrInt(api, ctx, kAttrs[kAttrIdxType]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_re_routing/moe_re_routing_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_re_routing::kName;
  static constexpr int kSinceVersion = moe_re_routing::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_re_routing::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_re_routing::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_re_routing::kAttrs;
  static constexpr size_t kNumAttrs = moe_re_routing::kNumAttrs;
  static constexpr auto InferShapes = &moe_re_routing::InferShapes;
  using Attrs = moe_re_routing::Attrs;
  using Inputs = moe_re_routing::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_re_routing::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_re_routing::kInputs); }
};

}  // namespace moe_re_routing

// ---- MoeRoutedExperts
namespace moe_routed_experts {

inline constexpr const char* kName = "MoeRoutedExperts";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInExpertIdx = 1, kInRoutingWeights = 2, kInGateUpWeights = 3, kInDownWeights = 4, kInGateUpScales = 5, kInDownScales = 6, kInGateUpBias = 7, kInDownBias = 8, kNumIns = 9 };
enum Out : size_t { kOutY = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrActQuant = 0, kAttrActivationAlpha = 1, kAttrActivationBeta = 2, kAttrBlockSize = 3, kAttrSwigluLimit = 4, kAttrWeightBits = 5, kNumAttrs = 6 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInRoutingWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInGateUpWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInDownWeightsTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInGateUpScalesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInDownScalesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInGateUpBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInDownBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kInputs[] = {
    {"x", "", false, kInXTypes, std::size(kInXTypes)},
    {"expert_idx", "TI", false, kInExpertIdxTypes, std::size(kInExpertIdxTypes)},
    {"routing_weights", "", false, kInRoutingWeightsTypes, std::size(kInRoutingWeightsTypes)},
    {"gate_up_weights", "TW", false, kInGateUpWeightsTypes, std::size(kInGateUpWeightsTypes)},
    {"down_weights", "TW", false, kInDownWeightsTypes, std::size(kInDownWeightsTypes)},
    {"gate_up_scales", "", true, kInGateUpScalesTypes, std::size(kInGateUpScalesTypes)},
    {"down_scales", "", true, kInDownScalesTypes, std::size(kInDownScalesTypes)},
    {"gate_up_bias", "", true, kInGateUpBiasTypes, std::size(kInGateUpBiasTypes)},
    {"down_bias", "", true, kInDownBiasTypes, std::size(kInDownBiasTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "", false, kOutYTypes, std::size(kOutYTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"act_quant", AttrSpec::kInt, false, 0},
    {"activation_alpha", AttrSpec::kFloat, false, double{1.0f}},
    {"activation_beta", AttrSpec::kFloat, false, double{0.0f}},
    {"block_size", AttrSpec::kInt, false, 0},
    {"swiglu_limit", AttrSpec::kFloat, false, double{0.0f}},
    {"weight_bits", AttrSpec::kInt, false, 8},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t act_quant = 0;
  float activation_alpha = 1.0f;
  float activation_beta = 0.0f;
  int64_t block_size = 0;
  float swiglu_limit = 0.0f;
  int64_t weight_bits = 8;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_routed_experts/moe_routed_experts_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.act_quant = ReadIntAttr(info, kName, kAttrs[kAttrActQuant]);
  a.activation_alpha = ReadFloatAttr(info, kName, kAttrs[kAttrActivationAlpha]);
  a.activation_beta = ReadFloatAttr(info, kName, kAttrs[kAttrActivationBeta]);
  a.block_size = ReadIntAttr(info, kName, kAttrs[kAttrBlockSize]);
  a.swiglu_limit = ReadFloatAttr(info, kName, kAttrs[kAttrSwigluLimit]);
  a.weight_bits = ReadIntAttr(info, kName, kAttrs[kAttrWeightBits]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.act_quant = InferAttrInt(api, ctx, kAttrs[kAttrActQuant]);
  a.block_size = InferAttrInt(api, ctx, kAttrs[kAttrBlockSize]);
  a.weight_bits = InferAttrInt(api, ctx, kAttrs[kAttrWeightBits]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_routed_experts/moe_routed_experts_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_routed_experts::kName;
  static constexpr int kSinceVersion = moe_routed_experts::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_routed_experts::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_routed_experts::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_routed_experts::kAttrs;
  static constexpr size_t kNumAttrs = moe_routed_experts::kNumAttrs;
  static constexpr auto InferShapes = &moe_routed_experts::InferShapes;
  using Attrs = moe_routed_experts::Attrs;
  using Inputs = moe_routed_experts::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_routed_experts::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_routed_experts::kInputs); }
};

}  // namespace moe_routed_experts

// ---- GroupedMatmul
namespace grouped_matmul {

inline constexpr const char* kName = "GroupedMatmul";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInWeight = 1, kInGroupList = 2, kInBias = 3, kInScale = 4, kInOffset = 5, kInAntiquantScale = 6, kInAntiquantOffset = 7, kInPerTokenScale = 8, kNumIns = 9 };
enum Out : size_t { kOutY = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrGroupListType = 0, kAttrOutputDtype = 1, kAttrTransposeWeight = 2, kNumAttrs = 3 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8};
inline constexpr ONNXTensorElementDataType kInWeightTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kInGroupListTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kInBiasTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kInScaleTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInOffsetTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInAntiquantScaleTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInAntiquantOffsetTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInPerTokenScaleTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kInputs[] = {
    {"x", "T1", false, kInXTypes, std::size(kInXTypes)},
    {"weight", "TW", false, kInWeightTypes, std::size(kInWeightTypes)},
    {"group_list", "TI", false, kInGroupListTypes, std::size(kInGroupListTypes)},
    {"bias", "TB", true, kInBiasTypes, std::size(kInBiasTypes)},
    {"scale", "TS", true, kInScaleTypes, std::size(kInScaleTypes)},
    {"offset", "TO", true, kInOffsetTypes, std::size(kInOffsetTypes)},
    {"antiquant_scale", "TA", true, kInAntiquantScaleTypes, std::size(kInAntiquantScaleTypes)},
    {"antiquant_offset", "TAO", true, kInAntiquantOffsetTypes, std::size(kInAntiquantOffsetTypes)},
    {"per_token_scale", "TP", true, kInPerTokenScaleTypes, std::size(kInPerTokenScaleTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "TY", false, kOutYTypes, std::size(kOutYTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"group_list_type", AttrSpec::kInt, false, 0},
    {"output_dtype", AttrSpec::kInt, false, 0},
    {"transpose_weight", AttrSpec::kInt, false, 0},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t group_list_type = 0;
  int64_t output_dtype = 0;
  int64_t transpose_weight = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in grouped_matmul/grouped_matmul_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.group_list_type = ReadIntAttr(info, kName, kAttrs[kAttrGroupListType]);
  a.output_dtype = ReadIntAttr(info, kName, kAttrs[kAttrOutputDtype]);
  a.transpose_weight = ReadIntAttr(info, kName, kAttrs[kAttrTransposeWeight]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.group_list_type = InferAttrInt(api, ctx, kAttrs[kAttrGroupListType]);
  a.output_dtype = InferAttrInt(api, ctx, kAttrs[kAttrOutputDtype]);
  a.transpose_weight = InferAttrInt(api, ctx, kAttrs[kAttrTransposeWeight]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in grouped_matmul/grouped_matmul_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = grouped_matmul::kName;
  static constexpr int kSinceVersion = grouped_matmul::kSinceVersion;
  static constexpr const ParamSpec* kInputs = grouped_matmul::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = grouped_matmul::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = grouped_matmul::kAttrs;
  static constexpr size_t kNumAttrs = grouped_matmul::kNumAttrs;
  static constexpr auto InferShapes = &grouped_matmul::InferShapes;
  using Attrs = grouped_matmul::Attrs;
  using Inputs = grouped_matmul::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return grouped_matmul::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, grouped_matmul::kInputs); }
};

}  // namespace grouped_matmul

// ---- MoeInitRoutingV3
namespace moe_init_routing_v3 {

inline constexpr const char* kName = "MoeInitRoutingV3";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInExpertIdx = 1, kInScale = 2, kInOffset = 3, kNumIns = 4 };
enum Out : size_t { kOutExpandedX = 0, kOutExpandedRowIdx = 1, kOutExpertTokensCountOrCumsum = 2, kOutExpandedScale = 3, kNumOuts = 4 };
enum Attr : size_t { kAttrActiveExpertEnd = 0, kAttrActiveExpertStart = 1, kAttrActiveNum = 2, kAttrDropPadMode = 3, kAttrExpertCapacity = 4, kAttrExpertNum = 5, kAttrExpertTokensNumFlag = 6, kAttrExpertTokensNumType = 7, kAttrQuantMode = 8, kAttrRowIdxType = 9, kNumAttrs = 10 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8};
inline constexpr ONNXTensorElementDataType kInExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kInScaleTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ONNXTensorElementDataType kInOffsetTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kInputs[] = {
    {"x", "TX", false, kInXTypes, std::size(kInXTypes)},
    {"expert_idx", "TI", false, kInExpertIdxTypes, std::size(kInExpertIdxTypes)},
    {"scale", "", true, kInScaleTypes, std::size(kInScaleTypes)},
    {"offset", "", true, kInOffsetTypes, std::size(kInOffsetTypes)},
};
inline constexpr ONNXTensorElementDataType kOutExpandedXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8};
inline constexpr ONNXTensorElementDataType kOutExpandedRowIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kOutExpertTokensCountOrCumsumTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ONNXTensorElementDataType kOutExpandedScaleTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT};
inline constexpr ParamSpec kOutputs[] = {
    {"expanded_x", "TY", false, kOutExpandedXTypes, std::size(kOutExpandedXTypes)},
    {"expanded_row_idx", "", false, kOutExpandedRowIdxTypes, std::size(kOutExpandedRowIdxTypes)},
    {"expert_tokens_count_or_cumsum", "", false, kOutExpertTokensCountOrCumsumTypes, std::size(kOutExpertTokensCountOrCumsumTypes)},
    {"expanded_scale", "", false, kOutExpandedScaleTypes, std::size(kOutExpandedScaleTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"active_expert_end", AttrSpec::kInt, false, -1},
    {"active_expert_start", AttrSpec::kInt, false, 0},
    {"active_num", AttrSpec::kInt, false, -1},
    {"drop_pad_mode", AttrSpec::kInt, false, 0},
    {"expert_capacity", AttrSpec::kInt, false, -1},
    {"expert_num", AttrSpec::kInt, false, -1},
    {"expert_tokens_num_flag", AttrSpec::kInt, false, 0},
    {"expert_tokens_num_type", AttrSpec::kInt, false, 0},
    {"quant_mode", AttrSpec::kInt, false, -1},
    {"row_idx_type", AttrSpec::kInt, false, 0},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t active_expert_end = -1;
  int64_t active_expert_start = 0;
  int64_t active_num = -1;
  int64_t drop_pad_mode = 0;
  int64_t expert_capacity = -1;
  int64_t expert_num = -1;
  int64_t expert_tokens_num_flag = 0;
  int64_t expert_tokens_num_type = 0;
  int64_t quant_mode = -1;
  int64_t row_idx_type = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_init_routing_v3/moe_init_routing_v3_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.active_expert_end = ReadIntAttr(info, kName, kAttrs[kAttrActiveExpertEnd]);
  a.active_expert_start = ReadIntAttr(info, kName, kAttrs[kAttrActiveExpertStart]);
  a.active_num = ReadIntAttr(info, kName, kAttrs[kAttrActiveNum]);
  a.drop_pad_mode = ReadIntAttr(info, kName, kAttrs[kAttrDropPadMode]);
  a.expert_capacity = ReadIntAttr(info, kName, kAttrs[kAttrExpertCapacity]);
  a.expert_num = ReadIntAttr(info, kName, kAttrs[kAttrExpertNum]);
  a.expert_tokens_num_flag = ReadIntAttr(info, kName, kAttrs[kAttrExpertTokensNumFlag]);
  a.expert_tokens_num_type = ReadIntAttr(info, kName, kAttrs[kAttrExpertTokensNumType]);
  a.quant_mode = ReadIntAttr(info, kName, kAttrs[kAttrQuantMode]);
  a.row_idx_type = ReadIntAttr(info, kName, kAttrs[kAttrRowIdxType]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.active_expert_end = InferAttrInt(api, ctx, kAttrs[kAttrActiveExpertEnd]);
  a.active_expert_start = InferAttrInt(api, ctx, kAttrs[kAttrActiveExpertStart]);
  a.active_num = InferAttrInt(api, ctx, kAttrs[kAttrActiveNum]);
  a.drop_pad_mode = InferAttrInt(api, ctx, kAttrs[kAttrDropPadMode]);
  a.expert_capacity = InferAttrInt(api, ctx, kAttrs[kAttrExpertCapacity]);
  a.expert_num = InferAttrInt(api, ctx, kAttrs[kAttrExpertNum]);
  a.expert_tokens_num_flag = InferAttrInt(api, ctx, kAttrs[kAttrExpertTokensNumFlag]);
  a.expert_tokens_num_type = InferAttrInt(api, ctx, kAttrs[kAttrExpertTokensNumType]);
  a.quant_mode = InferAttrInt(api, ctx, kAttrs[kAttrQuantMode]);
  a.row_idx_type = InferAttrInt(api, ctx, kAttrs[kAttrRowIdxType]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_init_routing_v3/moe_init_routing_v3_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_init_routing_v3::kName;
  static constexpr int kSinceVersion = moe_init_routing_v3::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_init_routing_v3::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_init_routing_v3::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_init_routing_v3::kAttrs;
  static constexpr size_t kNumAttrs = moe_init_routing_v3::kNumAttrs;
  static constexpr auto InferShapes = &moe_init_routing_v3::InferShapes;
  using Attrs = moe_init_routing_v3::Attrs;
  using Inputs = moe_init_routing_v3::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_init_routing_v3::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_init_routing_v3::kInputs); }
};

}  // namespace moe_init_routing_v3

// ---- MoeInitRouting
namespace moe_init_routing {

inline constexpr const char* kName = "MoeInitRouting";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kInRowIdx = 1, kInExpertIdx = 2, kNumIns = 3 };
enum Out : size_t { kOutExpandedX = 0, kOutExpandedRowIdx = 1, kOutExpandedExpertIdx = 2, kNumOuts = 3 };
enum Attr : size_t { kAttrActiveNum = 0, kNumAttrs = 1 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kInRowIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kInExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ParamSpec kInputs[] = {
    {"x", "T", false, kInXTypes, std::size(kInXTypes)},
    {"row_idx", "", false, kInRowIdxTypes, std::size(kInRowIdxTypes)},
    {"expert_idx", "", false, kInExpertIdxTypes, std::size(kInExpertIdxTypes)},
};
inline constexpr ONNXTensorElementDataType kOutExpandedXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ONNXTensorElementDataType kOutExpandedRowIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ONNXTensorElementDataType kOutExpandedExpertIdxTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ParamSpec kOutputs[] = {
    {"expanded_x", "T", false, kOutExpandedXTypes, std::size(kOutExpandedXTypes)},
    {"expanded_row_idx", "", false, kOutExpandedRowIdxTypes, std::size(kOutExpandedRowIdxTypes)},
    {"expanded_expert_idx", "", false, kOutExpandedExpertIdxTypes, std::size(kOutExpandedExpertIdxTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"active_num", AttrSpec::kInt, true, 0},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t active_num = 0;  // required
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_init_routing/moe_init_routing_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.active_num = ReadIntAttr(info, kName, kAttrs[kAttrActiveNum]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.active_num = InferAttrInt(api, ctx, kAttrs[kAttrActiveNum]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_init_routing/moe_init_routing_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_init_routing::kName;
  static constexpr int kSinceVersion = moe_init_routing::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_init_routing::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_init_routing::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_init_routing::kAttrs;
  static constexpr size_t kNumAttrs = moe_init_routing::kNumAttrs;
  static constexpr auto InferShapes = &moe_init_routing::InferShapes;
  using Attrs = moe_init_routing::Attrs;
  using Inputs = moe_init_routing::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_init_routing::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_init_routing::kInputs); }
};

}  // namespace moe_init_routing

// ---- MoeTokenPermute
namespace moe_token_permute {

inline constexpr const char* kName = "MoeTokenPermute";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInTokens = 0, kInIndices = 1, kNumIns = 2 };
enum Out : size_t { kOutPermutedTokens = 0, kOutSortedIndices = 1, kNumOuts = 2 };
enum Attr : size_t { kAttrNumOutTokens = 0, kAttrPaddedMode = 1, kNumAttrs = 2 };

inline constexpr ONNXTensorElementDataType kInTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8};
inline constexpr ONNXTensorElementDataType kInIndicesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64};
inline constexpr ParamSpec kInputs[] = {
    {"tokens", "T", false, kInTokensTypes, std::size(kInTokensTypes)},
    {"indices", "TI", false, kInIndicesTypes, std::size(kInIndicesTypes)},
};
inline constexpr ONNXTensorElementDataType kOutPermutedTokensTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8};
inline constexpr ONNXTensorElementDataType kOutSortedIndicesTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32};
inline constexpr ParamSpec kOutputs[] = {
    {"permuted_tokens", "T", false, kOutPermutedTokensTypes, std::size(kOutPermutedTokensTypes)},
    {"sorted_indices", "", false, kOutSortedIndicesTypes, std::size(kOutSortedIndicesTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"num_out_tokens", AttrSpec::kInt, false, 0},
    {"padded_mode", AttrSpec::kInt, false, 0},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t num_out_tokens = 0;
  int64_t padded_mode = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_token_permute/moe_token_permute_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.num_out_tokens = ReadIntAttr(info, kName, kAttrs[kAttrNumOutTokens]);
  a.padded_mode = ReadIntAttr(info, kName, kAttrs[kAttrPaddedMode]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.num_out_tokens = InferAttrInt(api, ctx, kAttrs[kAttrNumOutTokens]);
  a.padded_mode = InferAttrInt(api, ctx, kAttrs[kAttrPaddedMode]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_token_permute/moe_token_permute_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_token_permute::kName;
  static constexpr int kSinceVersion = moe_token_permute::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_token_permute::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_token_permute::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_token_permute::kAttrs;
  static constexpr size_t kNumAttrs = moe_token_permute::kNumAttrs;
  static constexpr auto InferShapes = &moe_token_permute::InferShapes;
  using Attrs = moe_token_permute::Attrs;
  using Inputs = moe_token_permute::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_token_permute::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_token_permute::kInputs); }
};

}  // namespace moe_token_permute

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

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t drop_pad_mode = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_finalize_routing_v2/moe_finalize_routing_v2_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.drop_pad_mode = ReadIntAttr(info, kName, kAttrs[kAttrDropPadMode]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.drop_pad_mode = InferAttrInt(api, ctx, kAttrs[kAttrDropPadMode]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_finalize_routing_v2/moe_finalize_routing_v2_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_finalize_routing_v2::kName;
  static constexpr int kSinceVersion = moe_finalize_routing_v2::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_finalize_routing_v2::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_finalize_routing_v2::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_finalize_routing_v2::kAttrs;
  static constexpr size_t kNumAttrs = moe_finalize_routing_v2::kNumAttrs;
  static constexpr auto InferShapes = &moe_finalize_routing_v2::InferShapes;
  using Attrs = moe_finalize_routing_v2::Attrs;
  using Inputs = moe_finalize_routing_v2::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_finalize_routing_v2::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_finalize_routing_v2::kInputs); }
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

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t padded_mode = 0;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in moe_token_unpermute/moe_token_unpermute_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.padded_mode = ReadIntAttr(info, kName, kAttrs[kAttrPaddedMode]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.padded_mode = InferAttrInt(api, ctx, kAttrs[kAttrPaddedMode]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in moe_token_unpermute/moe_token_unpermute_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = moe_token_unpermute::kName;
  static constexpr int kSinceVersion = moe_token_unpermute::kSinceVersion;
  static constexpr const ParamSpec* kInputs = moe_token_unpermute::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = moe_token_unpermute::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = moe_token_unpermute::kAttrs;
  static constexpr size_t kNumAttrs = moe_token_unpermute::kNumAttrs;
  static constexpr auto InferShapes = &moe_token_unpermute::InferShapes;
  using Attrs = moe_token_unpermute::Attrs;
  using Inputs = moe_token_unpermute::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return moe_token_unpermute::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, moe_token_unpermute::kInputs); }
};

}  // namespace moe_token_unpermute

// ---- SwiGlu
namespace swi_glu {

inline constexpr const char* kName = "SwiGlu";
inline constexpr int kSinceVersion = 1;

enum In : size_t { kInX = 0, kNumIns = 1 };
enum Out : size_t { kOutY = 0, kNumOuts = 1 };
enum Attr : size_t { kAttrDim = 0, kNumAttrs = 1 };

inline constexpr ONNXTensorElementDataType kInXTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kInputs[] = {
    {"x", "T", false, kInXTypes, std::size(kInXTypes)},
};
inline constexpr ONNXTensorElementDataType kOutYTypes[] = {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16};
inline constexpr ParamSpec kOutputs[] = {
    {"y", "T", false, kOutYTypes, std::size(kOutYTypes)},
};
inline constexpr AttrSpec kAttrs[] = {
    {"dim", AttrSpec::kInt, false, -1},
};

// One node's attribute values; each field starts at the schema's default (required: 0).
struct Attrs {
  int64_t dim = -1;
};

// The value rules of the attributes that do not depend on the inputs: the message for the
// first one broken, empty when all hold. Defined in swi_glu/swi_glu_op.cc or its
// validator.
std::string CheckAttrs(const Attrs& attrs);

// Reads every attribute through kAttrs (absent optional ones keep their default; another
// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.
inline Attrs ReadAttrs(const OrtKernelInfo* info) {
  Attrs a;
  a.dim = ReadIntAttr(info, kName, kAttrs[kAttrDim]);
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

// The attributes as shape inference reads them (INT ones through kAttrs, their default when
// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.
inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {
  Attrs a;
  a.dim = InferAttrInt(api, ctx, kAttrs[kAttrDim]);
  *error = CheckAttrs(a);
  return a;
}

// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in swi_glu/swi_glu_op.cc.
OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);

// Every input of a call, in table order (InputView: present, type, shape, data).
using Inputs = std::array<InputView, kNumIns>;

// The op definition, independent of the execution provider (see op_base.h).
struct Def {
  static constexpr const char* kName = swi_glu::kName;
  static constexpr int kSinceVersion = swi_glu::kSinceVersion;
  static constexpr const ParamSpec* kInputs = swi_glu::kInputs;
  static constexpr size_t kNumInputs = kNumIns;
  static constexpr const ParamSpec* kOutputs = swi_glu::kOutputs;
  static constexpr size_t kNumOutputs = kNumOuts;
  static constexpr const AttrSpec* kAttrs = swi_glu::kAttrs;
  static constexpr size_t kNumAttrs = swi_glu::kNumAttrs;
  static constexpr auto InferShapes = &swi_glu::InferShapes;
  using Attrs = swi_glu::Attrs;
  using Inputs = swi_glu::Inputs;
  static Attrs ReadAttrs(const OrtKernelInfo* info) { return swi_glu::ReadAttrs(info); }
  // every input of a call, checked against kInputs (GetInputViews)
  static Inputs GetInputs(Ort::KernelContext& ctx) { return GetInputViews(ctx, kName, swi_glu::kInputs); }
};

}  // namespace swi_glu

}  // namespace defs

// Each op's kernels, one static OrtCustomOp per execution provider, all under the op's name;
// defined in <op>/<op>_op.cc. Constructing them registers the op's manifest entry (no ORT call).
std::vector<const OrtCustomOp*> MoeGatingTopKHashOps();
std::vector<const OrtCustomOp*> MoeReRoutingOps();
std::vector<const OrtCustomOp*> MoeRoutedExpertsOps();
std::vector<const OrtCustomOp*> GroupedMatmulOps();
std::vector<const OrtCustomOp*> MoeInitRoutingV3Ops();
std::vector<const OrtCustomOp*> MoeInitRoutingOps();
std::vector<const OrtCustomOp*> MoeTokenPermuteOps();
std::vector<const OrtCustomOp*> MoeFinalizeRoutingV2Ops();
std::vector<const OrtCustomOp*> MoeTokenUnpermuteOps();
std::vector<const OrtCustomOp*> SwiGluOps();

// Every op of the library, in the order of onnx_schemas.OP_MODULES.
inline std::vector<const OrtCustomOp*> AllOps() {
  std::vector<const OrtCustomOp*> ops;
  for (const OrtCustomOp* op : MoeGatingTopKHashOps()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeReRoutingOps()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeRoutedExpertsOps()) ops.push_back(op);
  for (const OrtCustomOp* op : GroupedMatmulOps()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeInitRoutingV3Ops()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeInitRoutingOps()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeTokenPermuteOps()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeFinalizeRoutingV2Ops()) ops.push_back(op);
  for (const OrtCustomOp* op : MoeTokenUnpermuteOps()) ops.push_back(op);
  for (const OrtCustomOp* op : SwiGluOps()) ops.push_back(op);
  return ops;
}

}  // namespace ascend_moe
