// The AVX-512 build of the MoeRoutedExperts tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and moe_routed_experts_tiles.inc for the code.
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "ops_src/cpu/moe_routed_experts_paths.h"

ASCEND_MOE_CPU_TARGET_AVX512_BEGIN
namespace ascend_moe::cpu::experts_avx512 {

constexpr CpuIsa kIsa = CpuIsa::kAvx512;
constexpr int kLanes = 16;

using V = __m512;
inline V Zero() { return _mm512_setzero_ps(); }
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline V LoadTail(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
}
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline V Add(V a, V b) { return _mm512_add_ps(a, b); }
inline float Sum(V v) { return _mm512_reduce_add_ps(v); }

#include "ops_src/cpu/moe_routed_experts_tiles.inc"

}  // namespace ascend_moe::cpu::experts_avx512
ASCEND_MOE_CPU_TARGET_END
#endif
