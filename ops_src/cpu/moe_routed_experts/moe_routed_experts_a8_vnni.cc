// The VNNI builds of the int8-activation tiles (moe_routed_experts_a8_tiles.inc): vpdpbusd on
// 256-bit registers, VEX-encoded (AVX-VNNI) or EVEX-encoded (AVX-512 VNNI + VL), int8 weights
// stored + 128. Empty where the library has no x86 paths (isa.h).
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

#define ASCEND_MOE_A8_SIMD 1
ASCEND_MOE_CPU_TARGET_AVXVNNI_BEGIN
namespace ascend_moe::cpu::experts_a8_avxvnni {
constexpr A8Dot kDot = A8Dot::kAvxVnni;
inline __m256i DpBusd(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_avx_epi32(acc, u, s); }
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8_tiles.inc"
}  // namespace ascend_moe::cpu::experts_a8_avxvnni
ASCEND_MOE_CPU_TARGET_END

ASCEND_MOE_CPU_TARGET_AVX512VNNI_BEGIN
namespace ascend_moe::cpu::experts_a8_avx512vnni {
constexpr A8Dot kDot = A8Dot::kAvx512Vnni;
inline __m256i DpBusd(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8_tiles.inc"
}  // namespace ascend_moe::cpu::experts_a8_avx512vnni
ASCEND_MOE_CPU_TARGET_END
#undef ASCEND_MOE_A8_SIMD
#endif
