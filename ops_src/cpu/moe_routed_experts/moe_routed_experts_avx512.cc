// The AVX-512 build of the MoeRoutedExperts tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and moe_routed_experts_tiles.inc for the code.
#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa_unit.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

#if ASCEND_MOE_CPU_X86_PATHS
ASCEND_MOE_CPU_TARGET_AVX512_BEGIN
namespace ascend_moe::cpu::experts_avx512 {

#include "ops_src/cpu/simd_f32_avx512.inc"

inline V LoadTail(const float* p, int64_t n) {
  return _mm512_maskz_loadu_ps(static_cast<__mmask16>((1u << n) - 1u), p);
}
// out[j] = the lanes of v[j] summed: halves added, then three horizontal adds for all four.
inline void Sum4(const V* v, float* out) {
  __m256 h[4];
  for (int j = 0; j < 4; ++j)
    h[j] = _mm256_add_ps(_mm512_castps512_ps256(v[j]), _mm512_extractf32x8_ps(v[j], 1));
  const __m256 all = _mm256_hadd_ps(_mm256_hadd_ps(h[0], h[1]), _mm256_hadd_ps(h[2], h[3]));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1)));
}
// Lane j of the result = the lanes of v[j] summed, j < 16: one tree of unpacks, shuffles and adds
// for the 16 vectors (8 + 4 + 2 + 1 adds), the sums left in lane order.
inline V SumLanes(const V* v) {
  __m512 b[8], c[4];
  for (int i = 0; i < 8; ++i)  // lanes of each 128-bit part: two partial sums of v[2i] and v[2i+1]
    b[i] =
        _mm512_add_ps(_mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 4; ++i)  // each 128-bit part: v[4i .. 4i+3] summed over that part
    c[i] = _mm512_add_ps(_mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 d0 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[0], c[1], 0x44), _mm512_shuffle_f32x4(c[0], c[1], 0xEE));
  const __m512 d1 =
      _mm512_add_ps(_mm512_shuffle_f32x4(c[2], c[3], 0x44), _mm512_shuffle_f32x4(c[2], c[3], 0xEE));
  return _mm512_add_ps(_mm512_shuffle_f32x4(d0, d1, 0x88), _mm512_shuffle_f32x4(d0, d1, 0xDD));
}
// Lane 2i + h of the result = the sum of half h of v[i] (i < 8): two rows' sums per vector (the
// 4-bit lane tiles of rows of 64 inputs). Quarters paired into four vectors of one row per quarter,
// each quarter summed as in SumLanes, the sums then put in row order by one vpermps.
inline V SumHalves(const V* v) {
  __m512 c[4], b[2];
  for (int i = 0; i < 4; ++i)  // quarter q of c[i]: 4 partial sums of row 4i + q
    c[i] = _mm512_add_ps(_mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0x88),
                         _mm512_shuffle_f32x4(v[2 * i], v[2 * i + 1], 0xDD));
  for (int i = 0; i < 2; ++i)
    b[i] =
        _mm512_add_ps(_mm512_unpacklo_ps(c[2 * i], c[2 * i + 1]), _mm512_unpackhi_ps(c[2 * i], c[2 * i + 1]));
  const __m512 sums =
      _mm512_add_ps(_mm512_shuffle_ps(b[0], b[1], _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm512_shuffle_ps(b[0], b[1], _MM_SHUFFLE(3, 2, 3, 2)));  // lane 4q + i: row 4i + q
  return _mm512_permutexvar_ps(_mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15), sums);
}
// kLanes bfloat16 values (raw bits at p) widened exactly: zero-extended to 32 bits, shifted up.
inline V LoadBf16(const int8_t* p) {
  const __m512i h = _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_slli_epi32(h, 16));
}
inline V LoadI8(const int8_t* p) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))));
}
// 4 bits: the 16 nibble values (0..7, -8..-1) times a scale, looked up by the nibble itself
// (vpermps reads the low 4 bits of each index lane).
using Lut = __m512;
inline Lut MakeLut(float scale) {
  const __m512 values = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, -8, -7, -6, -5, -4, -3, -2, -1);
  return _mm512_mul_ps(values, _mm512_set1_ps(scale));
}
template <bool Grouped>
inline void LoadI4(const int8_t* p, Lut lut, V* lo, V* hi) {
  const __m512i b = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  *lo = _mm512_permutexvar_ps(b, lut);
  *hi = _mm512_permutexvar_ps(_mm512_srli_epi32(b, 4), lut);
}
// 4 bits in phases (moe_routed_experts_qtiles.inc): 64 bytes as 16 dwords of 8 nibbles; a phase
// looks up each dword's low nibble (vpermps reads the low 4 bits) and shifts the next one down.
using Nibbles = __m512i;
inline Nibbles LoadNibbles(const int8_t* p) { return _mm512_loadu_si512(p); }
inline V LowNibbles(Lut lut, Nibbles v) { return _mm512_permutexvar_ps(v, lut); }
inline Nibbles NextNibbles(Nibbles v) { return _mm512_srli_epi32(v, 4); }
// LaneScales(sc, map): lane l = sc[8 l / block] for the map of `block` (a multiple of 8 dividing
// 128; from 128 on, sc[0] in every lane): the chunk's scales loaded (masked) and spread by vpermps.
struct LaneScaleMap {
  __m512i group;     // lane -> its scale
  __mmask16 loaded;  // the chunk's scales
};
inline LaneScaleMap MakeLaneScaleMap(int64_t block) {
  const __m512i lane = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
  if (block >= 128) return {_mm512_setzero_si512(), 1};
  const auto groups = static_cast<unsigned>(128 / block);
  return {_mm512_srlv_epi32(lane, _mm512_set1_epi32(__builtin_ctzll(block / 8))),
          static_cast<__mmask16>((1u << groups) - 1u)};
}
inline V LaneScales(const float* sc, const LaneScaleMap& map) {
  return _mm512_permutexvar_ps(map.group, _mm512_maskz_loadu_ps(map.loaded, sc));
}

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_vector.inc"

}  // namespace ascend_moe::cpu::experts_avx512
ASCEND_MOE_CPU_TARGET_END
#endif
