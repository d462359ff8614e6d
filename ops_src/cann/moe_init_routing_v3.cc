#include "ops_src/cann/moe_init_routing_v3.h"

#include <memory>
#include <stdexcept>
#include <string>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

std::string InitRoutingV3Blocker(const InitRoutingV3Call& c) {
  const std::string op = kAclnnMoeInitRoutingV3;
  if (c.tokens <= 0) return "0 tokens";
  if (c.expert_num <= 0) return op + " takes expert_num > 0, got " + std::to_string(c.expert_num);
  if (!(c.expert_start >= 0 && c.expert_start < c.expert_end && c.expert_end <= c.expert_num)) {
    return op + " takes an expert range 0 <= start < end <= expert_num, got [" +
           std::to_string(c.expert_start) + ", " + std::to_string(c.expert_end) + ") with expert_num " +
           std::to_string(c.expert_num);
  }
  if (c.tokens_num_type != 1 && c.tokens_num_type != 2) {
    return op + " takes expert_tokens_num_type 1 or 2, got " + std::to_string(c.tokens_num_type);
  }
  const int64_t max_end = c.tokens_num_type == 2 ? 5120 : 10240;
  if (c.expert_end > max_end) {
    return op + " takes expert_end <= " + std::to_string(max_end) +
           (c.tokens_num_type == 2 ? " with key/value counts" : "") + ", got " + std::to_string(c.expert_end);
  }
  if (c.row_idx_type != 0 && c.row_idx_type != 1) {
    return op + " takes row_idx_type 0 or 1, got " + std::to_string(c.row_idx_type);
  }
  return {};
}

void RunMoeInitRoutingV3(const DeviceContext& ctx, const InitRoutingV3Call& c) {
  std::string blocked = InitRoutingV3Blocker(c);
  if (blocked.empty()) blocked = ChipBlocker(kAclnnMoeInitRoutingV3);
  if (!blocked.empty()) throw std::runtime_error("MoeInitRoutingV3: " + blocked);
  const AclnnOp op = RequireAclnnOp(kAclnnMoeInitRoutingV3, "MoeInitRoutingV3");
  const int64_t pairs = c.tokens * c.k;
  Tensor x(c.x_type, {c.tokens, c.hidden}, c.x);
  Tensor idx(kAclInt32, {c.tokens, c.k}, c.expert_idx);
  Tensor expanded_x(c.x_type, {pairs, c.hidden}, c.expanded_x);
  Tensor row_idx(kAclInt32, {pairs}, c.expanded_row_idx);
  std::unique_ptr<Tensor> counts;
  if (c.tokens_num_type == 2)
    counts = std::make_unique<Tensor>(kAclInt64, std::vector<int64_t>{c.expert_num, 2}, c.counts);
  else
    counts =
        std::make_unique<Tensor>(kAclInt64, std::vector<int64_t>{c.expert_end - c.expert_start}, c.counts);
  Tensor expanded_scale(kAclFloat, {pairs}, c.expanded_scale);
  std::unique_ptr<Tensor> scale;
  if (c.scale) scale = std::make_unique<Tensor>(kAclFloat, std::vector<int64_t>{c.tokens}, c.scale);
  IntArray range({c.expert_start, c.expert_end});
  auto prepare = reinterpret_cast<AclnnMoeInitRoutingV3GetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnMoeInitRoutingV3,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        // activeNum must equal N*K and expertCapacity is unused (aclnnMoeInitRoutingV3.md, 约束说明).
        return prepare(x.get(), idx.get(), scale ? scale->get() : nullptr, nullptr, pairs, 0, c.expert_num,
                       /*drop_pad_mode=*/0, c.tokens_num_type, /*expert_tokens_num_flag=*/true,
                       /*quant_mode=*/-1, range.get(), c.row_idx_type, expanded_x.get(), row_idx.get(),
                       counts->get(), expanded_scale.get(), workspace_size, executor);
      },
      op.run);
}

std::string MoeInitRoutingV3NativeBlocker(const MoeInitRoutingV3DeviceArgs& a) {
  if (a.quant_mode != -1)
    return "quant_mode " + std::to_string(a.quant_mode) + " is sent to the host (float types only)";
  if (a.drop_pad_mode != 0) return "aclnnMoeInitRoutingV3 supports drop_pad_mode 0 (dropless) only";
  InitRoutingV3Call c;
  c.tokens = a.tokens;
  c.expert_num = a.expert_num;
  c.expert_start = a.expert_start;
  c.expert_end = a.expert_end;
  c.tokens_num_type = a.tokens_num_type == 2 ? 2 : 1;  // cumsum is sent as counts
  c.row_idx_type = a.row_idx_type;
  return InitRoutingV3Blocker(c);
}

void LaunchMoeInitRoutingV3(const DeviceContext& ctx, const MoeInitRoutingV3DeviceArgs& a) {
  const int64_t pairs = a.tokens * a.k;
  const size_t row_bytes = static_cast<size_t>(a.hidden) * AclElementBytes(a.x_type);
  const size_t id_bytes = static_cast<size_t>(pairs) * sizeof(int32_t);
  DeviceBuffer ids(ctx, id_bytes);
  UploadStaged(ctx, ids.get(), a.expert_idx_host, id_bytes);
  // The operator writes N*K rows; with fewer (active_num) it writes to scratch, copied after.
  const bool cut = a.rows < pairs;
  std::unique_ptr<DeviceBuffer> x_scratch, scale_scratch;
  if (cut) {
    x_scratch = std::make_unique<DeviceBuffer>(ctx, pairs * row_bytes);
    scale_scratch = std::make_unique<DeviceBuffer>(ctx, pairs * sizeof(float));
  }
  InitRoutingV3Call c;
  c.x_type = a.x_type;
  c.tokens = a.tokens;
  c.k = a.k;
  c.hidden = a.hidden;
  c.expert_num = a.expert_num;
  c.expert_start = a.expert_start;
  c.expert_end = a.expert_end;
  c.tokens_num_type = a.tokens_num_type == 2 ? 2 : 1;  // cumsum: counts, replaced below
  c.row_idx_type = a.row_idx_type;
  c.x = a.x;
  c.expert_idx = ids.get();
  c.scale = a.scale;
  c.expanded_x = cut ? x_scratch->get() : a.expanded_x;
  c.expanded_row_idx = a.expanded_row_idx;
  c.counts = a.counts;
  c.expanded_scale = cut ? scale_scratch->get() : a.expanded_scale;
  RunMoeInitRoutingV3(ctx, c);

  int64_t kept = 0;  // pairs with an active expert
  for (int64_t i = 0; i < pairs; ++i)
    kept += a.expert_idx_host[i] >= a.expert_start && a.expert_idx_host[i] < a.expert_end;
  const int64_t valid = kept < a.rows ? kept : a.rows;
  if (cut) {
    CopyAsync(ctx, a.expanded_x, x_scratch->get(), valid * row_bytes, kDeviceToDevice);
    if (a.scale)
      CopyAsync(ctx, a.expanded_scale, scale_scratch->get(), valid * sizeof(float), kDeviceToDevice);
  }
  MemsetAsync(ctx, static_cast<char*>(a.expanded_x) + valid * row_bytes, (a.rows - valid) * row_bytes, 0);
  const int64_t scale_from = a.scale ? valid : 0;
  MemsetAsync(ctx, static_cast<float*>(a.expanded_scale) + scale_from, (a.rows - scale_from) * sizeof(float),
              0);
  if (a.row_idx_type == 1) {
    MemsetAsync(ctx, static_cast<int32_t*>(a.expanded_row_idx) + kept, (pairs - kept) * sizeof(int32_t),
                0xFF);
  }
  if (a.tokens_num_type == 0) {
    UploadStaged(ctx, a.counts, a.counts_host,
                 static_cast<size_t>(a.expert_end - a.expert_start) * sizeof(int64_t));
  }
}

}  // namespace ascend_moe::cann
