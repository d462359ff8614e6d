// The baseline build of the MoeGatingTopKHash row code: the compiler's default target (SSE2 on
// x86-64), on every CPU. See isa.h for the pattern and vector.inc for the code.
#include <climits>
#include <cstdint>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash_paths.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ascend_moe::cpu::gating_baseline {

constexpr CpuIsa kIsa = CpuIsa::kBaseline;
constexpr int kLanes = 4;
namespace narrow_build = gating_baseline;  // the AVX-512 build's `narrow` selection: unused here

#include "ops_src/cpu/moe_gating_top_k_hash/vector.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/simd_baseline.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/normalise.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/select.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/rows.inc"

}  // namespace ascend_moe::cpu::gating_baseline
