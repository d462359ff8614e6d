// The instruction-set builds of the MoeRoutedExperts tiles (moe_routed_experts_tiles.inc, compiled
// by moe_routed_experts_baseline.cc, _avx2.cc and _avx512.cc; isa.h): their entry points.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace ascend_moe::cpu {

// One expert's activation of its gate/up products (docs/operators.md §3.2): the bias of its rows
// added, clamped when limit > 0, then g sigmoid(alpha g) (u + beta). The defaults are SiLU.
struct ExpertGlu {
  float limit = 0.f;
  float alpha = 1.f;
  float beta = 0.f;
  const float* bias = nullptr;  // the expert's gate_up_bias [2I] (interleaved like its rows), or null
};

// The activation of intermediate row i from its gate and up products (every path's SwiGLU). With
// the defaults it computes exactly silu(g) * u: alpha 1 multiplies exactly, beta 0 is not added.
inline float ExpertSwiglu(float g, float u, const ExpertGlu& a, int64_t i) {
  if (a.bias != nullptr) {
    g += a.bias[2 * i];
    u += a.bias[2 * i + 1];
  }
  if (a.limit > 0.f) {
    g = std::min(g, a.limit);
    u = std::min(std::max(u, -a.limit), a.limit);
  }
  if (a.beta != 0.f) u += a.beta;
  return g / (1.f + std::exp(-(a.alpha * g))) * u;
}

// Phase 1 for one expert: act[q * I + i] for its pairs' rows X[0..n) and intermediate rows
// [i0, i1) (see moe_routed_experts_tiles.inc).
using ExpertsUpRowsFn = void(const float* fc1, int64_t H, const float* const* X, int64_t n, int64_t i0,
                             int64_t i1, const ExpertGlu& glu, float* act, int64_t I, float* dots);
// Phase 2 for one expert: Y[q][h0, h1) += scale[q] * (fc2 rows [h0, h1) . A[q]).
using ExpertsDownRowsFn = void(const float* fc2, int64_t I, const float* const* A, const float* scale,
                               float* const* Y, int64_t n, int64_t h0, int64_t h1);

// A quantized weight matrix (onnx_schemas/weight_quant.py): row r's bytes at w + r * row_bytes,
// its scales at scales + r * groups, one per `block` inputs (block = the row length: per channel).
// bits 16 (kBf16Bits): bfloat16 rows (2 bytes an input), no scales (null).
struct QRowsView {
  const int8_t* w = nullptr;
  int64_t row_bytes = 0;
  const float* scales = nullptr;
  int64_t groups = 1;
  int64_t block = 0;
};

inline constexpr int kBf16Bits = 16;

// Phase 1 with quantized gate/up rows (`bits` 8, 4 or kBf16Bits: then X holds bfloat16 values and
// act receives the SwiGLU rows rounded to bfloat16; X in the tiles' order for 4 bits, see
// PermuteInt4); act[q * I + pos(i)], pos the 4-bit order of blocks of `down_block` (0: i).
using ExpertsUpRowsQFn = void(const QRowsView& fc1, int bits, int64_t H, const float* const* X, int64_t n,
                              int64_t i0, int64_t i1, const ExpertGlu& glu, float* act, int64_t I,
                              int64_t down_block, float* dots);
// Phase 2 with quantized down rows.
using ExpertsDownRowsQFn = void(const QRowsView& fc2, int bits, int64_t I, const float* const* A,
                                const float* scale, float* const* Y, int64_t n, int64_t h0, int64_t h1);
// dst = src [K] in the order the 4-bit tiles read a row with blocks of `block` inputs.
using ExpertsPermuteInt4Fn = void(const float* src, float* dst, int64_t K, int64_t block);

#define ASCEND_MOE_EXPERTS_PATH_DECLS \
  ExpertsUpRowsFn UpRows;             \
  ExpertsDownRowsFn DownRows;         \
  ExpertsUpRowsQFn UpRowsQ;           \
  ExpertsDownRowsQFn DownRowsQ;       \
  ExpertsPermuteInt4Fn PermuteInt4;

namespace experts_baseline {
ASCEND_MOE_EXPERTS_PATH_DECLS
}  // namespace experts_baseline

namespace experts_avx2 {
ASCEND_MOE_EXPERTS_PATH_DECLS
}  // namespace experts_avx2

namespace experts_avx512 {
ASCEND_MOE_EXPERTS_PATH_DECLS
}  // namespace experts_avx512

}  // namespace ascend_moe::cpu
