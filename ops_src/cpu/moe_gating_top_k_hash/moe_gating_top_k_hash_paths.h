// The instruction-set builds of the MoeGatingTopKHash row code (the *.inc files beside this one,
// compiled by moe_gating_top_k_hash_baseline.cc, _avx2.cc and _avx512.cc; isa.h): their entry points.
#pragma once

#include <cstdint>

#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

namespace ascend_moe::cpu {

// All steps for rows [begin, end) (rows.inc). Scratch: 4E floats, 4E + G + 1 ints.
using GatingRowsFn = MoeGatingTopKHashError(const MoeGatingTopKHashParams& params,
                                            const MoeGatingTopKHashInputs& in,
                                            const MoeGatingTopKHashOutputs& out, int64_t begin, int64_t end,
                                            float* fscratch, int32_t* iscratch, bool narrow);

namespace gating_baseline {
GatingRowsFn Rows;
}  // namespace gating_baseline

namespace gating_avx2 {
GatingRowsFn Rows;
}  // namespace gating_avx2

namespace gating_avx512 {
GatingRowsFn Rows;
}  // namespace gating_avx512

}  // namespace ascend_moe::cpu
