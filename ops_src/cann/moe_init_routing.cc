#include "ops_src/cann/moe_init_routing.h"

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

std::string MoeInitRoutingNativeBlocker(const MoeInitRoutingDeviceArgs& a) {
  if (a.tokens == 0 || a.rows == 0) return "no rows to move";
  return {};
}

void LaunchMoeInitRouting(const DeviceContext& ctx, const MoeInitRoutingDeviceArgs& a) {
  const AclnnOp op = RequireAclnnOp(kAclnnMoeInitRouting, "MoeInitRouting");
  const int64_t pairs = a.tokens * a.k;
  const size_t bytes = static_cast<size_t>(pairs) * sizeof(int32_t);
  DeviceBuffer row_idx(ctx, bytes), expert_idx(ctx, bytes);
  UploadStaged(ctx, row_idx.get(), a.row_idx_host, bytes);
  UploadStaged(ctx, expert_idx.get(), a.expert_idx_host, bytes);
  Tensor x(a.x_type, {a.tokens, a.hidden}, a.x);
  Tensor row(kAclInt32, {a.tokens, a.k}, row_idx.get());
  Tensor experts(kAclInt32, {a.tokens, a.k}, expert_idx.get());
  Tensor expanded_x(a.x_type, {a.rows, a.hidden}, a.expanded_x);
  Tensor expanded_row(kAclInt32, {pairs}, a.expanded_row_idx);
  Tensor expanded_experts(kAclInt32, {pairs}, a.expanded_expert_idx);
  // op-plugin passes active_num clipped to N.
  const int64_t active = a.active_num < a.tokens ? a.active_num : a.tokens;
  auto prepare = reinterpret_cast<AclnnMoeInitRoutingGetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnMoeInitRouting,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(x.get(), row.get(), experts.get(), active, expanded_x.get(), expanded_row.get(),
                       expanded_experts.get(), workspace_size, executor);
      },
      op.run);
}

}  // namespace ascend_moe::cann
