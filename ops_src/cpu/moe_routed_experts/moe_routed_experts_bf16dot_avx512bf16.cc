// The vdpbf16ps build of the bfloat16 dot-product tiles (moe_routed_experts_bf16dot_tiles.inc), on
// 256-bit registers (AVX-512 BF16 + VL). Empty where the library has no x86 paths (isa.h).
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

ASCEND_MOE_CPU_TARGET_AVX512BF16_BEGIN
namespace ascend_moe::cpu::experts_bf16dot_avx512bf16 {

struct DotScope {};  // vdpbf16ps ignores MXCSR

inline __m256 DpBf16(__m256 acc, __m256i a, __m256i b) {
  return _mm256_dpbf16_ps(acc, reinterpret_cast<__m256bh&>(a), reinterpret_cast<__m256bh&>(b));
}

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot_tiles.inc"

}  // namespace ascend_moe::cpu::experts_bf16dot_avx512bf16
ASCEND_MOE_CPU_TARGET_END
#endif
