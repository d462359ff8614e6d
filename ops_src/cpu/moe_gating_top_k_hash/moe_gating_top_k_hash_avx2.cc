// The AVX2 + FMA (8 lanes) build of the MoeGatingTopKHash row code, on CPUs that have it (x86-64
// with GCC; empty elsewhere). See isa.h for the pattern and vector.inc for the code.
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <climits>
#include <cstdint>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash_paths.h"

ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::gating_avx2 {

constexpr CpuIsa kIsa = CpuIsa::kAvx2;
constexpr int kLanes = 8;
namespace narrow_build = gating_avx2;  // the AVX-512 build's `narrow` selection: unused here

#include "ops_src/cpu/moe_gating_top_k_hash/vector.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/simd_x86.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/simd_avx2.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/normalise.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/select.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/select_avx2.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/rows.inc"

}  // namespace ascend_moe::cpu::gating_avx2
ASCEND_MOE_CPU_TARGET_END
#endif
