// The AVX512 build of GroupedMatmul's quantized tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and grouped_matmul_quant_tiles.inc for the code.
#include "ops_src/cpu/isa.h"

#if ASCEND_MOE_CPU_X86_PATHS
#include <immintrin.h>

#include <algorithm>
#include <cstdint>

#include "ops_src/cpu/grouped_matmul_quant_paths.h"

ASCEND_MOE_CPU_TARGET_AVX512_BEGIN
namespace ascend_moe::cpu::gmmq_avx512 {

constexpr CpuIsa kIsa = CpuIsa::kAvx512;

constexpr int kLanes = 16;
using V = __m512;
using VI = __m512i;
inline V Zero() { return _mm512_setzero_ps(); }
inline V Set1(float v) { return _mm512_set1_ps(v); }
inline V Load(const float* p) { return _mm512_loadu_ps(p); }
inline void Store(float* p, V v) { _mm512_storeu_ps(p, v); }
inline V Fma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
inline float Sum(V v) { return _mm512_reduce_add_ps(v); }
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
#include "ops_src/cpu/grouped_matmul_quant_tiles.inc"
#undef ASCEND_MOE_GMMQ_VECTOR

}  // namespace ascend_moe::cpu::gmmq_avx512
ASCEND_MOE_CPU_TARGET_END
#endif
