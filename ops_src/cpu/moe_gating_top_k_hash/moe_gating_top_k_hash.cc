// CPU kernel of MoeGatingTopKHash. See the header and docs/operators.md §1.2.
//
// Per row: widen x to float32, normalise it into the scores s (vectorisable exp / log1p,
// accurate to about one float32 ulp), map the selection scores b = s + bias to order-preserving
// int32 keys (NaN below -inf), keep the best groups, bound the k-th largest key from block
// maxima and rank the few keys above the bound (no sort of the row), then gather, renormalise
// and scale the weights. Hash rows of sigmoid / sqrt-softplus routers compute only the k scores
// they use (unless out_flag asks for all of them). The row code (ops_src/cpu/moe_gating_top_k_hash/) is built
// once per instruction-set path (isa.h: baseline, AVX2 + FMA, AVX-512), chosen at run time, so
// the library runs on any x86-64 CPU. Expert sets follow the same rules on every path; scores
// and weights differ by a few ulp between paths (FMA, the reciprocal estimate, the softmax
// summation width; docs/kernel.md). This file holds the dispatch, the scratch and the messages.
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <vector>

#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash_paths.h"

namespace ascend_moe::cpu {

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

// The scratch rows start on a cache line, so that the row code's full-register loads and stores
// (64 bytes in the AVX-512 build) of keys and scores do not straddle two lines.
constexpr size_t kAlignFloats = 16;
template <typename T>
T* AlignUp(T* p) {
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<T*>((a + 63) & ~uintptr_t{63});
}

// The row code of a path this library has.
GatingRowsFn* RowsOf(CpuIsa isa) {
  if constexpr (kCpuX86Paths) {
    if (isa == CpuIsa::kAvx512) return &gating_avx512::Rows;
    if (isa == CpuIsa::kAvx2) return &gating_avx2::Rows;
  }
  return &gating_baseline::Rows;
}

// Narrow selection on AMD CPUs (Zen 4 executes a 512-bit permute or compression as two 256-bit
// halves: the AVX2 build's selection measured faster there), unless ASCEND_MOE_CPU_SELECT says.
GatingSelect ChooseSelect() {
  const char* select = std::getenv("ASCEND_MOE_CPU_SELECT");
  if (select != nullptr && std::strcmp(select, "wide") == 0) return GatingSelect::kWide;
  if (select != nullptr && std::strcmp(select, "narrow") == 0) return GatingSelect::kNarrow;
  return IsAmdCpu() ? GatingSelect::kNarrow : GatingSelect::kWide;
}

}  // namespace

GatingSelect MoeGatingTopKHashSelect() {
  static const GatingSelect select = ChooseSelect();
  return select;
}

bool MoeGatingTopKHashRowsWithIsa(CpuIsa isa, const MoeGatingTopKHashParams& params,
                                  const MoeGatingTopKHashInputs& inputs,
                                  const MoeGatingTopKHashOutputs& outputs, int64_t begin, int64_t end,
                                  MoeGatingTopKHashError* error, GatingSelect select) {
  if (!CpuRuns(isa)) return false;
  *error = {};
  if (begin >= end) return true;
  const size_t E = static_cast<size_t>(params.experts);
  const size_t G = static_cast<size_t>(params.group_count);
  Scratch& scratch = ThreadScratch();
  if (scratch.floats.size() < 4 * E + kAlignFloats) scratch.floats.resize(4 * E + kAlignFloats);
  if (scratch.ints.size() < 4 * E + G + 1 + kAlignFloats) {
    scratch.ints.resize(4 * E + G + 1 + kAlignFloats);
  }
  float* f = AlignUp(scratch.floats.data());
  int32_t* i = AlignUp(scratch.ints.data());
  if (select == GatingSelect::kAuto) select = MoeGatingTopKHashSelect();
  const bool narrow = select == GatingSelect::kNarrow;
  *error = RowsOf(isa)(params, inputs, outputs, begin, end, f, i, narrow);
  return true;
}

MoeGatingTopKHashError MoeGatingTopKHashRows(const MoeGatingTopKHashParams& params,
                                             const MoeGatingTopKHashInputs& inputs,
                                             const MoeGatingTopKHashOutputs& outputs, int64_t begin,
                                             int64_t end) {
  MoeGatingTopKHashError error;
  MoeGatingTopKHashRowsWithIsa(ActiveCpuIsa(), params, inputs, outputs, begin, end, &error);
  return error;
}

std::string DescribeMoeGatingTopKHashError(const MoeGatingTopKHashError& error,
                                           const MoeGatingTopKHashParams& params, int64_t table_rows) {
  std::ostringstream os;
  os << "MoeGatingTopKHash: ";
  switch (error.kind) {
    case MoeGatingTopKHashError::kTokenIdOutOfRange:
      os << "input 'input_ids' value at row " << error.row << " is out of range [0, " << table_rows
         << "), got " << error.value;
      break;
    case MoeGatingTopKHashError::kTableEntryOutOfRange:
      os << "input 'tid2eid' entry [" << error.token_id << ", " << error.column << "] (used by row "
         << error.row << ") is out of range [0, " << params.experts << "), got " << error.value;
      break;
    default:
      os << "no error";
      break;
  }
  return os.str();
}

}  // namespace ascend_moe::cpu
