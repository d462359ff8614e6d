// CPU kernel of MoeFinalizeRoutingV2 and MoeTokenUnpermute. See the header and docs/operators.md §8, §9.
//
// The row loop (weighted_gather_rows.inc) is compiled three times on x86-64 with GCC:
// portable C++, AVX2 + F16C + FMA and AVX-512F, chosen at run time (ASCEND_MOE_CPU_ISA=baseline
// or avx2 selects a lower one). The paths differ only in whether multiply-adds are fused (the
// last float32 bit before the final rounding).
#include "ops_src/cpu/weighted_gather.h"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops_src/cpu/half.h"

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ASCEND_MOE_WG_X86 1
#include <immintrin.h>
#else
#define ASCEND_MOE_WG_X86 0
#endif

namespace ascend_moe::cpu {

namespace {

// Bf16ToFloat / Fp16ToFloat (exact widening) come from half.h.

inline float WeightAt(const WeightedGatherParams& p, const void* weights, int64_t i) {
  switch (p.weight_type) {
    case RowType::kFloat32:
      return static_cast<const float*>(weights)[i];
    case RowType::kFloat16:
      return Fp16ToFloat(static_cast<const uint16_t*>(weights)[i]);
    case RowType::kBFloat16:
      return Bf16ToFloat(static_cast<const uint16_t*>(weights)[i]);
  }
  return 0.0f;
}

}  // namespace

int64_t IndexAt(const void* index, IndexType type, int64_t i) {
  return type == IndexType::kInt32 ? static_cast<const int32_t*>(index)[i]
                                   : static_cast<const int64_t*>(index)[i];
}

// The 16-float vectors stay inside always-inline functions: no call passes one by value.
#pragma GCC diagnostic ignored "-Wpsabi"

#define ASCEND_MOE_WG_ISA 0
namespace wg_baseline {
#include "ops_src/cpu/weighted_gather_rows.inc"
}  // namespace wg_baseline
#undef ASCEND_MOE_WG_ISA

#if ASCEND_MOE_WG_X86
#pragma GCC push_options
#pragma GCC target("avx2,f16c,fma")
#define ASCEND_MOE_WG_ISA 1
namespace wg_avx2 {
#include "ops_src/cpu/weighted_gather_rows.inc"
}  // namespace wg_avx2
#undef ASCEND_MOE_WG_ISA
#pragma GCC pop_options

#pragma GCC push_options
#pragma GCC target("avx512f,avx2,f16c,fma")
#pragma GCC diagnostic push
// GCC 12: the intrinsics' _mm512_undefined_ps() pass-through operands read as uninitialised.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ASCEND_MOE_WG_ISA 2
namespace wg_avx512 {
#include "ops_src/cpu/weighted_gather_rows.inc"
}  // namespace wg_avx512
#undef ASCEND_MOE_WG_ISA
#pragma GCC diagnostic pop
#pragma GCC pop_options
#endif

namespace {

enum class Isa { kBaseline, kAvx2, kAvx512 };

Isa ChooseIsa() {
#if ASCEND_MOE_WG_X86
  __builtin_cpu_init();
  Isa best = Isa::kBaseline;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("f16c")) {
    best = __builtin_cpu_supports("avx512f") ? Isa::kAvx512 : Isa::kAvx2;
  }
  const char* isa = std::getenv("ASCEND_MOE_CPU_ISA");
  if (isa != nullptr && std::strcmp(isa, "baseline") == 0) return Isa::kBaseline;
  if (isa != nullptr && std::strcmp(isa, "avx2") == 0 && best == Isa::kAvx512) return Isa::kAvx2;
  return best;
#else
  return Isa::kBaseline;
#endif
}

}  // namespace

void WeightedGatherRows(const WeightedGatherParams& params, const WeightedGatherBuffers& buffers,
                        int64_t begin, int64_t end) {
  static const Isa isa = ChooseIsa();
  if (begin >= end || params.hidden == 0) return;
#if ASCEND_MOE_WG_X86
  if (isa == Isa::kAvx512) return wg_avx512::Rows(params, buffers, begin, end);
  if (isa == Isa::kAvx2) return wg_avx2::Rows(params, buffers, begin, end);
#endif
  (void)isa;
  wg_baseline::Rows(params, buffers, begin, end);
}

int64_t WeightedGatherRowsPerChunk(const WeightedGatherParams& p, int64_t chunk_bytes) {
  const int64_t row_bytes = p.hidden * RowTypeBytes(p.row_type);
  const int64_t per_row = row_bytes * (p.k * (p.has_bias ? 2 : 1) + p.num_base + 1) + 1;
  const int64_t rows = chunk_bytes / per_row;
  return rows < 1 ? 1 : rows;
}

int64_t FirstReadSlotOutside(const WeightedGatherParams& p, const WeightedGatherBuffers& b, int64_t low,
                             int64_t high) {
  const int64_t n = p.num_out_rows * p.k;
  for (int64_t pos = 0; pos < n; ++pos) {
    if (p.skip_zero_weight && p.has_weights) {
      const int64_t slot = p.token_major ? pos : (pos % p.num_out_rows) * p.k + pos / p.num_out_rows;
      if (WeightAt(p, b.weights, slot) == 0.0f) continue;
    }
    const int64_t v = IndexAt(b.row_index, p.index_type, pos);
    if (v < low || v >= high) return pos;
  }
  return -1;
}

int64_t FirstIndexOutside(const void* index, IndexType type, int64_t n, int64_t low, int64_t high) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t v = IndexAt(index, type, i);
    if (v < low || v >= high) return i;
  }
  return -1;
}

}  // namespace ascend_moe::cpu
