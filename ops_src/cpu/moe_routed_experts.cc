// CPU kernel of MoeRoutedExperts. See the header and docs/operators.md §3.
//
// The tiles (moe_routed_experts_tiles.inc) are compiled three times on x86-64 with GCC: portable
// C++, AVX2 + FMA and AVX-512F, chosen at run time, so the library runs on any x86-64 CPU. The
// paths differ only in the dot products' summation order (a few float32 ulp).
#include "ops_src/cpu/moe_routed_experts.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ASCEND_MOE_EXPERTS_X86 1
#include <immintrin.h>
#else
#define ASCEND_MOE_EXPERTS_X86 0
#endif
#if defined(__SSE2__)
#include <emmintrin.h>  // the baseline tiles' registers on x86-64
#endif

namespace ascend_moe::cpu {

#define ASCEND_MOE_EXPERTS_LANES 4
namespace experts_baseline {
#include "ops_src/cpu/moe_routed_experts_tiles.inc"
}  // namespace experts_baseline
#undef ASCEND_MOE_EXPERTS_LANES

#if ASCEND_MOE_EXPERTS_X86
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ASCEND_MOE_EXPERTS_LANES 8
namespace experts_avx2 {
#include "ops_src/cpu/moe_routed_experts_tiles.inc"
}  // namespace experts_avx2
#undef ASCEND_MOE_EXPERTS_LANES
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,fma")
#pragma GCC diagnostic push
// GCC 12: the intrinsics' _mm512_undefined_ps() pass-through operands read as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ASCEND_MOE_EXPERTS_LANES 16
namespace experts_avx512 {
#include "ops_src/cpu/moe_routed_experts_tiles.inc"
}  // namespace experts_avx512
#undef ASCEND_MOE_EXPERTS_LANES
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace {

constexpr int64_t kUpRowsPerItem = 64;  // intermediate rows per phase-1 work item (a thread's unit)

ExpertsIsa BestIsa() {
#if ASCEND_MOE_EXPERTS_X86
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return ExpertsIsa::kBaseline;
  return __builtin_cpu_supports("avx512f") ? ExpertsIsa::kAvx512 : ExpertsIsa::kAvx2;
#else
  return ExpertsIsa::kBaseline;
#endif
}

// The best path, or a lower one named by ASCEND_MOE_CPU_ISA ("baseline", "avx2"; read once).
ExpertsIsa ChooseIsa() {
  const ExpertsIsa best = BestIsa();
  const char* isa = std::getenv("ASCEND_MOE_CPU_ISA");
  ExpertsIsa wanted = best;
  if (isa != nullptr && std::strcmp(isa, "baseline") == 0) wanted = ExpertsIsa::kBaseline;
  if (isa != nullptr && std::strcmp(isa, "avx2") == 0) wanted = ExpertsIsa::kAvx2;
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

int64_t IndexAt(const void* idx, bool index64, int64_t i) {
  return index64 ? static_cast<const int64_t*>(idx)[i] : static_cast<const int32_t*>(idx)[i];
}

}  // namespace

ExpertsIsa MoeRoutedExpertsIsa() {
  static const ExpertsIsa isa = ChooseIsa();
  return isa;
}

const char* ExpertsIsaName(ExpertsIsa isa) {
  switch (isa) {
    case ExpertsIsa::kAvx512: return "avx512";
    case ExpertsIsa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

bool MoeRoutedExpertsPlan::UseIsa(ExpertsIsa isa) {
  static const ExpertsIsa best = BestIsa();
  if (static_cast<int>(isa) > static_cast<int>(best)) return false;
  isa_ = isa;
  return true;
}

bool MoeRoutedExpertsPlan::Build(const MoeRoutedExpertsParams& params, const void* expert_idx,
                                 int64_t* bad_pair) {
  p_ = params;
  isa_ = MoeRoutedExpertsIsa();
  const int64_t P = params.tokens * params.k, E = params.experts;
  // Counting sort of the pairs by expert (stable: pairs of one expert stay in token order).
  std::vector<int64_t> count(static_cast<size_t>(E) + 1, 0);
  for (int64_t i = 0; i < P; ++i) {
    const int64_t e = IndexAt(expert_idx, params.index64, i);
    if (e < 0 || e >= E) {
      if (bad_pair != nullptr) *bad_pair = i;
      return false;
    }
    ++count[static_cast<size_t>(e) + 1];
  }
  active_.clear();
  begin_.clear();
  for (int64_t e = 0; e < E; ++e) {
    if (count[e + 1] > 0) {
      active_.push_back(e);
      begin_.push_back(count[e]);
    }
    count[e + 1] += count[e];  // count[e] = first sorted position of expert e
  }
  begin_.push_back(P);
  pair_.resize(static_cast<size_t>(P));
  for (int64_t i = 0; i < P; ++i) pair_[count[IndexAt(expert_idx, params.index64, i)]++] = i;
  items_.clear();
  for (int64_t a = 0; a < active_experts(); ++a) {
    for (int64_t r = 0; r < params.inter; r += kUpRowsPerItem) {
      items_.push_back({a, r, std::min(params.inter, r + kUpRowsPerItem)});
    }
  }
  act_.resize(static_cast<size_t>(P * params.inter));
  return true;
}

int64_t MoeRoutedExpertsPlan::ColumnsPerChunk(int64_t bytes) const {
  const int64_t per_column = std::max<int64_t>(1, active_experts() * p_.inter * 4);
  return std::max<int64_t>(16, (bytes / per_column + 3) / 4 * 4);
}

void MoeRoutedExpertsPlan::UpItems(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end) {
  const int64_t H = p_.hidden, I = p_.inter, k = p_.k;
  std::vector<const float*> rows;
  std::vector<float> dots;
  for (int64_t it = begin; it < end; ++it) {
    const UpItem& item = items_[static_cast<size_t>(it)];
    const int64_t e = active_[static_cast<size_t>(item.expert)];
    const int64_t first = begin_[static_cast<size_t>(item.expert)];
    const int64_t n = begin_[static_cast<size_t>(item.expert) + 1] - first;
    rows.resize(static_cast<size_t>(n));
    for (int64_t q = 0; q < n; ++q) rows[q] = b.x + pair_[first + q] / k * H;
    const float* fc1 = b.gate_up + e * 2 * I * H;
    float* act = act_.data() + first * I;
    dots.resize(static_cast<size_t>(2 * (item.row_end - item.row_begin) * n));
    switch (isa_) {
#if ASCEND_MOE_EXPERTS_X86
      case ExpertsIsa::kAvx512:
        experts_avx512::UpRows(fc1, H, rows.data(), n, item.row_begin, item.row_end, p_.swiglu_limit, act, I,
                               dots.data());
        break;
      case ExpertsIsa::kAvx2:
        experts_avx2::UpRows(fc1, H, rows.data(), n, item.row_begin, item.row_end, p_.swiglu_limit, act, I,
                             dots.data());
        break;
#endif
      default:
        experts_baseline::UpRows(fc1, H, rows.data(), n, item.row_begin, item.row_end, p_.swiglu_limit, act,
                                 I, dots.data());
    }
  }
}

void MoeRoutedExpertsPlan::DownColumns(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end) const {
  const int64_t H = p_.hidden, I = p_.inter, k = p_.k;
  for (int64_t t = 0; t < p_.tokens; ++t) std::fill(b.y + t * H + begin, b.y + t * H + end, 0.f);
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
    for (int64_t q = 0; q < n; ++q) {
      const int64_t pair = pair_[first + q];
      act[q] = act_.data() + (first + q) * I;
      out[q] = b.y + pair / k * H;
      scale[q] = b.routing_weights[pair];
    }
    const float* fc2 = b.down + e * H * I;
    switch (isa_) {
#if ASCEND_MOE_EXPERTS_X86
      case ExpertsIsa::kAvx512:
        experts_avx512::DownRows(fc2, I, act.data(), scale.data(), out.data(), n, begin, end);
        break;
      case ExpertsIsa::kAvx2:
        experts_avx2::DownRows(fc2, I, act.data(), scale.data(), out.data(), n, begin, end);
        break;
#endif
      default:
        experts_baseline::DownRows(fc2, I, act.data(), scale.data(), out.data(), n, begin, end);
    }
  }
}

bool MoeRoutedExperts(const MoeRoutedExpertsParams& params, const MoeRoutedExpertsBuffers& buffers,
                      int64_t* bad_pair) {
  MoeRoutedExpertsPlan plan;
  if (!plan.Build(params, buffers.expert_idx, bad_pair)) return false;
  plan.UpItems(buffers, 0, plan.num_up_items());
  plan.DownColumns(buffers, 0, params.hidden);
  return true;
}

}  // namespace ascend_moe::cpu
