// CPU kernel of MoeGatingTopKHash. See the header and docs/operators.md §1.2.
//
// Per row: widen x to float32, normalise it into the scores s (vectorisable exp / log1p,
// accurate to about one float32 ulp), map the selection scores b = s + bias to order-preserving
// int32 keys (NaN below -inf), keep the best groups, bound the k-th largest key from block
// maxima and rank the few keys above the bound (no sort of the row), then gather, renormalise
// and scale the weights. Hash rows of sigmoid / sqrt-softplus routers compute only the k scores
// they use (unless out_flag asks for all of them). The row code (moe_gating_top_k_hash_rows.inc)
// is compiled twice on x86-64 with GCC: for the baseline instruction set and for AVX2, chosen at
// run time, so the library runs on any x86-64 CPU. Both give bit-identical results (no FMA contraction, and the
// reductions fix their summation order in the source).
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
#pragma GCC target("avx2")
#define ASCEND_MOE_GATING_LANES 8
namespace gating_avx2 {
#include "ops_src/cpu/moe_gating_top_k_hash_rows.inc"
}  // namespace gating_avx2
#undef ASCEND_MOE_GATING_LANES
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

// The AVX2 build when the CPU has AVX2, unless the environment variable ASCEND_MOE_CPU_ISA is
// "baseline" (read once; lets tests cover the baseline build on AVX2 machines).
bool UseAvx2() {
#if ASCEND_MOE_GATING_AVX2
  static const bool avx2 = [] {
    const char* isa = std::getenv("ASCEND_MOE_CPU_ISA");
    if (isa != nullptr && std::strcmp(isa, "baseline") == 0) return false;
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return avx2;
#else
  return false;
#endif
}

}  // namespace

MoeGatingTopKHashError MoeGatingTopKHashRows(const MoeGatingTopKHashParams& params,
                                             const MoeGatingTopKHashInputs& inputs,
                                             const MoeGatingTopKHashOutputs& outputs,
                                             int64_t begin, int64_t end) {
  if (begin >= end) return {};
  const size_t E = static_cast<size_t>(params.experts);
  const size_t G = static_cast<size_t>(params.group_count);
  Scratch& scratch = ThreadScratch();
  if (scratch.floats.size() < 4 * E) scratch.floats.resize(4 * E);
  if (scratch.ints.size() < 4 * E + G + 1) scratch.ints.resize(4 * E + G + 1);
#if ASCEND_MOE_GATING_AVX2
  if (UseAvx2()) {
    return gating_avx2::Rows(params, inputs, outputs, begin, end, scratch.floats.data(),
                             scratch.ints.data());
  }
#endif
  (void)UseAvx2;
  return gating_baseline::Rows(params, inputs, outputs, begin, end, scratch.floats.data(),
                               scratch.ints.data());
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
