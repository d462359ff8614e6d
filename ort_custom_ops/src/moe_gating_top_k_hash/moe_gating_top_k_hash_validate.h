// MoeGatingTopKHash validation (docs/operators.md §1.3) beyond what the generated table checks,
// shared by every execution provider's kernel: errors name the input or attribute and the
// offending value. The attribute rules are gating_defs::CheckAttrs (run by ReadAttrs).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

namespace ascend_moe {

namespace gating_defs = defs::moe_gating_top_k_hash;

// Whether group-limited selection applies (docs/operators.md §1.2 step 3).
inline bool MoeGatingGroupingEffective(const gating_defs::Attrs& a) {
  return a.group_count > 1 && a.k_group < a.group_count;
}

// The inputs of one call in the schema's order (GetInputViews: presence and element types
// checked against the generated table); absent optional inputs have present == false.
using MoeGatingInputViews = std::array<InputView, gating_defs::kNumIns>;

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

// Checks the input-dependent rules of docs/operators.md §1.3 (ranks, dims, combinations; no data
// is read) and returns the kernel's view of the call. Token ids and table entries are checked by
// the kernel while it reads them.
MoeGatingProblem ValidateMoeGatingInputs(const MoeGatingInputViews& inputs, const gating_defs::Attrs& attrs);

// The kernel's inputs (every EP's kernel): the views' data pointers (the CANN kernel's are device
// memory but for input_ids, a host input) and the element types validation decided.
cpu::MoeGatingTopKHashInputs MoeGatingKernelInputs(const MoeGatingInputViews& inputs,
                                                   const MoeGatingProblem& p);

// The outputs of one call, allocated with the shapes validation decided (every EP's kernel);
// `out` is null unless out_flag = 1.
inline cpu::MoeGatingTopKHashOutputs AllocateMoeGatingOutputs(Ort::KernelContext& ctx,
                                                              const MoeGatingProblem& p,
                                                              ONNXTensorElementDataType x_type) {
  cpu::MoeGatingTopKHashOutputs b;
  using namespace gating_defs;
  b.y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, p.y_shape, x_type, true);
  b.expert_idx = static_cast<int32_t*>(GetCheckedOutput(ctx, kName, kOutputs, kOutExpertIdx, p.y_shape,
                                                        ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, true));
  // `out` is optional: a node may leave it off or name it "" (counted, but not produced).
  void* out = GetCheckedOutput(ctx, kName, kOutputs, kOutOut, p.out_shape,
                               ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, false);
  if (p.params.out_flag) b.out = static_cast<float*>(out);
  return b;
}

// The generated definition (docs/operators.md §1.1) and one graph rule: y's shape follows x's
// rank, which the C API cannot leave unknown (see InferShapes).
struct MoeGatingDef : gating_defs::Def {
  static void CheckGraphInputs(const std::vector<GraphTensor>& inputs) {
    if (inputs[gating_defs::kInX].type != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED &&
        inputs[gating_defs::kInX].rank == 0) {
      Fail(Str(gating_defs::kName,
               ": input 'x' must have rank >= 2, got rank 0 or an unknown rank in the graph "
               "(ONNX Runtime needs x's rank to declare y's shape)"));
    }
  }
};

}  // namespace ascend_moe
