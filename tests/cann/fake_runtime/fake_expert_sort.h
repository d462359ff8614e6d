// What the fakes of the expert-sort operators (aclnnMoeInitRouting, aclnnMoeInitRoutingV3,
// aclnnMoeTokenPermute) share: the project's CPU kernel (ops_src/cpu/expert_sort.h) on the
// operator's arguments.
#pragma once

#include "fake_cann.h"
#include "ops_src/cpu/expert_sort.h"

namespace fake_cann {

// The kernel's row type of x's dtype (float, float16, bfloat16, else int8).
inline ascend_moe::cpu::RowType ExpertSortRowType(int dtype) {
  using ascend_moe::cpu::RowType;
  return dtype == kFloat      ? RowType::kFloat
         : dtype == kFloat16  ? RowType::kFloat16
         : dtype == kBFloat16 ? RowType::kBFloat16
                              : RowType::kInt8;
}

// The kernel's parameters for x of n tokens of h columns in `dtype`, k slots per token (the rest
// as each operator sets them).
inline ascend_moe::cpu::MoeInitRoutingParams ExpertSortParams(int64_t n, int64_t k, int64_t h, int dtype) {
  ascend_moe::cpu::MoeInitRoutingParams p;
  p.num_tokens = n, p.top_k = k, p.cols = h;
  p.x_type = ExpertSortRowType(dtype);
  return p;
}

// Every output row of a built plan: the rows of x copied to expanded_x in sorted order.
inline void ExpandAllRows(ascend_moe::cpu::MoeInitRoutingPlan& plan, const void* x, void* expanded_x) {
  ascend_moe::cpu::MoeInitRoutingBuffers b;
  b.x = x;
  b.expanded_x = expanded_x;
  plan.ExpandRows(b, 0, plan.out_rows());
}

}  // namespace fake_cann
