#include "ops_src/cann/moe_token_permute.h"

#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

std::string MoeTokenPermuteNativeBlocker(const MoeTokenPermuteDeviceArgs& a) {
  if (a.tokens == 0 || a.rows == 0) return "no rows to move";
  if (a.k > kPermuteMaxTopK) return "aclnnMoeTokenPermute takes K <= 512, got " + std::to_string(a.k);
  if (a.tokens * a.k >= kPermuteSortLimit) {
    return "aclnnMoeTokenPermute takes N*K < 16777215, got " + std::to_string(a.tokens * a.k);
  }
  return {};
}

void LaunchMoeTokenPermute(const DeviceContext& ctx, const MoeTokenPermuteDeviceArgs& a) {
  const AclnnOp op = RequireAclnnOp(kAclnnMoeTokenPermute, "MoeTokenPermute");
  const int64_t pairs = a.tokens * a.k;
  const AclDataType id_type = a.indices_int64 ? kAclInt64 : kAclInt32;
  const size_t id_bytes = static_cast<size_t>(pairs) * AclElementBytes(id_type);
  DeviceBuffer ids(ctx, id_bytes);
  UploadStaged(ctx, ids.get(), a.indices_host, id_bytes);
  Tensor tokens(a.token_type, {a.tokens, a.hidden}, a.x);
  Tensor indices(id_type,
                 a.indices_rank == 1 ? std::vector<int64_t>{a.tokens} : std::vector<int64_t>{a.tokens, a.k},
                 ids.get());
  Tensor permuted(a.token_type, {a.rows, a.hidden}, a.permuted);
  Tensor sorted(kAclInt32, {pairs}, a.sorted_indices);
  auto prepare = reinterpret_cast<AclnnMoeTokenPermuteGetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnMoeTokenPermute,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        // numOutTokens: the rows of permuteTokensOut (op-plugin passes the resolved count).
        return prepare(tokens.get(), indices.get(), a.rows, /*padded_mode=*/false, permuted.get(),
                       sorted.get(), workspace_size, executor);
      },
      op.run);
}

}  // namespace ascend_moe::cann
