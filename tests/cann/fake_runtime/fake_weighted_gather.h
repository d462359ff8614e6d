// What the fakes of the weighted-gather operators (aclnnMoeFinalizeRoutingV2,
// aclnnMoeTokenUnpermute) share: the project's CPU kernel (ops_src/cpu/weighted_gather.h) on the
// operator's arguments.
#pragma once

#include "fake_cann.h"
#include "ops_src/cpu/weighted_gather.h"

namespace fake_cann {

// The kernel's row type of a float dtype (float, float16, else bfloat16).
inline ascend_moe::cpu::RowType WeightedGatherRowType(int dtype) {
  using ascend_moe::cpu::RowType;
  return dtype == kFloat ? RowType::kFloat32 : dtype == kFloat16 ? RowType::kFloat16 : RowType::kBFloat16;
}

// The kernel's parameters for n output rows of h columns in `dtype`, k slots each, gathered from
// `rows` rows by int32 indices (the rest as each operator sets them).
inline ascend_moe::cpu::WeightedGatherParams WeightedGatherParamsOf(int64_t n, int64_t k, int64_t h,
                                                                    int64_t rows, int dtype) {
  ascend_moe::cpu::WeightedGatherParams p;
  p.num_out_rows = n, p.k = k, p.hidden = h, p.num_rows = rows;
  p.row_type = WeightedGatherRowType(dtype);
  p.index_type = ascend_moe::cpu::IndexType::kInt32;
  return p;
}

}  // namespace fake_cann
