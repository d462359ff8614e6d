#include "ops_src/cann/moe_token_unpermute.h"

#include <memory>
#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/soc.h"
#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

std::string MoeTokenUnpermuteNativeBlocker(const MoeTokenUnpermuteDeviceArgs& a) {
  if (a.k > kUnpermuteMaxTopK) return "aclnnMoeTokenUnpermute takes K <= 512, got " + std::to_string(a.k);
  if (a.rows == 0) return "permuted_tokens has no rows";
  // moe_token_unpermute_def.cpp: the 310p config takes float16 / float tokens only.
  if (a.token_type == kAclBFloat16 && SocIs310P(std::string())) {
    return "on Ascend310P aclnnMoeTokenUnpermute takes float16 or float tokens only, got bfloat16";
  }
  return {};
}

void LaunchMoeTokenUnpermute(const DeviceContext& ctx, const MoeTokenUnpermuteDeviceArgs& a) {
  const AclnnOp op = RequireAclnnOp(kAclnnMoeTokenUnpermute, "MoeTokenUnpermute");
  const int64_t slots = a.tokens * a.k;
  DeviceBuffer index(ctx, slots * sizeof(int32_t));
  UploadStaged(ctx, index.get(), a.index_host, slots * sizeof(int32_t));
  std::unique_ptr<DeviceBuffer> probs;
  std::unique_ptr<Tensor> probs_t;
  if (a.probs_host) {
    const size_t bytes = static_cast<size_t>(slots) * AclElementBytes(a.probs_type);
    probs = std::make_unique<DeviceBuffer>(ctx, bytes);
    UploadStaged(ctx, probs->get(), a.probs_host, bytes);
    probs_t = std::make_unique<Tensor>(a.probs_type, std::vector<int64_t>{a.tokens, a.k}, probs->get());
  }
  Tensor permuted(a.token_type, {a.rows, a.hidden}, a.permuted);
  Tensor sorted(kAclInt32, {slots}, index.get());
  Tensor out(a.token_type, {a.tokens, a.hidden}, a.out);
  IntArray restore_shape({1});  // op-plugin's default restore_shape
  auto prepare = reinterpret_cast<AclnnMoeTokenUnpermuteGetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnMoeTokenUnpermute,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(permuted.get(), sorted.get(), probs_t ? probs_t->get() : nullptr,
                       /*padded_mode=*/false, restore_shape.get(), out.get(), workspace_size, executor);
      },
      op.run);
}

}  // namespace ascend_moe::cann
