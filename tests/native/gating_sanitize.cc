// Inputs that once hit undefined behaviour or overflowed a buffer in the CPU kernels, for an
// ASan + UBSan build (tests/ops/moe_gating_top_k_hash/test_gating_kernel_sanitize.py compiles it):
// NaN logits through the scalar exp (row tails, hash rows), k_group > 64, tied rows, the ungrouped
// sigmoid selection's chunk and estimate paths, and the re-routing chunk size of huge rows. Exits 0
// when every call returns; the sanitizers abort on UB.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"
#include "ops_src/cpu/moe_re_routing.h"

using namespace ascend_moe::cpu;

namespace {

int Run(MoeGatingTopKHashParams p, const std::vector<float>& x, bool hash,
        const std::vector<float>* bias = nullptr) {
  const int64_t R = p.rows, E = p.experts, k = p.k;
  std::vector<float> y(R * k), out(R * E);
  std::vector<int32_t> idx(R * k), table(4 * k);
  std::vector<int64_t> ids(R);
  for (int64_t i = 0; i < R; ++i) ids[i] = i % 4;
  for (int64_t i = 0; i < 4 * k; ++i) table[i] = static_cast<int32_t>((i * 7) % E);
  MoeGatingTopKHashInputs in;
  in.x = x.data();
  if (bias != nullptr) in.bias = bias->data();
  if (hash) {
    in.hash = true;
    in.input_ids = ids.data();
    in.tid2eid = table.data();
    in.table_rows = 4;
  }
  MoeGatingTopKHashOutputs o;
  o.y = y.data();
  o.expert_idx = idx.data();
  o.out = p.out_flag ? out.data() : nullptr;
  if (!MoeGatingTopKHashRows(p, in, o, 0, R).ok()) return 1;
  for (int32_t v : idx) {
    if (v < 0 || v >= E) return 1;
  }
  return 0;
}

}  // namespace

int main() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  int failures = 0;
  // NaN and +-inf logits, E = 13 (a scalar tail on every path), every norm type, hash rows too.
  for (int norm = 0; norm < 3; ++norm) {
    for (bool hash : {false, true}) {
      MoeGatingTopKHashParams p;
      p.rows = 4, p.experts = 13, p.k = 3, p.norm_type = norm, p.out_flag = 1;
      std::vector<float> x(4 * 13, 0.5f);
      for (int i = 0; i < 13; ++i) x[i] = nan, x[13 + i] = -nan;
      x[26] = INFINITY, x[27] = -INFINITY, x[40] = nan;
      failures += Run(p, x, hash);
    }
  }
  // k_group above the 64 entries of a top-k buffer (E = group_count = 66, k_group = 65).
  {
    MoeGatingTopKHashParams p;
    p.rows = 8, p.experts = 66, p.k = 8, p.group_count = 66, p.k_group = 65, p.norm_type = 1;
    std::vector<float> x(8 * 66);
    for (size_t i = 0; i < x.size(); ++i) x[i] = std::sin(static_cast<float>(i));
    failures += Run(p, x, false);
  }
  // Tied rows at the largest E, grouped and not.
  for (int64_t groups : {1, 128}) {
    MoeGatingTopKHashParams p;
    p.rows = 2, p.experts = 2048, p.k = 64, p.group_count = groups, p.k_group = groups > 1 ? 100 : 1;
    failures += Run(p, std::vector<float>(2 * 2048, 0.0f), false);
  }
  // Ungrouped sigmoid rows through the chunked selection and the estimated-score filter (AVX2:
  // out_flag 0 and 1), at the largest E and with padding chunks (E = 144): random, tied, NaN and
  // +-inf rows, k up to 16, a bias with large entries.
  for (int64_t E : {2048, 144}) {
    for (int flag = 0; flag < 2; ++flag) {
      MoeGatingTopKHashParams p;
      p.rows = 6, p.experts = E, p.k = E == 144 ? 8 : 16, p.norm_type = 1, p.out_flag = flag;
      std::vector<float> x(6 * E), bias(E);
      for (int64_t i = 0; i < E; ++i) {
        x[i] = std::sin(static_cast<float>(i) * 0.7f) * 3.0f;  // random-like
        x[E + i] = 0.0f;                                         // tied
        x[2 * E + i] = i % 3 == 0 ? nan : x[i];                  // NaN thirds
        x[3 * E + i] = nan;                                      // all NaN
        x[4 * E + i] = i % 5 == 0 ? INFINITY : -INFINITY;        // +-inf
        x[5 * E + i] = i < E - 5 ? nan : 1.0f;                   // fewer than k numbers
        bias[i] = i % 7 == 0 ? 1e30f : std::cos(static_cast<float>(i)) * 0.1f;
      }
      failures += Run(p, x, false);
      failures += Run(p, x, false, &bias);
    }
  }
  // Re-routing chunk size for rows too large to exist (empty tensors may have them).
  {
    MoeReRoutingParams p;
    p.num_tokens = 0, p.num_ranks = 1, p.num_experts = 1;
    p.token_row_bytes = std::numeric_limits<int64_t>::max();
    p.has_scales = true;
    p.scale_row_bytes = std::numeric_limits<int64_t>::max();
    std::vector<int64_t> counts(1, 0);
    MoeReRoutingLayout layout;
    if (!layout.Build(p, counts.data()) || layout.RowsPerChunk(1 << 20) < 1) ++failures;
  }
  std::printf("%s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
