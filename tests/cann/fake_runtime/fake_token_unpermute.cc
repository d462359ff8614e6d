// Fake aclnnMoeTokenUnpermute (libopapi.so): the checks of ops-transformer moe/moe_token_unpermute
// (op_host/moe_token_unpermute_def.cpp for ascend910b: permuted_tokens bfloat16 / float16 / float,
// sorted_indices int32, probs of any of the three; op_host/op_api/aclnn_moe_token_unpermute.cpp:
// padded mode refused; the tiling's room for K <= 512), with their status codes; the computation
// is the project's CPU kernel (a slot of probability 0 is not read; an index in [P, N*K) adds
// nothing). An index the kernel reads outside [0, max(P, N*K)) fails the run.
#include <algorithm>
#include <string>

#include "fake_aclnn.h"
#include "fake_lists.h"
#include "fake_weighted_gather.h"

using namespace fake_cann;
namespace cpu = ascend_moe::cpu;

extern "C" {

int aclnnMoeTokenUnpermuteGetWorkspaceSize(const void* permuted, const void* sorted, const void* probs,
                                           bool padded_mode, const void* restore_shape, void* out,
                                           uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeTokenUnpermuteGetWorkspaceSize");
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  if (padded_mode) c.Fail(kParamInvalid, "paddedMode must be false");
  if (restore_shape && !FakeAclnnIsIntArray(restore_shape))
    c.Fail(kParamInvalid, "restoreShapeOptional is not a live aclIntArray");
  c.RequireKernels();
  if (SocIs310P())  // the 310p config: float16 / float tokens
    c.Check("permutedTokens", permuted, true, {kFloat16, kFloat}, {-1, -1});
  else
    c.Check("permutedTokens", permuted, true, {kBFloat16, kFloat16, kFloat}, {-1, -1});
  c.Check("sortedIndices", sorted, true, {kInt32}, {-1});
  if (!c.ok()) return c.status();
  const int dt = T(permuted)->dtype;
  const int64_t p_rows = T(permuted)->dims[0], h = T(permuted)->dims[1], nk = T(sorted)->dims[0];
  c.Check("probsOptional", probs, false, {kBFloat16, kFloat16, kFloat}, {-1, -1});
  if (!c.ok()) return c.status();
  const int64_t k = probs ? T(probs)->dims[1] : 1;
  if (k < 1 || k > 512) c.Fail(kTilingError, "topK must be in [1, 512], got " + std::to_string(k));
  if (!c.ok()) return c.status();
  const int64_t n = nk / k;
  if (probs && T(probs)->dims[0] * k != nk)
    c.Fail(kParamInvalid, "probs must be [N, K] with N*K = sortedIndices' size");
  c.Check("out", out, true, {dt}, {n, h});
  if (!c.ok()) return c.status();
  cpu::WeightedGatherParams p = WeightedGatherParamsOf(n, k, h, p_rows, dt);
  p.token_major = true;
  p.skip_zero_weight = true;
  p.has_weights = probs != nullptr;
  p.weight_type = probs ? WeightedGatherRowType(T(probs)->dtype) : cpu::RowType::kFloat32;
  auto run = [=]() {
    if (n == 0 || h == 0) return static_cast<int>(kOk);
    cpu::WeightedGatherBuffers b;
    b.rows = Data(permuted);
    b.row_index = Data(sorted);
    b.weights = probs ? Data(probs) : nullptr;
    b.out = Data(out);
    if (cpu::FirstReadSlotOutside(p, b, 0, std::max(p_rows, nk)) >= 0) {
      FakeAclError("aclnnMoeTokenUnpermute: a read index is outside the rows: out of bounds (status 561002)");
      return static_cast<int>(kTilingError);
    }
    cpu::WeightedGatherRows(p, b, 0, n);
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeTokenUnpermute", 0, {permuted, sorted, probs, out}, run, workspace_size,
                      executor);
}

int aclnnMoeTokenUnpermute(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeTokenUnpermute", workspace, workspace_size, executor, stream);
}

}  // extern "C"
