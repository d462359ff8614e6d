// MoeGatingTopKHash attribute table and validation (docs/operators.md §1.3), shared by every execution
// provider's kernel: errors name the input or attribute and the offending value.
#pragma once

#include <string>

#include "op_utils.h"
#include "ops_src/cpu/moe_gating_top_k_hash.h"

namespace ascend_moe {

inline constexpr const char* kMoeGatingName = "MoeGatingTopKHash";

// Input and output positions (docs/operators.md §1.1).
enum MoeGatingInput : size_t {
  kGtX = 0,
  kGtBias = 1,
  kGtInputIds = 2,
  kGtTid2eid = 3,
  kGtAdditionalBias = 4,
  kGtMask = 5,
  kGtNumInputs = 6
};
enum MoeGatingOutput : size_t { kGtY = 0, kGtExpertIdx = 1, kGtOut = 2, kGtNumOutputs = 3 };

// Attribute table (names, kinds, defaults of docs/operators.md §1.1): the kernels read attributes through it
// and the manifest publishes it.
enum MoeGatingAttrIndex : size_t {
  kGtK = 0,
  kGtKGroup,
  kGtGroupCount,
  kGtGroupSelectMode,
  kGtRenorm,
  kGtNormType,
  kGtOutFlag,
  kGtRoutedScalingFactor,
  kGtEps,
};
inline constexpr AttrSpec kMoeGatingAttrs[] = {
    {"k", AttrSpec::kInt, true, 0},
    {"k_group", AttrSpec::kInt, false, 1},
    {"group_count", AttrSpec::kInt, false, 1},
    {"group_select_mode", AttrSpec::kInt, false, 0},
    {"renorm", AttrSpec::kInt, false, 0},
    {"norm_type", AttrSpec::kInt, false, 0},
    {"out_flag", AttrSpec::kInt, false, 0},
    {"routed_scaling_factor", AttrSpec::kFloat, false, 1.0},
    {"eps", AttrSpec::kFloat, false, 1e-20},
};

struct MoeGatingAttrs {
  int64_t k = 0;
  int64_t k_group = 1;
  int64_t group_count = 1;
  int64_t group_select_mode = 0;
  int64_t renorm = 0;
  int64_t norm_type = 0;
  int64_t out_flag = 0;
  float routed_scaling_factor = 1.0f;
  float eps = 1e-20f;
};

// Whether group-limited selection applies (docs/operators.md §1.2 step 3).
inline bool MoeGatingGroupingEffective(const MoeGatingAttrs& a) {
  return a.group_count > 1 && a.k_group < a.group_count;
}

// The message for the first attribute rule that does not depend on the inputs and is broken;
// empty when all hold.
std::string CheckMoeGatingAttrs(const MoeGatingAttrs& attrs);

// Reads the attributes through the table (defaults for absent ones) and fails when `k` is
// missing or a rule of CheckMoeGatingAttrs is broken.
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

}  // namespace ascend_moe
