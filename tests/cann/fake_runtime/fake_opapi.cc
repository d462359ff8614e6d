// Fake libopapi.so: aclnnMoeReRouting and aclnnMoeGatingTopK, checking their arguments against the
// documented Atlas A2/A3 signatures and limits, computing through the project's CPU kernels.
#include <string>

#include "fake_aclnn.h"
#include "fake_gating.h"
#include "ops_src/cpu/moe_re_routing.h"

using namespace fake_cann;

extern "C" {

int aclnnMoeReRoutingGetWorkspaceSize(const void* tokens, const void* counts, const void* scales,
                                      int64_t expert_token_num_type, int64_t idx_type,
                                      const void* permute_tokens, const void* permute_scales,
                                      const void* permute_idx, const void* expert_token_num,
                                      uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeReRoutingGetWorkspaceSize");
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  c.Check("tokens", tokens, true, {kFloat16, kBFloat16, kInt8}, {-1, -1});
  c.Check("expertTokenNumPerRank", counts, true, {kInt32, kInt64}, {-1, -1});
  if (!c.ok()) return c.status();
  const int64_t A = T(tokens)->dims[0], H = T(tokens)->dims[1];
  const int64_t N = T(counts)->dims[0], E = T(counts)->dims[1];
  const int ct = T(counts)->dtype, tt = T(tokens)->dtype;
  c.Check("perTokenScalesOptional", scales, false, {kFloat}, {A});
  c.Check("permuteTokensOut", permute_tokens, true, {tt}, {A, H});
  c.Check("permutePerTokenScalesOut", permute_scales, true, {kFloat}, {A});
  c.Check("permuteTokenIdxOut", permute_idx, true, {kInt32}, {A});
  c.Check("expertTokenNumOut", expert_token_num, true, {ct}, {E});
  c.RequireKernels();
  if (expert_token_num_type != 1) c.Fail(kParamInvalid, "expertTokenNumType must be 1");
  if (idx_type != 0) c.Fail(kParamInvalid, "idxType must be 0");
  if (!(H > 0 && H < 16384)) c.Fail(kTilingError, "H must be in (0, 16384), got " + std::to_string(H));
  if (!c.ok()) return c.status();

  ascend_moe::cpu::MoeReRoutingParams p;
  p.num_tokens = A;
  p.token_row_bytes = H * static_cast<int64_t>(ElementBytes(tt));
  p.num_ranks = N;
  p.num_experts = E;
  p.has_scales = scales != nullptr;
  p.scale_row_bytes = 4;
  p.count_type = ct == kInt32 ? ascend_moe::cpu::CountType::kInt32 : ascend_moe::cpu::CountType::kInt64;
  auto run = [=]() {
    ascend_moe::cpu::MoeReRoutingBuffers b;
    b.tokens = Data(tokens);
    b.scales = scales ? Data(scales) : nullptr;
    b.permute_tokens = Data(permute_tokens);
    b.permute_scales = Data(permute_scales);
    b.permute_idx = static_cast<int32_t*>(Data(permute_idx));
    // The NPU does not check the counts; reading past the tokens would corrupt memory there.
    if (!ascend_moe::cpu::MoeReRouting(p, Data(counts), b, Data(expert_token_num))) {
      FakeAclError("aclnnMoeReRouting: counts are negative or do not sum to A: the NPU would "
                   "read and write out of bounds (status 561002)");
      return static_cast<int>(kTilingError);
    }
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeReRouting", 4096 + 64 * static_cast<uint64_t>(N * E),
                      {tokens, counts, scales, permute_tokens, permute_scales, permute_idx,
                       expert_token_num},
                      run, workspace_size, executor);
}

int aclnnMoeReRouting(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeReRouting", workspace, workspace_size, executor, stream);
}

int aclnnMoeGatingTopKGetWorkspaceSize(const void* x, const void* bias, int64_t k, int64_t k_group,
                                       int64_t group_count, int64_t group_select_mode,
                                       int64_t renorm, int64_t norm_type, bool out_flag,
                                       double routed_scaling_factor, double eps, const void* y,
                                       const void* expert_idx, const void* out,
                                       uint64_t* workspace_size, void** executor) {
  GatingCall call{"aclnnMoeGatingTopK", x, bias, nullptr, nullptr, k, k_group, group_count,
                  group_select_mode, renorm, norm_type, out_flag, routed_scaling_factor, eps, y,
                  expert_idx, out};
  return PrepareGating(call, /*hash_op=*/false, workspace_size, executor);
}

int aclnnMoeGatingTopK(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeGatingTopK", workspace, workspace_size, executor, stream);
}

}  // extern "C"
