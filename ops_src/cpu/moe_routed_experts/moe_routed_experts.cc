// CPU kernel of MoeRoutedExperts. See the header and docs/operators.md §3.
//
// The tiles (moe_routed_experts_tiles.inc) are built once per instruction-set path (isa.h:
// portable C++ / SSE2, AVX2 + FMA and AVX-512), chosen at run time, so the library runs on any
// x86-64 CPU. The paths differ only in the dot products' summation order (a few float32 ulp).
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

#include <algorithm>
#include <cstdint>
#include <utility>
#include <vector>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

namespace ascend_moe::cpu {

namespace {

// Phase-1 items: units of 16 intermediate rows (a row's sums do not depend on the rows beside it),
// at most 4 units (64 rows) per item.
constexpr int64_t kUpRowsPerUnit = 16;
constexpr int64_t kUpUnitsPerItem = 4;

// The tiles of a path this library has.
ExpertsUpRowsFn* UpRowsOf(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &experts_avx512::UpRows;
    if (isa == CpuIsa::kAvx2) return &experts_avx2::UpRows;
  }
  return &experts_baseline::UpRows;
}
ExpertsDownRowsFn* DownRowsOf(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &experts_avx512::DownRows;
    if (isa == CpuIsa::kAvx2) return &experts_avx2::DownRows;
  }
  return &experts_baseline::DownRows;
}

ExpertsUpRowsQFn* UpRowsQOf(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &experts_avx512::UpRowsQ;
    if (isa == CpuIsa::kAvx2) return &experts_avx2::UpRowsQ;
  }
  return &experts_baseline::UpRowsQ;
}
ExpertsDownRowsQFn* DownRowsQOf(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &experts_avx512::DownRowsQ;
    if (isa == CpuIsa::kAvx2) return &experts_avx2::DownRowsQ;
  }
  return &experts_baseline::DownRowsQ;
}
ExpertsPermuteInt4Fn* PermuteInt4Of(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &experts_avx512::PermuteInt4;
    if (isa == CpuIsa::kAvx2) return &experts_avx2::PermuteInt4;
  }
  return &experts_baseline::PermuteInt4;
}

// Expert e's quantized [rows, K] matrix of `q` (bits per value) with its scales.
QRowsView QuantView(const int8_t* q, const float* scales, int bits, int64_t block_size, int64_t e,
                    int64_t rows, int64_t K) {
  QRowsView v;
  v.row_bytes = bits == 4 ? K / 2 : K;
  v.block = block_size > 0 ? block_size : K;
  v.groups = block_size > 0 ? K / block_size : 1;
  v.w = q + e * rows * v.row_bytes;
  v.scales = scales + e * rows * v.groups;
  return v;
}

// Expert e's bfloat16 [rows, K] matrix (no scales).
QRowsView Bf16View(const uint16_t* w, int64_t e, int64_t rows, int64_t K) {
  QRowsView v;
  v.row_bytes = 2 * K;
  v.block = K;
  v.w = reinterpret_cast<const int8_t*>(w + e * rows * K);
  return v;
}

int64_t IndexAt(const void* idx, bool index64, int64_t i) {
  return index64 ? static_cast<const int64_t*>(idx)[i] : static_cast<const int32_t*>(idx)[i];
}

}  // namespace

bool SortPairsByExpert(const MoeRoutedExpertsParams& params, const void* expert_idx,
                       std::vector<int64_t>* active, std::vector<int64_t>* begin, std::vector<int64_t>* pair,
                       int64_t* bad_pair) {
  const int64_t P = params.tokens * params.k, E = params.experts;
  std::vector<int64_t> count(static_cast<size_t>(E) + 1, 0);
  for (int64_t i = 0; i < P; ++i) {
    const int64_t e = IndexAt(expert_idx, params.index64, i);
    if (e < 0 || e >= E) {
      if (bad_pair != nullptr) *bad_pair = i;
      return false;
    }
    ++count[static_cast<size_t>(e) + 1];
  }
  active->clear();
  begin->clear();
  for (int64_t e = 0; e < E; ++e) {
    if (count[e + 1] > 0) {
      active->push_back(e);
      begin->push_back(count[e]);
    }
    count[e + 1] += count[e];  // count[e] = first sorted position of expert e
  }
  begin->push_back(P);
  pair->resize(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) (*pair)[count[IndexAt(expert_idx, params.index64, i)]++] = i;
  return true;
}

std::vector<ExpertRowsItem> SplitExpertRows(const std::vector<int64_t>& pairs, int64_t units,
                                            int64_t max_units) {
  const int64_t experts = static_cast<int64_t>(pairs.size()) - 1;
  auto work = [&](int64_t a) { return pairs[a + 1] - pairs[a] + kUnitWeightWork; };  // per unit
  int64_t total = 0;
  for (int64_t a = 0; a < experts; ++a) total += units * work(a);
  const int64_t target = std::max(total / kMinUpItems, max_units * (1 + kUnitWeightWork));
  std::vector<int64_t> order(static_cast<size_t>(experts));
  for (int64_t a = 0; a < experts; ++a) order[a] = a;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return work(a) > work(b); });
  std::vector<ExpertRowsItem> items;
  for (const int64_t a : order) {
    const int64_t step = max_units * work(a) > target ? 1 : max_units;
    for (int64_t u = 0; u < units; u += step) items.push_back({a, u, std::min(units, u + step)});
  }
  return items;
}

std::pair<int64_t, int64_t> MoeRoutedExpertsPlan::RowsOf(const UpItem& item) const {
  return {item.begin * kUpRowsPerUnit, std::min(p_.inter, item.end * kUpRowsPerUnit)};
}

bool MoeRoutedExpertsPlan::UseIsa(CpuIsa isa) {
  if (!CpuRuns(isa)) return false;
  isa_ = isa;
  if (p_.bf16_weights) ChooseBf16Dot();
  return true;
}

void MoeRoutedExpertsPlan::ChooseBf16Dot() {
  bf16_dot_ = Bf16DotOn(isa_);
  const int64_t P = p_.tokens * p_.k;
  const bool dots = bf16_dot_ != Bf16Dot::kWiden;
  act_.resize(dots ? 0 : static_cast<size_t>(P * p_.inter));
  actb_.resize(dots ? static_cast<size_t>(P * p_.inter) : 0);
}

bool MoeRoutedExpertsPlan::Build(const MoeRoutedExpertsParams& params, const void* expert_idx,
                                 int64_t* bad_pair) {
  p_ = params;
  isa_ = ActiveCpuIsa();
  if (!SortPairsByExpert(params, expert_idx, &active_, &begin_, &pair_, bad_pair)) return false;
  const int64_t P = params.tokens * params.k;
  items_ = SplitExpertRows(begin_, (params.inter + kUpRowsPerUnit - 1) / kUpRowsPerUnit, kUpUnitsPerItem);
  if (params.bf16_weights) {
    ChooseBf16Dot();
  } else {
    act_.resize(static_cast<size_t>(P * params.inter));
  }
  return true;
}

void MoeRoutedExpertsPlan::PrepareInputs(const MoeRoutedExpertsBuffers& b) {
  const int64_t H = p_.hidden;
  if (p_.bf16_weights && bf16_dot_ != Bf16Dot::kWiden) {
    xb_.resize(static_cast<size_t>(p_.tokens * H));
    for (int64_t i = 0; i < p_.tokens * H; ++i) xb_[i] = FloatToBf16(b.x[i]);
    return;
  }
  if (p_.bf16_weights) {
    xperm_.resize(static_cast<size_t>(p_.tokens * H));
    for (int64_t i = 0; i < p_.tokens * H; ++i) xperm_[i] = Bf16ToFloat(FloatToBf16(b.x[i]));
    return;
  }
  if (p_.quant_bits != 4) return;
  xperm_.resize(static_cast<size_t>(p_.tokens * H));
  ExpertsPermuteInt4Fn* const permute = PermuteInt4Of(isa_);
  for (int64_t t = 0; t < p_.tokens; ++t) {
    permute(b.x + t * H, xperm_.data() + t * H, H, p_.block_size > 0 ? p_.block_size : H);
  }
}

int64_t ColumnsPerChunk(int64_t hidden, int64_t bytes_per_column, int64_t bytes) {
  const int64_t per_column = std::max<int64_t>(1, bytes_per_column);
  const int64_t by_count =
      std::max((hidden + kMinColumnChunks - 1) / kMinColumnChunks, kMinChunkBytes / per_column);
  return std::max<int64_t>(16, (std::min(bytes / per_column, by_count) + 15) / 16 * 16);
}

int64_t MoeRoutedExpertsPlan::ColumnsPerChunk(int64_t bytes) const {
  const int64_t bits = p_.bf16_weights ? kBf16Bits : p_.quant_bits == 0 ? 32 : p_.quant_bits;
  return cpu::ColumnsPerChunk(p_.hidden, active_experts() * p_.inter * bits / 8, bytes);
}

ExpertGlu MoeRoutedExpertsPlan::GluOf(const MoeRoutedExpertsBuffers& b, int64_t e) const {
  ExpertGlu glu;
  glu.limit = p_.swiglu_limit;
  glu.alpha = p_.activation_alpha;
  glu.beta = p_.activation_beta;
  glu.bias = b.gate_up_bias == nullptr ? nullptr : b.gate_up_bias + e * 2 * p_.inter;
  return glu;
}

void MoeRoutedExpertsPlan::UpItems(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end) {
  const int64_t H = p_.hidden, I = p_.inter, k = p_.k;
  if (p_.bf16_weights && bf16_dot_ != Bf16Dot::kWiden) {
    Bf16UpRowsFn* const up_rows = Bf16UpRowsOf(bf16_dot_);
    std::vector<const uint16_t*> rows;
    std::vector<float> dots;
    for (int64_t it = begin; it < end; ++it) {
      const UpItem& item = items_[static_cast<size_t>(it)];
      const auto [e, first, n] = PairsOf(item);
      const auto [i0, i1] = RowsOf(item);
      rows.resize(static_cast<size_t>(n));
      for (int64_t q = 0; q < n; ++q) rows[q] = xb_.data() + pair_[first + q] / k * H;
      dots.resize(static_cast<size_t>(2 * (i1 - i0) * n));
      up_rows(b.gate_up_bf16 + e * 2 * I * H, H, rows.data(), n, i0, i1, GluOf(b, e),
              actb_.data() + first * I, I, dots.data());
    }
    return;
  }
  ExpertsUpRowsFn* const up_rows = UpRowsOf(isa_);
  ExpertsUpRowsQFn* const up_rows_q = UpRowsQOf(isa_);
  const int bits = p_.bf16_weights ? kBf16Bits : p_.quant_bits;
  const float* x = bits == 4 || bits == kBf16Bits ? xperm_.data() : b.x;
  // 4-bit down rows read the activations in their tiles' order (blocks of I when per channel)
  const int64_t down_block = bits == 4 ? (p_.block_size > 0 ? p_.block_size : I) : 0;
  std::vector<const float*> rows;
  std::vector<float> dots;
  for (int64_t it = begin; it < end; ++it) {
    const UpItem& item = items_[static_cast<size_t>(it)];
    const auto [e, first, n] = PairsOf(item);
    const auto [i0, i1] = RowsOf(item);
    rows.resize(static_cast<size_t>(n));
    for (int64_t q = 0; q < n; ++q) rows[q] = x + pair_[first + q] / k * H;
    float* act = act_.data() + first * I;
    dots.resize(static_cast<size_t>(2 * (i1 - i0) * n));
    if (bits == 0) {
      const float* fc1 = b.gate_up + e * 2 * I * H;
      up_rows(fc1, H, rows.data(), n, i0, i1, GluOf(b, e), act, I, dots.data());
    } else {
      const QRowsView fc1 = bits == kBf16Bits
                                ? Bf16View(b.gate_up_bf16, e, 2 * I, H)
                                : QuantView(b.gate_up_q, b.gate_up_scales, bits, p_.block_size, e, 2 * I, H);
      up_rows_q(fc1, bits, H, rows.data(), n, i0, i1, GluOf(b, e), act, I, down_block, dots.data());
    }
  }
}

void MoeRoutedExpertsPlan::DownColumns(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end) const {
  const int64_t H = p_.hidden, I = p_.inter, k = p_.k;
  for (int64_t t = 0; t < p_.tokens; ++t) std::fill(b.y + t * H + begin, b.y + t * H + end, 0.f);
  ExpertsDownRowsFn* const down_rows = DownRowsOf(isa_);
  ExpertsDownRowsQFn* const down_rows_q = DownRowsQOf(isa_);
  Bf16DownRowsFn* const down_rows_bf16 =
      p_.bf16_weights && bf16_dot_ != Bf16Dot::kWiden ? Bf16DownRowsOf(bf16_dot_) : nullptr;
  std::vector<const uint16_t*> actb;
  std::vector<const float*> act;
  std::vector<float*> out;
  std::vector<float> scale;
  for (int64_t a = 0; a < active_experts(); ++a) {
    const int64_t e = active_[static_cast<size_t>(a)];
    const int64_t first = begin_[static_cast<size_t>(a)];
    const int64_t n = begin_[static_cast<size_t>(a) + 1] - first;
    act.resize(static_cast<size_t>(n));
    out.resize(static_cast<size_t>(n));
    scale.resize(static_cast<size_t>(n));
    actb.resize(down_rows_bf16 != nullptr ? static_cast<size_t>(n) : 0);
    for (int64_t q = 0; q < n; ++q) {
      const int64_t pair = pair_[first + q];
      if (down_rows_bf16 != nullptr) {
        actb[q] = actb_.data() + (first + q) * I;
      } else {
        act[q] = act_.data() + (first + q) * I;
      }
      out[q] = b.y + pair / k * H;
      scale[q] = b.routing_weights[pair];
    }
    if (down_rows_bf16 != nullptr) {
      down_rows_bf16(b.down_bf16 + e * H * I, I, actb.data(), scale.data(), out.data(), n, begin, end);
    } else if (p_.bf16_weights) {
      down_rows_q(Bf16View(b.down_bf16, e, H, I), kBf16Bits, I, act.data(), scale.data(), out.data(), n,
                  begin, end);
    } else if (p_.quant_bits == 0) {
      down_rows(b.down + e * H * I, I, act.data(), scale.data(), out.data(), n, begin, end);
    } else {
      const QRowsView fc2 = QuantView(b.down_q, b.down_scales, p_.quant_bits, p_.block_size, e, H, I);
      down_rows_q(fc2, p_.quant_bits, I, act.data(), scale.data(), out.data(), n, begin, end);
    }
    if (b.down_bias != nullptr) {  // the expert's bias, weighted like its output
      const float* bias = b.down_bias + e * H;
      for (int64_t q = 0; q < n; ++q) {
        for (int64_t h = begin; h < end; ++h) out[q][h] += scale[q] * bias[h];
      }
    }
  }
}

bool MoeRoutedExperts(const MoeRoutedExpertsParams& params, const MoeRoutedExpertsBuffers& buffers,
                      int64_t* bad_pair) {
  MoeRoutedExpertsPlan plan;
  if (!plan.Build(params, buffers.expert_idx, bad_pair)) return false;
  plan.PrepareInputs(buffers);
  plan.UpItems(buffers, 0, plan.num_up_items());
  plan.DownColumns(buffers, 0, params.hidden);
  return true;
}

}  // namespace ascend_moe::cpu
