// MoeGatingTopKHash attribute table and validation (docs/operators.md §1.3), shared by every execution
// provider's kernel: errors name the input or attribute and the offending value.
#pragma once

#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_gating_top_k_hash.h"

namespace ascend_moe {

namespace gating_defs = defs::moe_gating_top_k_hash;
inline constexpr const char* kMoeGatingName = gating_defs::kName;

// Input and output positions (generated from the schema; short names for the kernels).
enum MoeGatingInput : size_t {
  kGtX = gating_defs::kInX,
  kGtBias = gating_defs::kInBias,
  kGtInputIds = gating_defs::kInInputIds,
  kGtTid2eid = gating_defs::kInTid2eid,
  kGtAdditionalBias = gating_defs::kInAdditionalBias,
  kGtMask = gating_defs::kInAdditionalTokenMask,
  kGtNumInputs = gating_defs::kNumIns
};
enum MoeGatingOutput : size_t {
  kGtY = gating_defs::kOutY,
  kGtExpertIdx = gating_defs::kOutExpertIdx,
  kGtOut = gating_defs::kOutOut,
  kGtNumOutputs = gating_defs::kNumOuts
};

// Attribute values as the kernels use them; every field is read through the generated table
// (gating_defs::kAttrs), which holds the defaults.
struct MoeGatingAttrs {
  int64_t k;
  int64_t k_group;
  int64_t group_count;
  int64_t group_select_mode;
  int64_t renorm;
  int64_t norm_type;
  int64_t out_flag;
  float routed_scaling_factor;
  float eps;
};

// Whether group-limited selection applies (docs/operators.md §1.2 step 3).
inline bool MoeGatingGroupingEffective(const MoeGatingAttrs& a) {
  return a.group_count > 1 && a.k_group < a.group_count;
}

// The message for the first attribute rule that does not depend on the inputs and is broken;
// empty when all hold.
std::string CheckMoeGatingAttrs(const MoeGatingAttrs& attrs);

// Reads the attributes through the table (defaults for absent ones) and fails when one has
// another kind, `k` is missing, or a rule of CheckMoeGatingAttrs is broken.
MoeGatingAttrs ReadMoeGatingAttrs(const OrtKernelInfo* info);

// The inputs of one call; absent optional inputs have present == false.
struct MoeGatingInputViews {
  InputView x, bias, input_ids, tid2eid, additional_bias, mask;
};

// What validation decides: sizes and attributes for the kernel, output shapes, element types.
struct MoeGatingProblem {
  cpu::MoeGatingTopKHashParams params;
  std::vector<int64_t> y_shape;    // x.shape[:-1] + [k] (also expert_idx)
  std::vector<int64_t> out_shape;  // x.shape when out_flag = 1, else [0]
  cpu::GatingFloatType x_type = cpu::GatingFloatType::kFloat32;
  cpu::GatingIntType ids_type = cpu::GatingIntType::kInt64;
  cpu::GatingIntType table_type = cpu::GatingIntType::kInt32;
  bool hash = false;        // input_ids and tid2eid given
  bool additional = false;  // additional_bias and the mask given (the mask selects rows)
};

// Checks the input-dependent rules of docs/operators.md §1.3 (ranks, dims, types, combinations; no data is
// read) and returns the kernel's view of the call. Token ids and table entries are checked by
// the kernel while it reads them.
MoeGatingProblem ValidateMoeGatingInputs(const MoeGatingInputViews& inputs,
                                         const MoeGatingAttrs& attrs);

// The outputs of one call, allocated with the shapes validation decided (every EP's kernel).
struct MoeGatingOutputBuffers {
  void* y = nullptr;
  int32_t* expert_idx = nullptr;
  float* out = nullptr;  // null unless out_flag = 1
};
inline MoeGatingOutputBuffers AllocateMoeGatingOutputs(Ort::KernelContext& ctx,
                                                       const MoeGatingProblem& p,
                                                       ONNXTensorElementDataType x_type) {
  using gating_defs::kOutputs;
  MoeGatingOutputBuffers b;
  b.y = GetCheckedOutput(ctx, kMoeGatingName, kOutputs, kGtY, p.y_shape, x_type, true);
  b.expert_idx = static_cast<int32_t*>(GetCheckedOutput(
      ctx, kMoeGatingName, kOutputs, kGtExpertIdx, p.y_shape, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true));
  // `out` is optional: a node may leave it off or name it "" (counted, but not produced).
  void* out = GetCheckedOutput(ctx, kMoeGatingName, kOutputs, kGtOut, p.out_shape,
                               ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, false);
  if (p.params.out_flag) b.out = static_cast<float*>(out);
  return b;
}

}  // namespace ascend_moe
