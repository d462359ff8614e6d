// Fake aclnnMoeInitRouting (libopapi.so): the checks of ops-transformer moe/moe_init_routing
// (op_host/moe_init_routing_def.cpp: x float16 / bfloat16 / float, row_idx and expert_idx int32;
// op_host/moe_init_routing_tiling.cpp: x, row_idx, expert_idx 2-D with the same rows, row_idx of
// expert_idx's shape, active_num >= 0, expanded_x [min(N, active_num) * K, H], expanded_row_idx
// and expanded_expert_idx [N*K]), with their status codes; the argument order is op-plugin's
// call. The computation is the project's CPU kernel; ids outside [0, 2^31 - 1) or a row_idx that
// is no permutation of [0, N*K) fail the run (the NPU would write out of bounds).
#include <algorithm>
#include <string>

#include "fake_aclnn.h"
#include "fake_expert_sort.h"

using namespace fake_cann;
namespace cpu = ascend_moe::cpu;

extern "C" {

int aclnnMoeInitRoutingGetWorkspaceSize(const void* x, const void* row_idx, const void* expert_idx,
                                        int64_t active_num, const void* expanded_x,
                                        const void* expanded_row_idx, const void* expanded_expert_idx,
                                        uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeInitRoutingGetWorkspaceSize");
  c.RequireKernels();
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  c.Check("x", x, true, {kFloat16, kBFloat16, kFloat}, {-1, -1});
  c.Check("expertIdx", expert_idx, true, {kInt32}, {-1, -1});
  if (!c.ok()) return c.status();
  const int64_t n = T(x)->dims[0], h = T(x)->dims[1], k = T(expert_idx)->dims[1];
  if (T(expert_idx)->dims[0] != n) c.Fail(kTilingError, "Input rows should be same.");
  c.Check("rowIdx", row_idx, true, {kInt32}, {n, k});
  if (active_num < 0) c.Fail(kTilingError, "active_num must be a non-negative number.");
  if (!c.ok()) return c.status();
  const int64_t rows = std::min(n, active_num) * k;
  c.Check("expandedXOut", expanded_x, true, {T(x)->dtype}, {rows, h});
  c.Check("expandedRowIdxOut", expanded_row_idx, true, {kInt32}, {n * k});
  c.Check("expandedExpertIdxOut", expanded_expert_idx, true, {kInt32}, {n * k});
  if (!c.ok()) return c.status();
  const int dt = T(x)->dtype;
  cpu::MoeInitRoutingParams p = ExpertSortParams(n, k, h, dt);
  p.permute = true;
  p.num_out_rows = rows;
  auto run = [=]() {
    if (n * k == 0) return static_cast<int>(kOk);
    const auto* rid = static_cast<const int32_t*>(Data(row_idx));
    const auto* eid = static_cast<const int32_t*>(Data(expert_idx));
    cpu::MoeInitRoutingPlan plan;
    if (cpu::FirstBadRowIdx(rid, n * k) >= 0 || plan.Build(p, eid, rid) >= 0) {
      FakeAclError(
          "aclnnMoeInitRouting: bad expert id or row_idx is no permutation: out of bounds (status 561002)");
      return static_cast<int>(kTilingError);
    }
    plan.WriteRowIdx(static_cast<int32_t*>(Data(expanded_row_idx)));
    plan.WriteSortedExperts(eid, static_cast<int32_t*>(Data(expanded_expert_idx)));
    ExpandAllRows(plan, Data(x), Data(expanded_x));
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeInitRouting", 1024 + 16 * static_cast<uint64_t>(n * k),
                      {x, row_idx, expert_idx, expanded_x, expanded_row_idx, expanded_expert_idx}, run,
                      workspace_size, executor);
}

int aclnnMoeInitRouting(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeInitRouting", workspace, workspace_size, executor, stream);
}

}  // extern "C"
