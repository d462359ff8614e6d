// The portable build of the int8-activation tiles (moe_routed_experts_a8_tiles.inc): scalar C++,
// any CPU. Built with -ffp-contract=off like every A8 unit (CMakeLists.txt): the float32 steps
// stay separate roundings, as the NumPy model computes them.
#include <cstdint>
#include <cstring>

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

namespace ascend_moe::cpu::experts_a8_scalar {

constexpr A8Dot kDot = A8Dot::kScalar;
#define ASCEND_MOE_A8_SIMD 0
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8_tiles.inc"
#undef ASCEND_MOE_A8_SIMD

}  // namespace ascend_moe::cpu::experts_a8_scalar
