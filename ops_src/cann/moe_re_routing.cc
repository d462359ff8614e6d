#include "ops_src/cann/moe_re_routing.h"

#include <algorithm>
#include <cstring>
#include <iterator>
#include <memory>
#include <stdexcept>
#include <vector>

#include "ops_src/cann/loader.h"
#include "ops_src/cann/soc.h"

namespace ascend_moe::cann {

namespace {

int64_t CountAt(const cpu::MoeReRoutingParams& p, const void* counts, int64_t i) {
  return p.count_type == cpu::CountType::kInt32 ? static_cast<const int32_t*>(counts)[i]
                                                : static_cast<const int64_t*>(counts)[i];
}

AclDataType CountAclType(const cpu::MoeReRoutingParams& p) {
  return p.count_type == cpu::CountType::kInt32 ? kAclInt32 : kAclInt64;
}

// False, with `rejected` set, when phase 1 rejects the call (nothing queued then).
bool RunNative(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a, std::string* rejected) {
  const cpu::MoeReRoutingParams& p = a.params;
  std::string why;
  auto prepare_fn = reinterpret_cast<AclnnMoeReRoutingGetWorkspaceSizeFn>(
      FindSymbol("aclnnMoeReRoutingGetWorkspaceSize", &why));
  auto run_fn = reinterpret_cast<AclnnRunFn>(FindSymbol(kAclnnMoeReRouting, &why));
  if (!prepare_fn || !run_fn) throw std::runtime_error("MoeReRouting: " + why);

  const int64_t A = p.num_tokens, N = p.num_ranks, E = p.num_experts;
  const size_t count_bytes = static_cast<size_t>(N * E) * (CountAclType(p) == kAclInt32 ? 4 : 8);
  DeviceBuffer counts(ctx, count_bytes);
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

  const AclnnPrepared prepared =
      PrepareAclnn(kAclnnMoeReRouting, [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare_fn(tokens.get(), counts_t.get(), scales ? scales->get() : nullptr,
                          p.expert_token_num_type, p.idx_type, permute_tokens.get(), permute_scales_t.get(),
                          permute_idx.get(), expert_token_num.get(), workspace_size, executor);
      });
  if (!prepared.rejected.empty()) {
    *rejected = prepared.rejected;
    return false;
  }
  // The counts were read on the host (validation); the operator reads them on the device.
  UploadStaged(ctx, counts.get(), a.counts_host, count_bytes);
  LaunchAclnn(ctx, kAclnnMoeReRouting, prepared, run_fn);
  return true;
}

// `rows` rows from row `from` of the input go to row `to` of the output.
struct RowRun {
  int64_t from, to, rows;
};

// Moves the rows of one tensor ([A, row_bytes] in, out) along `runs`: device-to-device copies
// when every run starts at 64-byte aligned addresses on both sides (kDeviceCopyAlign), else a
// gather on the host (the whole tensor down, rows permuted, the whole tensor up: whole tensors
// start aligned).
void MoveRows(const DeviceContext& ctx, const void* in, void* out, int64_t num_rows, int64_t row_bytes,
              const std::vector<RowRun>& runs) {
  const char* src = static_cast<const char*>(in);
  char* dst = static_cast<char*>(out);
  bool aligned = true;
  for (const RowRun& r : runs) {
    aligned =
        aligned && DeviceCopyAligned(src + r.from * row_bytes) && DeviceCopyAligned(dst + r.to * row_bytes);
  }
  if (aligned) {
    for (const RowRun& r : runs) {
      CopyAsync(ctx, dst + r.to * row_bytes, src + r.from * row_bytes, r.rows * row_bytes, kDeviceToDevice);
    }
    return;
  }
  const size_t bytes = static_cast<size_t>(num_rows * row_bytes);
  HostBuffer down(bytes), up(bytes);
  CopyAsync(ctx, down.get(), in, bytes, kDeviceToHost);
  Synchronize(ctx);
  for (const RowRun& r : runs) {
    std::memcpy(up.as<char>() + r.to * row_bytes, down.as<char>() + r.from * row_bytes, r.rows * row_bytes);
  }
  up.UploadTo(ctx, out, bytes);
}

// Row moves planned on the host: contiguous (rank, expert) blocks coalesced into runs, moved by
// MoveRows; the index and the expert totals are computed here and uploaded.
void RunCopies(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a) {
  const cpu::MoeReRoutingParams& p = a.params;
  const int64_t A = p.num_tokens, N = p.num_ranks, E = p.num_experts;
  std::vector<int64_t> src(N * E);
  int64_t s = 0;
  for (int64_t i = 0; i < N * E; ++i) {
    src[i] = s;
    s += CountAt(p, a.counts_host, i);
  }
  const size_t total_bytes = E * (p.count_type == cpu::CountType::kInt32 ? sizeof(int32_t) : sizeof(int64_t));
  HostBuffer idx(A * sizeof(int32_t)), totals_host(total_bytes);
  std::vector<int64_t> totals(E, 0);
  std::vector<RowRun> runs;
  int64_t dst = 0;
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t r = 0; r < N; ++r) {
      const int64_t c = CountAt(p, a.counts_host, r * E + e), from = src[r * E + e];
      if (c == 0) continue;
      if (!runs.empty() && runs.back().from + runs.back().rows == from &&
          runs.back().to + runs.back().rows == dst) {
        runs.back().rows += c;
      } else {
        runs.push_back({from, dst, c});
      }
      for (int64_t i = 0; i < c; ++i) {
        if (p.idx_type == 0)
          idx.as<int32_t>()[dst + i] = static_cast<int32_t>(from + i);
        else
          idx.as<int32_t>()[from + i] = static_cast<int32_t>(dst + i);
      }
      dst += c;
      totals[e] += c;
    }
  }
  MoveRows(ctx, a.tokens, a.permute_tokens, A, p.token_row_bytes, runs);
  if (p.has_scales) MoveRows(ctx, a.scales, a.permute_scales, A, p.scale_row_bytes, runs);
  if (p.expert_token_num_type == 0) {
    for (int64_t e = 1; e < E; ++e) totals[e] += totals[e - 1];
  }
  for (int64_t e = 0; e < E; ++e) {
    if (p.count_type == cpu::CountType::kInt32)
      totals_host.as<int32_t>()[e] = static_cast<int32_t>(totals[e]);
    else
      totals_host.as<int64_t>()[e] = totals[e];
  }
  idx.UploadTo(ctx, a.permute_idx, idx.size());
  totals_host.UploadTo(ctx, a.expert_token_num, total_bytes);
}

}  // namespace

std::string MoeReRoutingNativeBlocker(const MoeReRoutingDeviceArgs& a) {
  const cpu::MoeReRoutingParams& p = a.params;
  std::string soc = SocBlocker(a.soc, kAclnnMoeReRouting);
  if (!soc.empty()) return soc;
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

NativePath ChooseMoeReRoutingPath(const MoeReRoutingDeviceArgs& a) {
  NativePath path;
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

void LaunchMoeReRouting(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& a, NativePath* path) {
  const cpu::MoeReRoutingParams& p = a.params;
  if (p.num_tokens == 0) {  // nothing to move: only the expert totals (all zero) are written
    HostBuffer zeros(p.num_experts * (p.count_type == cpu::CountType::kInt32 ? 4 : 8));
    std::memset(zeros.get(), 0, zeros.size());
    zeros.UploadTo(ctx, a.expert_token_num, zeros.size());
    return;
  }
  if (path->call) {
    std::string rejected;
    if (RunNative(ctx, a, &rejected)) return;
    path->call = nullptr;
    path->reason = rejected;
    path->rejected = true;
  }
  RunCopies(ctx, a);
}

}  // namespace ascend_moe::cann
