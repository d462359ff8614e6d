// Fake libcust_opapi.so (the cann-recipes-infer custom operator package): aclnnMoeGatingTopKHash.
#include "fake_aclnn.h"
#include "fake_gating.h"

using namespace fake_cann;

extern "C" {

int aclnnMoeGatingTopKHashGetWorkspaceSize(const void* x, const void* bias, const void* input_ids,
                                           const void* tid2eid, int64_t k, int64_t k_group,
                                           int64_t group_count, int64_t group_select_mode,
                                           int64_t renorm, int64_t norm_type, bool out_flag,
                                           double routed_scaling_factor, double eps,
                                           const void* y, const void* expert_idx, const void* out,
                                           uint64_t* workspace_size, void** executor) {
  GatingCall call{"aclnnMoeGatingTopKHash", x, bias, input_ids, tid2eid, k, k_group, group_count,
                  group_select_mode, renorm, norm_type, out_flag, routed_scaling_factor, eps, y,
                  expert_idx, out};
  return PrepareGating(call, /*hash_op=*/true, workspace_size, executor);
}

int aclnnMoeGatingTopKHash(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeGatingTopKHash", workspace, workspace_size, executor, stream);
}

}  // extern "C"
