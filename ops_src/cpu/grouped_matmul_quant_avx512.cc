// The AVX512 build of GroupedMatmul's quantized tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and grouped_matmul_quant_tiles.inc for the code.
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <cstdint>

#include "ops_src/cpu/grouped_matmul_quant_paths.h"

ASCEND_MOE_CPU_TARGET_AVX512_BEGIN
namespace ascend_moe::cpu::gmmq_avx512 {

constexpr CpuIsa kIsa = CpuIsa::kAvx512;

#include "ops_src/cpu/grouped_matmul_quant_tiles.inc"

}  // namespace ascend_moe::cpu::gmmq_avx512
ASCEND_MOE_CPU_TARGET_END
#endif
