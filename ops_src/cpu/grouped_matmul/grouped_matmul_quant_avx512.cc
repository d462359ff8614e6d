// The AVX512 build of GroupedMatmul's quantized tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and grouped_matmul_quant_tiles.inc for the code.
#include "ops_src/cpu/isa_unit.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_paths.h"

#if ASCEND_MOE_CPU_X86_PATHS
ASCEND_MOE_CPU_TARGET_AVX512_BEGIN
namespace ascend_moe::cpu::gmmq_avx512 {

#include "ops_src/cpu/simd_f32_avx512.inc"

using VI = __m512i;
// kLanes int8 -> float
inline V CvtI8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// kLanes bytes -> 2 kLanes int4 values + 8 (offset binary, 0..15): the even columns' in `lo`,
// the odd columns' in `hi` (kInt4EvenOdd), through a 16-entry table (vpermps reads the low 4
// bits of each index lane: no masking).
constexpr bool kInt4EvenOdd = true;
inline void CvtU4(const uint8_t* p, V* lo, V* hi) {
  const V table = _mm512_setr_ps(8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  *lo = _mm512_permutexvar_ps(d, table);
  *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), table);
}
// 2 kLanes columns of weight rows k and k+1 as int16 pairs (w[k][c], w[k+1][c]) in two vectors
// of kLanes int32 lanes: lane i of `lo` is column (i / 4) * 8 + i % 4, of `hi` that plus 4.
inline void PairsI8(const int8_t* w0, const int8_t* w1, VI* lo, VI* hi) {
  const VI a = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w0)));
  const VI b = _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(w1)));
  *lo = _mm512_unpacklo_epi16(a, b);
  *hi = _mm512_unpackhi_epi16(a, b);
}
inline VI ZeroI() { return _mm512_setzero_si512(); }
inline VI Set1I(int32_t v) { return _mm512_set1_epi32(v); }
inline VI LoadI(const int32_t* p) { return _mm512_loadu_si512(p); }
inline void StoreI(int32_t* p, VI v) { _mm512_storeu_si512(p, v); }
// acc + the pair products of a and b summed per int32 lane (VNNI: one instruction)
inline VI MaddAdd(VI acc, VI a, VI b) { return _mm512_add_epi32(acc, _mm512_madd_epi16(a, b)); }
// kLanes int8 -> int16 x row part for dot products: 2 kLanes int8 as int16 (kLanes int32 lanes)
inline VI CvtI8x2(const int8_t* p) {
  return _mm512_cvtepi8_epi16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
inline int32_t SumI(VI v) { return _mm512_reduce_add_epi32(v); }

#define ASCEND_MOE_GMMQ_VECTOR 1
#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_tiles.inc"
#undef ASCEND_MOE_GMMQ_VECTOR

// NK4: dot products along k over the nibbles of S weight rows side by side, for TT rows of x.
// Each antiquant group's 16 dequantized values (v + offset) * scale sit in one register per weight
// row (the panels' values, bit for bit) and vpermps looks each nibble up (it reads the low 4 bits
// of an index lane): no widening to float, no per-weight multiply. x's even and odd inputs of a
// 32-input step are split once (two vpermt2ps) for the S rows. out[s * TT + t].
template <int S, int TT>
void NK4Rows(const uint8_t* const* ws, const float* const* off, const float* const* sc, int64_t ld,
             int64_t step, int64_t G, const float* const* X, float* out) {
  const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  __m512 acc[2][S][TT];
  float tail[S][TT];
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < TT; ++t) {
      acc[0][s][t] = acc[1][s][t] = _mm512_setzero_ps();
      tail[s][t] = 0.f;
    }
  const int64_t full = step / 32 * 32;
  for (int64_t g = 0, k0 = 0; g < G; ++g, k0 += step) {
    __m512 lut[S];
    for (int s = 0; s < S; ++s)
      lut[s] =
          _mm512_mul_ps(_mm512_add_ps(values, _mm512_set1_ps(off[s][g * ld])), _mm512_set1_ps(sc[s][g * ld]));
    // k: the step's first input, b its first byte (k / 2, kept apart: no division of a signed index)
    for (int64_t k = k0, b = k0 / 2; k < k0 + full; k += 32, b += 16) {
      __m512 xe[TT], xo[TT];
      for (int t = 0; t < TT; ++t) {
        const __m512 x0 = _mm512_loadu_ps(X[t] + k), x1 = _mm512_loadu_ps(X[t] + k + 16);
        xe[t] = _mm512_permutex2var_ps(x0, even, x1);
        xo[t] = _mm512_permutex2var_ps(x0, odd, x1);
      }
      for (int s = 0; s < S; ++s) {
        const __m512i d = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(ws[s] + b)));
        const __m512 lo = _mm512_permutexvar_ps(d, lut[s]);
        const __m512 hi = _mm512_permutexvar_ps(_mm512_srli_epi32(d, 4), lut[s]);
        for (int t = 0; t < TT; ++t) {
          acc[0][s][t] = _mm512_fmadd_ps(lo, xe[t], acc[0][s][t]);
          acc[1][s][t] = _mm512_fmadd_ps(hi, xo[t], acc[1][s][t]);
        }
      }
    }
    for (int64_t k = k0 + full; k < k0 + step; k += 2) {  // the group's inputs past its full steps
      for (int s = 0; s < S; ++s) {
        const uint8_t byte = ws[s][k / 2];
        const float o = off[s][g * ld], c = sc[s][g * ld];
        const float lo = (LowNibble(byte) + o) * c, hi = (HighNibble(byte) + o) * c;
        for (int t = 0; t < TT; ++t) tail[s][t] += X[t][k] * lo + X[t][k + 1] * hi;
      }
    }
  }
  for (int s = 0; s < S; ++s)
    for (int t = 0; t < TT; ++t)
      out[s * TT + t] = _mm512_reduce_add_ps(_mm512_add_ps(acc[0][s][t], acc[1][s][t])) + tail[s][t];
}

// The tiles of NK4Rows over weight rows [n0, n1) (4 side by side, then one by one) and rows of x
// (2 at a time, then one).
template <int S>
void NK4RowsOf(const uint8_t* w, int64_t K, int64_t G, int64_t n, const float* offset, const float* scale,
               int64_t ld, const float* const* X, int64_t rows, float* out, int64_t lda) {
  const uint8_t* ws[S];
  const float* off[S];
  const float* sc[S];
  for (int s = 0; s < S; ++s) {
    ws[s] = w + (n + s) * (K / 2);
    off[s] = offset + s;
    sc[s] = scale + s;
  }
  float o[S * 2];
  for (int64_t r = 0; r < rows; r += 2) {
    const int tt = rows - r >= 2 ? 2 : 1;
    if (tt == 2) {
      NK4Rows<S, 2>(ws, off, sc, ld, K / G, G, X + r, o);
    } else {
      NK4Rows<S, 1>(ws, off, sc, ld, K / G, G, X + r, o);
    }
    for (int s = 0; s < S; ++s)
      for (int t = 0; t < tt; ++t) out[(r + t) * lda + s] = o[s * tt + t];
  }
}

void NK4(const uint8_t* w, int64_t K, int64_t G, int64_t n0, int64_t n1, const float* offset,
         const float* scale, int64_t ld, const float* const* X, int64_t rows, float* out, int64_t lda) {
  int64_t n = n0;
  for (; n + 4 <= n1; n += 4)
    NK4RowsOf<4>(w, K, G, n, offset + (n - n0), scale + (n - n0), ld, X, rows, out + (n - n0), lda);
  for (; n < n1; ++n)
    NK4RowsOf<1>(w, K, G, n, offset + (n - n0), scale + (n - n0), ld, X, rows, out + (n - n0), lda);
}

}  // namespace ascend_moe::cpu::gmmq_avx512
ASCEND_MOE_CPU_TARGET_END
#endif
