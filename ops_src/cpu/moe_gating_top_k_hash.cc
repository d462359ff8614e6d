// CPU kernel of MoeGatingTopKHash. See the header and docs/operators.md §1.2.
//
// Per row: widen x to float32, normalise it into the scores s (vectorisable exp / log1p,
// accurate to about one float32 ulp), map the selection scores b = s + bias to order-preserving
// int32 keys (NaN below -inf), keep the best groups, bound the k-th largest key from block
// maxima and rank the few keys above the bound (no sort of the row), then gather, renormalise
// and scale the weights. Hash rows of sigmoid / sqrt-softplus routers compute only the k scores
// they use (unless out_flag asks for all of them). The row code (moe_gating_top_k_hash_rows.inc)
// is compiled three times on x86-64 with GCC: for the baseline instruction set, for AVX2 + FMA
// and for AVX-512 (F, BW, DQ, VL), chosen at run time, so the library runs on any x86-64 CPU.
// Expert sets follow the same rules on every path; scores and weights differ by a few ulp
// between paths (FMA, the reciprocal estimate, the softmax summation width; docs/kernel.md).
#include "ops_src/cpu/moe_gating_top_k_hash.h"

#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "ops_src/cpu/half.h"

#if defined(__SSE2__)
#include <immintrin.h>  // sqrt of a whole vector (the row code's Sqrt)
#endif

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ASCEND_MOE_GATING_AVX2 1
#else
#define ASCEND_MOE_GATING_AVX2 0
#endif

namespace ascend_moe::cpu {

#define ASCEND_MOE_GATING_LANES 4
namespace gating_baseline {
#include "ops_src/cpu/moe_gating_top_k_hash_rows.inc"
}  // namespace gating_baseline
#undef ASCEND_MOE_GATING_LANES

#if ASCEND_MOE_GATING_AVX2
#pragma GCC push_options
#pragma GCC target("avx2,fma")
#define ASCEND_MOE_GATING_LANES 8
namespace gating_avx2 {
#include "ops_src/cpu/moe_gating_top_k_hash_rows.inc"
}  // namespace gating_avx2
#undef ASCEND_MOE_GATING_LANES
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw,avx512dq,avx512vl,avx2,fma")
#pragma GCC diagnostic push
// GCC 12: the intrinsics' _mm512_undefined_ps() pass-through operands read as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ASCEND_MOE_GATING_LANES 16
#define ASCEND_MOE_GATING_NARROW gating_avx2
namespace gating_avx512 {
#include "ops_src/cpu/moe_gating_top_k_hash_rows.inc"
}  // namespace gating_avx512
#undef ASCEND_MOE_GATING_NARROW
#undef ASCEND_MOE_GATING_LANES
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace {

// Per-thread scratch, grown on demand and reused across chunks and calls.
struct Scratch {
  std::vector<float> floats;
  std::vector<int32_t> ints;
};

Scratch& ThreadScratch() {
  thread_local Scratch scratch;
  return scratch;
}

// The best build the CPU runs.
GatingIsa BestIsa() {
#if ASCEND_MOE_GATING_AVX2
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return GatingIsa::kBaseline;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return GatingIsa::kAvx512;
  }
  return GatingIsa::kAvx2;
#else
  return GatingIsa::kBaseline;
#endif
}

// The best build, or a lower one named by the environment variable ASCEND_MOE_CPU_ISA
// ("baseline", "avx2"; read once), so that tests and benchmarks cover every path the CPU has.
// A path the CPU lacks is never taken.
GatingIsa ChooseIsa() {
  const GatingIsa best = BestIsa();
  const char* isa = std::getenv("ASCEND_MOE_CPU_ISA");
  GatingIsa wanted = best;
  if (isa != nullptr && std::strcmp(isa, "baseline") == 0) wanted = GatingIsa::kBaseline;
  if (isa != nullptr && std::strcmp(isa, "avx2") == 0) wanted = GatingIsa::kAvx2;
  return static_cast<int>(wanted) < static_cast<int>(best) ? wanted : best;
}

// Narrow selection on AMD CPUs (Zen 4 executes a 512-bit permute or compression as two 256-bit
// halves: the AVX2 build's selection measured faster there), unless ASCEND_MOE_CPU_SELECT says.
GatingSelect ChooseSelect() {
  const char* select = std::getenv("ASCEND_MOE_CPU_SELECT");
  if (select != nullptr && std::strcmp(select, "wide") == 0) return GatingSelect::kWide;
  if (select != nullptr && std::strcmp(select, "narrow") == 0) return GatingSelect::kNarrow;
#if ASCEND_MOE_GATING_AVX2
  __builtin_cpu_init();
  if (__builtin_cpu_is("amd")) return GatingSelect::kNarrow;
#endif
  return GatingSelect::kWide;
}

}  // namespace

GatingSelect MoeGatingTopKHashSelect() {
  static const GatingSelect select = ChooseSelect();
  return select;
}

GatingIsa MoeGatingTopKHashIsa() {
  static const GatingIsa isa = ChooseIsa();
  return isa;
}

const char* GatingIsaName(GatingIsa isa) {
  switch (isa) {
    case GatingIsa::kAvx512: return "avx512";
    case GatingIsa::kAvx2: return "avx2";
    default: return "baseline";
  }
}

bool MoeGatingTopKHashRowsWithIsa(GatingIsa isa, const MoeGatingTopKHashParams& params,
                                  const MoeGatingTopKHashInputs& inputs,
                                  const MoeGatingTopKHashOutputs& outputs, int64_t begin,
                                  int64_t end, MoeGatingTopKHashError* error,
                                  GatingSelect select) {
  static const GatingIsa best = BestIsa();
  if (static_cast<int>(isa) > static_cast<int>(best)) return false;
  *error = {};
  if (begin >= end) return true;
  const size_t E = static_cast<size_t>(params.experts);
  const size_t G = static_cast<size_t>(params.group_count);
  Scratch& scratch = ThreadScratch();
  if (scratch.floats.size() < 4 * E) scratch.floats.resize(4 * E);
  if (scratch.ints.size() < 4 * E + G + 1) scratch.ints.resize(4 * E + G + 1);
  float* f = scratch.floats.data();
  int32_t* i = scratch.ints.data();
  if (select == GatingSelect::kAuto) select = MoeGatingTopKHashSelect();
  const bool narrow = select == GatingSelect::kNarrow;
  switch (isa) {
#if ASCEND_MOE_GATING_AVX2
    case GatingIsa::kAvx512:
      *error = gating_avx512::Rows(params, inputs, outputs, begin, end, f, i, narrow);
      break;
    case GatingIsa::kAvx2:
      *error = gating_avx2::Rows(params, inputs, outputs, begin, end, f, i, false);
      break;
#endif
    default:
      *error = gating_baseline::Rows(params, inputs, outputs, begin, end, f, i, false);
      break;
  }
  return true;
}

MoeGatingTopKHashError MoeGatingTopKHashRows(const MoeGatingTopKHashParams& params,
                                             const MoeGatingTopKHashInputs& inputs,
                                             const MoeGatingTopKHashOutputs& outputs,
                                             int64_t begin, int64_t end) {
  MoeGatingTopKHashError error;
  MoeGatingTopKHashRowsWithIsa(MoeGatingTopKHashIsa(), params, inputs, outputs, begin, end,
                               &error);
  return error;
}

std::string DescribeMoeGatingTopKHashError(const MoeGatingTopKHashError& error,
                                           const MoeGatingTopKHashParams& params,
                                           int64_t table_rows) {
  std::ostringstream os;
  os << "MoeGatingTopKHash: ";
  switch (error.kind) {
    case MoeGatingTopKHashError::kTokenIdOutOfRange:
      os << "input 'input_ids' value at row " << error.row << " is out of range [0, "
         << table_rows << "), got " << error.value;
      break;
    case MoeGatingTopKHashError::kTableEntryOutOfRange:
      os << "input 'tid2eid' entry [" << error.token_id << ", " << error.column
         << "] (used by row " << error.row << ") is out of range [0, " << params.experts
         << "), got " << error.value;
      break;
    default:
      os << "no error";
      break;
  }
  return os.str();
}

}  // namespace ascend_moe::cpu
