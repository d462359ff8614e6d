// The instruction-set builds of the MoeRoutedExperts tiles (moe_routed_experts_tiles.inc, compiled
// by moe_routed_experts_baseline.cc, _avx2.cc and _avx512.cc; isa.h): their entry points.
#pragma once

#include <cstdint>

namespace ascend_moe::cpu {

// Phase 1 for one expert: act[q * I + i] for its pairs' rows X[0..n) and intermediate rows
// [i0, i1) (see moe_routed_experts_tiles.inc).
using ExpertsUpRowsFn = void(const float* fc1, int64_t H, const float* const* X, int64_t n, int64_t i0,
                             int64_t i1, float limit, float* act, int64_t I, float* dots);
// Phase 2 for one expert: Y[q][h0, h1) += scale[q] * (fc2 rows [h0, h1) . A[q]).
using ExpertsDownRowsFn = void(const float* fc2, int64_t I, const float* const* A, const float* scale,
                               float* const* Y, int64_t n, int64_t h0, int64_t h1);

namespace experts_baseline {
ExpertsUpRowsFn UpRows;
ExpertsDownRowsFn DownRows;
}  // namespace experts_baseline

namespace experts_avx2 {
ExpertsUpRowsFn UpRows;
ExpertsDownRowsFn DownRows;
}  // namespace experts_avx2

namespace experts_avx512 {
ExpertsUpRowsFn UpRows;
ExpertsDownRowsFn DownRows;
}  // namespace experts_avx512

}  // namespace ascend_moe::cpu
