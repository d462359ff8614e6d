// The two fake gating operators (built-in aclnnMoeGatingTopK, custom aclnnMoeGatingTopKHash):
// one argument check with the documented limits, one computation through the CPU kernel.
#pragma once

#include <cstdint>

namespace fake_cann {

struct GatingCall {
  const char* op;
  const void *x, *bias, *input_ids, *tid2eid;
  int64_t k, k_group, group_count, group_select_mode, renorm, norm_type;
  bool out_flag;
  double routed_scaling_factor, eps;
  const void *y, *expert_idx, *out;
};

int PrepareGating(const GatingCall& call, bool hash_op, uint64_t* workspace_size, void** executor);

}  // namespace fake_cann
