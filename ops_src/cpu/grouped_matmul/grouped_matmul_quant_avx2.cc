// The AVX2 build of GroupedMatmul's quantized tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and grouped_matmul_quant_tiles.inc for the code.
#include "ops_src/cpu/isa_unit.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_paths.h"

#if ASCEND_MOE_CPU_X86_PATHS
ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::gmmq_avx2 {

#include "ops_src/cpu/simd_f32_avx2.inc"

using VI = __m256i;
// kLanes int8 -> float
inline V CvtI8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// kLanes bytes -> 2 kLanes int4 values + 8 (two's complement nibble ^ 8, 0..15) in column order
// (even column in the low nibble)
constexpr bool kInt4EvenOdd = false;
inline void CvtU4(const uint8_t* p, V* lo, V* hi) {
  const __m128i b = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)), _mm_set1_epi8(-0x78));
  const __m128i m = _mm_set1_epi8(0x0F);
  const __m128i u = _mm_unpacklo_epi8(_mm_and_si128(b, m), _mm_and_si128(_mm_srli_epi16(b, 4), m));
  *lo = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(u));
  *hi = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(_mm_unpackhi_epi64(u, u)));
}
// 2 kLanes columns of weight rows k and k+1 as int16 pairs (w[k][c], w[k+1][c]) in two vectors
// of kLanes int32 lanes: lane i of `lo` is column (i / 4) * 8 + i % 4, of `hi` that plus 4.
inline void PairsI8(const int8_t* w0, const int8_t* w1, VI* lo, VI* hi) {
  const VI a = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w0)));
  const VI b = _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w1)));
  *lo = _mm256_unpacklo_epi16(a, b);
  *hi = _mm256_unpackhi_epi16(a, b);
}
inline VI ZeroI() { return _mm256_setzero_si256(); }
inline VI Set1I(int32_t v) { return _mm256_set1_epi32(v); }
inline VI LoadI(const int32_t* p) { return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)); }
inline void StoreI(int32_t* p, VI v) { _mm256_storeu_si256(reinterpret_cast<__m256i*>(p), v); }
// acc + the pair products of a and b summed per int32 lane
inline VI MaddAdd(VI acc, VI a, VI b) { return _mm256_add_epi32(acc, _mm256_madd_epi16(a, b)); }
// 2 kLanes int8 as int16 (kLanes int32 lanes)
inline VI CvtI8x2(const int8_t* p) {
  return _mm256_cvtepi8_epi16(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
}
inline int32_t SumI(VI v) {
  __m128i s = _mm_add_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0x4E));
  s = _mm_add_epi32(s, _mm_shuffle_epi32(s, 0xB1));
  return _mm_cvtsi128_si32(s);
}

#define ASCEND_MOE_GMMQ_VECTOR 1
#include "ops_src/cpu/grouped_matmul/grouped_matmul_quant_tiles.inc"
#undef ASCEND_MOE_GMMQ_VECTOR

}  // namespace ascend_moe::cpu::gmmq_avx2
ASCEND_MOE_CPU_TARGET_END
#endif
