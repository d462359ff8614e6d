#include "ops_src/cann/moe_re_routing.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

namespace {

int64_t CountAt(const cpu::MoeReRoutingParams& p, const void* counts, int64_t i) {
  return p.count_type == cpu::CountType::kInt32 ? static_cast<const int32_t*>(counts)[i]
                                                : static_cast<const int64_t*>(counts)[i];
}

AclDataType CountAclType(const cpu::MoeReRoutingParams& p) {
  return p.count_type == cpu::CountType::kInt32 ? kAclInt32 : kAclInt64;
}

void RunNative(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a) {
  const cpu::MoeReRoutingParams& p = a.params;
  std::string why;
  auto prepare_fn = reinterpret_cast<AclnnMoeReRoutingGetWorkspaceSizeFn>(
      FindSymbol("aclnnMoeReRoutingGetWorkspaceSize", &why));
  auto run_fn = reinterpret_cast<AclnnRunFn>(FindSymbol(kAclnnMoeReRouting, &why));
  if (!prepare_fn || !run_fn) throw std::runtime_error("MoeReRouting: " + why);

  const int64_t A = p.num_tokens, N = p.num_ranks, E = p.num_experts;
  const size_t count_bytes = static_cast<size_t>(N * E) * (CountAclType(p) == kAclInt32 ? 4 : 8);
  // The counts were read on the host (validation); the operator reads them on the device.
  DeviceBuffer counts(ctx, count_bytes);
  CopyAsync(ctx, counts.get(), a.counts_host, count_bytes, kHostToDevice);
  // The operator writes float scales [A] even without input scales (assumed, unverified on
  // hardware): they then go to scratch.
  DeviceBuffer scale_scratch(ctx, p.has_scales ? 1 : static_cast<size_t>(A) * 4);
  void* permute_scales = p.has_scales ? a.permute_scales : scale_scratch.get();

  Tensor tokens(a.token_type, {A, a.hidden}, a.tokens);
  Tensor counts_t(CountAclType(p), {N, E}, counts.get());
  Tensor permute_tokens(a.token_type, {A, a.hidden}, a.permute_tokens);
  Tensor permute_scales_t(kAclFloat, {A}, permute_scales);
  Tensor permute_idx(kAclInt32, {A}, a.permute_idx);
  Tensor expert_token_num(CountAclType(p), {E}, a.expert_token_num);
  std::unique_ptr<Tensor> scales;
  if (p.has_scales) scales = std::make_unique<Tensor>(kAclFloat, std::vector<int64_t>{A}, a.scales);

  RunAclnn(
      ctx, kAclnnMoeReRouting,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare_fn(tokens.get(), counts_t.get(), scales ? scales->get() : nullptr,
                          p.expert_token_num_type, p.idx_type, permute_tokens.get(), permute_scales_t.get(),
                          permute_idx.get(), expert_token_num.get(), workspace_size, executor);
      },
      run_fn);
  Synchronize(ctx);  // the host counts must outlive their upload
}

// Row copies planned on the host: one device-to-device copy per (rank, expert) block and per
// token / scale tensor; the index and the expert totals are computed here and uploaded.
void RunCopies(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a) {
  const cpu::MoeReRoutingParams& p = a.params;
  const int64_t A = p.num_tokens, N = p.num_ranks, E = p.num_experts;
  std::vector<int64_t> src(N * E);
  int64_t s = 0;
  for (int64_t i = 0; i < N * E; ++i) {
    src[i] = s;
    s += CountAt(p, a.counts_host, i);
  }
  std::vector<int32_t> idx(A);
  std::vector<int64_t> totals(E, 0);
  int64_t dst = 0;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < N; ++r) {
      const int64_t c = CountAt(p, a.counts_host, r * E + e), from = src[r * E + e];
      if (c == 0) continue;
      auto rows = [&](const void* in, void* out, int64_t row_bytes) {
        CopyAsync(ctx, static_cast<char*>(out) + dst * row_bytes,
                  static_cast<const char*>(in) + from * row_bytes, c * row_bytes, kDeviceToDevice);
      };
      rows(a.tokens, a.permute_tokens, p.token_row_bytes);
      if (p.has_scales) rows(a.scales, a.permute_scales, p.scale_row_bytes);
      for (int64_t i = 0; i < c; ++i) {
        if (p.idx_type == 0)
          idx[dst + i] = static_cast<int32_t>(from + i);
        else
          idx[from + i] = static_cast<int32_t>(dst + i);
      }
      dst += c;
      totals[e] += c;
    }
  }
  if (p.expert_token_num_type == 0) {
    for (int64_t e = 1; e < E; ++e) totals[e] += totals[e - 1];
  }
  std::vector<int32_t> totals32;
  const void* totals_host = totals.data();
  size_t totals_bytes = E * sizeof(int64_t);
  if (p.count_type == cpu::CountType::kInt32) {
    totals32.assign(totals.begin(), totals.end());
    totals_host = totals32.data();
    totals_bytes = E * sizeof(int32_t);
  }
  CopyAsync(ctx, a.permute_idx, idx.data(), A * sizeof(int32_t), kHostToDevice);
  CopyAsync(ctx, a.expert_token_num, totals_host, totals_bytes, kHostToDevice);
  Synchronize(ctx);  // idx / totals are host buffers of this frame
}

}  // namespace

std::string MoeReRoutingNativeBlocker(const MoeReRoutingDeviceArgs& a) {
  const cpu::MoeReRoutingParams& p = a.params;
  const AclDataType* native_end = std::end(kNativeTokenTypes);
  if (!a.token_type_known || std::find(kNativeTokenTypes, native_end, a.token_type) == native_end) {
    return "tokens must be float16, bfloat16 or int8 for aclnnMoeReRouting";
  }
  if (p.has_scales && (a.scale_type != kNativeScaleType || a.scale_rank != 1)) {
    return "per_token_scales must be float [A] for aclnnMoeReRouting";
  }
  if (a.hidden >= kNativeHiddenLimit) {
    return "aclnnMoeReRouting needs H < 16384, got H = " + std::to_string(a.hidden);
  }
  if (p.expert_token_num_type != 1) {
    return "aclnnMoeReRouting supports expert_token_num_type=1 (counts) only, got 0 (cumsum)";
  }
  if (p.idx_type != 0) {
    return "aclnnMoeReRouting supports idx_type=0 (gather index) only, got 1 (scatter)";
  }
  return {};
}

MoeReRoutingPath ChooseMoeReRoutingPath(const MoeReRoutingDeviceArgs& a) {
  MoeReRoutingPath path;
  path.reason = MoeReRoutingNativeBlocker(a);
  if (!path.reason.empty()) return path;
  std::string why;
  if (!FindSymbol("aclnnMoeReRoutingGetWorkspaceSize", &why) || !FindSymbol(kAclnnMoeReRouting, &why)) {
    path.reason = "the CANN operator library has no aclnnMoeReRouting: " + why;
    return path;
  }
  path.call = kAclnnMoeReRouting;
  return path;
}

void LaunchMoeReRouting(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a,
                        const MoeReRoutingPath& path) {
  const cpu::MoeReRoutingParams& p = a.params;
  if (p.num_tokens == 0) {  // nothing to move: only the expert totals (all zero) are written
    std::vector<int64_t> zeros(p.num_experts, 0);
    CopyAsync(ctx, a.expert_token_num, zeros.data(),
              p.num_experts * (p.count_type == cpu::CountType::kInt32 ? 4 : 8), kHostToDevice);
    Synchronize(ctx);
    return;
  }
  if (path.call)
    RunNative(ctx, a);
  else
    RunCopies(ctx, a);
}

}  // namespace ascend_moe::cann
