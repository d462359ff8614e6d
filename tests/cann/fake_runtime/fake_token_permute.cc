// Fake aclnnMoeTokenPermute (libopapi.so): the checks of ops-transformer moe/moe_token_permute
// (op_host/moe_token_permute_def.cpp: tokens bfloat16 / float16 / float / int8, indices int32 /
// int64; op_host/op_api/aclnn_moe_token_permute.cpp: padded mode refused; op_host/
// moe_token_permute_tiling.cpp: indices 1-D or 2-D with tokens' rows, K <= 512, N*K < 16777215,
// sorted_indices [N*K], permute_tokens [numOutTokens, H]), with their status codes; the
// computation is the project's CPU kernel. Ids are read on the device unchecked: outside
// [0, 2^31 - 1) the run fails.
#include <string>

#include "fake_aclnn.h"
#include "fake_expert_sort.h"

using namespace fake_cann;
namespace cpu = ascend_moe::cpu;

extern "C" {

int aclnnMoeTokenPermuteGetWorkspaceSize(const void* tokens, const void* indices, int64_t num_out_tokens,
                                         bool padded_mode, const void* permuted, const void* sorted,
                                         uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeTokenPermuteGetWorkspaceSize");
  c.RequireKernels();
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  if (padded_mode) c.Fail(kParamInvalid, "Currently only support padded_mode is false");
  c.Check("tokens", tokens, true, {kBFloat16, kFloat16, kFloat, kInt8}, {-1, -1});
  if (!c.ok()) return c.status();
  c.RequireLive("indices", indices);
  if (!indices) {
    c.Fail(kParamNullptr, "argument 'indices' is null");
    return c.status();
  }
  const size_t rank = T(indices)->dims.size();
  if (rank != 1 && rank != 2) {
    c.Fail(kTilingError,
           "The dim number of indices should be 2 or 1 but got [" + std::to_string(rank) + "].");
    return c.status();
  }
  c.Check("indices", indices, true, {kInt64, kInt32}, std::vector<int64_t>(rank, -1));
  if (!c.ok()) return c.status();
  const int64_t n = T(tokens)->dims[0], h = T(tokens)->dims[1];
  const int64_t k = rank == 2 ? T(indices)->dims[1] : 1;
  if (T(indices)->dims[0] != n)
    c.Fail(kTilingError, "Input token's dim 0 should be same with indices' dim 0.");
  if (k > 512) c.Fail(kTilingError, "Input indices's dim 1 should not large than max topK[512].");
  if (n * k >= 16777215) c.Fail(kTilingError, "The elements num of indices should be less than [16777215].");
  if (!c.ok()) return c.status();
  c.Check("permuteTokensOut", permuted, true, {T(tokens)->dtype}, {num_out_tokens, h});
  c.Check("sortedIndicesOut", sorted, true, {kInt32}, {n * k});
  if (!c.ok()) return c.status();
  const int dt = T(tokens)->dtype;
  cpu::MoeInitRoutingParams p = ExpertSortParams(n, k, h, dt);
  p.idx_int64 = T(indices)->dtype == kInt64;
  p.permute = true;
  p.num_out_rows = num_out_tokens;
  auto run = [=]() {
    if (n * k == 0) return static_cast<int>(kOk);
    cpu::MoeInitRoutingPlan plan;
    if (plan.Build(p, Data(indices)) >= 0) {
      FakeAclError("aclnnMoeTokenPermute: an expert id is outside [0, 2^31 - 1) (status 561002)");
      return static_cast<int>(kTilingError);
    }
    plan.WriteRowIdx(static_cast<int32_t*>(Data(sorted)));
    ExpandAllRows(plan, Data(tokens), Data(permuted));
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeTokenPermute", 1024 + 16 * static_cast<uint64_t>(n * k),
                      {tokens, indices, permuted, sorted}, run, workspace_size, executor);
}

int aclnnMoeTokenPermute(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeTokenPermute", workspace, workspace_size, executor, stream);
}

}  // extern "C"
