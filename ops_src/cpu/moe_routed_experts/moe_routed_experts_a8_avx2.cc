// The AVX2 builds of the int8-activation tiles (moe_routed_experts_a8_tiles.inc): vpmaddubsw +
// vpmaddwd (signed int8 weights), and an exact AVX2 emulation of vpdpbusd over the VNNI paths'
// encoding (int8 weights + 128), which lets any AVX2 CPU test that encoding. Empty where the
// library has no x86 paths (isa.h).
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

#define ASCEND_MOE_A8_SIMD 1
ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::experts_a8_maddubs {
constexpr A8Dot kDot = A8Dot::kMaddubs;
inline __m256i DpBusd(__m256i acc, __m256i, __m256i) { return acc; }  // not used on this path
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8_tiles.inc"
}  // namespace ascend_moe::cpu::experts_a8_maddubs

namespace ascend_moe::cpu::experts_a8_emulated_vnni {
constexpr A8Dot kDot = A8Dot::kEmulatedVnni;
// acc + sum of the four u8 x s8 products of each dword, exact: even and odd bytes widened to 16
// bits, two vpmaddwd (products <= 255 * 128).
inline __m256i DpBusd(__m256i acc, __m256i u, __m256i s) {
  const __m256i low8 = _mm256_set1_epi16(0x00FF);
  const __m256i ue = _mm256_and_si256(u, low8), uo = _mm256_srli_epi16(u, 8);
  const __m256i se = _mm256_srai_epi16(_mm256_slli_epi16(s, 8), 8), so = _mm256_srai_epi16(s, 8);
  return _mm256_add_epi32(acc, _mm256_add_epi32(_mm256_madd_epi16(ue, se), _mm256_madd_epi16(uo, so)));
}
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8_tiles.inc"
}  // namespace ascend_moe::cpu::experts_a8_emulated_vnni
ASCEND_MOE_CPU_TARGET_END
#undef ASCEND_MOE_A8_SIMD
#endif
