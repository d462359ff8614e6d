#include "ops_src/cann/moe_finalize_routing_v2.h"

#include <memory>
#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

void RunMoeFinalizeRoutingV2(const DeviceContext& ctx, const FinalizeRoutingV2Call& c) {
  const AclnnOp op = RequireAclnnOp(kAclnnMoeFinalizeRoutingV2, "MoeFinalizeRoutingV2");
  const bool drop_pad = c.drop_pad_mode == 1 || c.drop_pad_mode == 3;
  auto make = [](AclDataType t, std::vector<int64_t> dims, const void* data) {
    return data ? std::make_unique<Tensor>(t, std::move(dims), data) : nullptr;
  };
  const std::vector<int64_t> x_dims =
      drop_pad ? std::vector<int64_t>{c.rows, c.capacity, c.hidden} : std::vector<int64_t>{c.rows, c.hidden};
  Tensor expanded_x(c.type, x_dims, c.expanded_x);
  Tensor index(kAclInt32, {c.tokens * c.k}, c.index);
  Tensor y(c.type, {c.tokens, c.hidden}, c.y);
  auto x1 = make(c.type, {c.tokens, c.hidden}, c.x1);
  auto x2 = make(c.type, {c.tokens, c.hidden}, c.x2);
  auto bias = make(c.type, {c.experts, c.hidden}, c.bias);
  auto scales = make(c.scales_type, {c.tokens, c.k}, c.scales);
  auto expert_idx = make(kAclInt32, {c.tokens, c.k}, c.expert_idx);
  auto get = [](const std::unique_ptr<Tensor>& t) -> const AclTensor* { return t ? t->get() : nullptr; };
  auto prepare = reinterpret_cast<AclnnMoeFinalizeRoutingV2GetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnMoeFinalizeRoutingV2,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(expanded_x.get(), index.get(), get(x1), get(x2), get(bias), get(scales),
                       get(expert_idx), c.drop_pad_mode, y.get(), workspace_size, executor);
      },
      op.run);
}

std::string MoeFinalizeRoutingV2NativeBlocker(const FinalizeRoutingV2Call& c, bool has_scales) {
  if (has_scales && c.scales_type != c.type && !(c.type == kAclBFloat16 && c.scales_type == kAclFloat)) {
    return std::string(
               "aclnnMoeFinalizeRoutingV2 takes scales of expanded_x's type (or float with bfloat16), got ") +
           AclTypeName(c.scales_type) + " with " + AclTypeName(c.type);
  }
  if (c.experts > 0 && c.experts < c.k) {
    return "aclnnMoeFinalizeRoutingV2 needs E >= K with bias, got E = " + std::to_string(c.experts) +
           ", K = " + std::to_string(c.k);
  }
  return {};
}

void LaunchMoeFinalizeRoutingV2(const DeviceContext& ctx, FinalizeRoutingV2Call c, const int32_t* index_host,
                                const int32_t* expert_idx_host) {
  const size_t slots = static_cast<size_t>(c.tokens * c.k) * sizeof(int32_t);
  DeviceBuffer index(ctx, slots);
  UploadStaged(ctx, index.get(), index_host, slots);
  std::unique_ptr<DeviceBuffer> experts;
  if (expert_idx_host) {
    experts = std::make_unique<DeviceBuffer>(ctx, slots);
    UploadStaged(ctx, experts->get(), expert_idx_host, slots);
  }
  c.index = index.get();
  c.expert_idx = experts ? experts->get() : nullptr;
  RunMoeFinalizeRoutingV2(ctx, c);
}

}  // namespace ascend_moe::cann
