// The instruction-set builds of the MoeGatingTopKHash row code (ops_src/cpu/gating/, compiled by
// moe_gating_top_k_hash_baseline.cc, _avx2.cc and _avx512.cc; isa.h): their entry points, and the
// AVX2 build's selection functions that the AVX-512 build calls where it selects `narrow`.
#pragma once

#include <cstdint>

#include "ops_src/cpu/moe_gating_top_k_hash.h"

namespace ascend_moe::cpu {

// All steps for rows [begin, end) (gating/rows.inc). Scratch: 4E floats, 4E + G + 1 ints.
using GatingRowsFn = MoeGatingTopKHashError(const MoeGatingTopKHashParams& params,
                                            const MoeGatingTopKHashInputs& in,
                                            const MoeGatingTopKHashOutputs& out, int64_t begin,
                                            int64_t end, float* fscratch, int32_t* iscratch,
                                            bool narrow);

namespace gating_baseline {
GatingRowsFn Rows;
}  // namespace gating_baseline

namespace gating_avx2 {
GatingRowsFn Rows;
// gating/select.inc, select_avx2.inc, rows.inc.
bool SelectTopKFast(const int32_t* keys, const int32_t* starts, int64_t segments, int64_t len,
                    int k, int32_t* out, int32_t given, const int32_t* chunk_max);
int32_t KthOfBlockMaxima(const int32_t* ms, int k);
int64_t KeptGroupsInRegister(const int32_t* keys, int64_t G, int64_t P, int64_t mode, int kg,
                             int32_t* kept_list, int32_t* threshold);
}  // namespace gating_avx2

namespace gating_avx512 {
GatingRowsFn Rows;
}  // namespace gating_avx512

}  // namespace ascend_moe::cpu
