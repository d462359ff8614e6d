// The instruction-set builds of GroupedMatmul's quantized tiles (grouped_matmul_quant_tiles.inc,
// compiled by grouped_matmul_quant_baseline.cc, _avx2.cc and _avx512.cc; isa.h): their entry
// points, and one dispatcher per tile that calls the build `isa` names.
#pragma once

#include <cstdint>

#include "ops_src/cpu/isa.h"

namespace ascend_moe::cpu {

// Antiquant, weight [K, N]: acc[r * lda + c] += sum_k X[r][k] * w[k][c] for rows < 4 (int8 w
// from column 0 of the range; int4: bytes, two columns each, ldw in bytes).
using GmmqKN8Fn = void(int rows, const int8_t* w, int64_t ldw, int64_t k0, int64_t k1, const float* const* X,
                       float* acc, int64_t lda, int64_t width);
using GmmqKN4Fn = void(int rows, const uint8_t* w, int64_t ldw, int64_t k0, int64_t k1, const float* const* X,
                       float* acc, int64_t lda, int64_t width);
// Antiquant, weight [N, K]: acc[r * lda + j] += sum over k in [k0, k1) of X[r][k] * w[n0 + j][k].
using GmmqNK8Fn = void(const int8_t* w, int64_t ldw, int64_t k0, int64_t k1, int64_t n0, int64_t n1,
                       const float* const* X, int64_t rows, float* acc, int64_t lda);
// W8A8 (int32 sums): the [K, N] and [N, K] forms.
using GmmqKNIntFn = void(int rows, const int8_t* w, int64_t ldw, int64_t k0, int64_t k1,
                         const int8_t* const* X, int32_t* acc, int64_t lda, int64_t width);
using GmmqNKIntFn = void(const int8_t* w, int64_t K, int64_t n0, int64_t n1, const int8_t* const* X,
                         int64_t rows, int32_t* acc, int64_t lda);

// int4 weights dequantized to float32 (groups of many rows): out[c] = (w[c] + offset) * scale
// for c < n (w in bytes, two elements each, n even), offset and scale per column (Row) or one for
// all n (Run).
using GmmqDequantRow4Fn = void(const uint8_t* w, const float* offset, const float* scale, int64_t n,
                               float* out);
using GmmqDequantRun4Fn = void(const uint8_t* w, float offset, float scale, int64_t n, float* out);

#define ASCEND_MOE_GMMQ_DECLARE(ns) \
  namespace ns {                    \
  GmmqKN8Fn KN8;                    \
  GmmqKN4Fn KN4;                    \
  GmmqNK8Fn NK8;                    \
  GmmqKNIntFn KNInt;                \
  GmmqNKIntFn NKInt;                \
  GmmqDequantRow4Fn DequantRow4;    \
  GmmqDequantRun4Fn DequantRun4;    \
  }
ASCEND_MOE_GMMQ_DECLARE(gmmq_baseline)
ASCEND_MOE_GMMQ_DECLARE(gmmq_avx2)
ASCEND_MOE_GMMQ_DECLARE(gmmq_avx512)
#undef ASCEND_MOE_GMMQ_DECLARE

// Antiquant, int4 weight [N, K] (bytes, element k of row n in byte (n K + k) / 2, even k in the
// low nibble), AVX-512 only: out[r * lda + j] = sum over k < K of X[r][k] * (w[n0 + j][k] +
// offset[g * ld + j]) * scale[g * ld + j], g = k / (K / G), j < n1 - n0, K / G even.
using GmmqNK4Fn = void(const uint8_t* w, int64_t K, int64_t G, int64_t n0, int64_t n1, const float* offset,
                       const float* scale, int64_t ld, const float* const* X, int64_t rows, float* out,
                       int64_t lda);
namespace gmmq_avx512 {
GmmqNK4Fn NK4;
}  // namespace gmmq_avx512

#define ASCEND_MOE_GMMQ_DISPATCH(name, fn)                      \
  template <class... A>                                         \
  inline void name(CpuIsa isa, A... a) {                        \
    if constexpr (kCpuX86Paths) {                               \
      if (isa == CpuIsa::kAvx512) return gmmq_avx512::fn(a...); \
      if (isa == CpuIsa::kAvx2) return gmmq_avx2::fn(a...);     \
    }                                                           \
    gmmq_baseline::fn(a...);                                    \
  }
ASCEND_MOE_GMMQ_DISPATCH(GmmqKN8, KN8)
ASCEND_MOE_GMMQ_DISPATCH(GmmqKN4, KN4)
ASCEND_MOE_GMMQ_DISPATCH(GmmqNK8, NK8)
ASCEND_MOE_GMMQ_DISPATCH(GmmqKNInt, KNInt)
ASCEND_MOE_GMMQ_DISPATCH(GmmqNKInt, NKInt)
ASCEND_MOE_GMMQ_DISPATCH(GmmqDequantRow4, DequantRow4)
ASCEND_MOE_GMMQ_DISPATCH(GmmqDequantRun4, DequantRun4)
#undef ASCEND_MOE_GMMQ_DISPATCH

}  // namespace ascend_moe::cpu
