// The portable build of GroupedMatmul's quantized tiles (the compiler's default target, any
// CPU). See isa.h for the pattern and grouped_matmul_quant_tiles.inc for the code.
#include <cstdint>

#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_paths.h"

namespace ascend_moe::cpu::gmmq_baseline {

constexpr CpuIsa kIsa = CpuIsa::kBaseline;

#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_tiles.inc"

}  // namespace ascend_moe::cpu::gmmq_baseline
