// The exact AVX2 emulation of the vdpbf16ps tiles (moe_routed_experts_bf16dot_tiles.inc): each
// step adds the odd input's product, then the even one's, to the lane's float32 accumulator (the
// products of two bfloat16 values are exact in float32, so a fused multiply-add rounds each sum
// once, as vdpbf16ps does), with subnormal inputs read as zero and subnormal sums flushed to zero
// (the instruction ignores MXCSR and does both). Lets any AVX2 CPU test the vdpbf16ps path's code.
// Empty where the library has no x86 paths (isa.h).
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::experts_bf16dot_emulated {

// The steps' floating-point environment: denormals are zero (DAZ) and flushed to zero (FTZ), MXCSR
// restored after.
class DotScope {
 public:
  DotScope() : saved_(_mm_getcsr()) { _mm_setcsr(saved_ | kDazFtz); }
  ~DotScope() { _mm_setcsr(saved_); }
  DotScope(const DotScope&) = delete;
  DotScope& operator=(const DotScope&) = delete;

 private:
  static constexpr unsigned kDazFtz = 0x8040u;  // FTZ (bit 15) | DAZ (bit 6)
  unsigned saved_;
};

// acc + a.odd * b.odd, then + a.even * b.even, per dword (bfloat16 pairs widened by masking and
// shifting: the odd input is the dword's high half).
inline __m256 DpBf16(__m256 acc, __m256i a, __m256i b) {
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  const __m256 a_odd = _mm256_castsi256_ps(_mm256_and_si256(a, high));
  const __m256 b_odd = _mm256_castsi256_ps(_mm256_and_si256(b, high));
  const __m256 a_even = _mm256_castsi256_ps(_mm256_slli_epi32(a, 16));
  const __m256 b_even = _mm256_castsi256_ps(_mm256_slli_epi32(b, 16));
  return _mm256_fmadd_ps(a_even, b_even, _mm256_fmadd_ps(a_odd, b_odd, acc));
}

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot_tiles.inc"

}  // namespace ascend_moe::cpu::experts_bf16dot_emulated
ASCEND_MOE_CPU_TARGET_END
#endif
