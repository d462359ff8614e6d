// The AVX2 + FMA build of the MoeRoutedExperts tiles, on CPUs that have it (x86-64 with GCC;
// empty elsewhere). See isa.h for the pattern and moe_routed_experts_tiles.inc for the code.
#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa_unit.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

#if ASCEND_MOE_CPU_X86_PATHS
ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::experts_avx2 {

#include "ops_src/cpu/simd_f32_avx2.inc"

inline V LoadTail(const float* p, int64_t n) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), lane);
  return _mm256_maskload_ps(p, mask);
}
// out[j] = the lanes of v[j] summed: three horizontal adds for all four, then the halves.
inline void Sum4(const V* v, float* out) {
  const __m256 all = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
  _mm_storeu_ps(out, _mm_add_ps(_mm256_castps256_ps128(all), _mm256_extractf128_ps(all, 1)));
}
// Lane j of the result = the lanes of v[j] summed, j < 8: one tree of unpacks, shuffles and adds
// for the 8 vectors (4 + 2 + 1 adds), the sums left in lane order.
inline V SumLanes(const V* v) {
  __m256 b[4], c[2];
  for (int i = 0; i < 4; ++i)  // lanes of each 128-bit half: two partial sums of v[2i] and v[2i+1]
    b[i] =
        _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]), _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  for (int i = 0; i < 2; ++i)  // each half: v[4i .. 4i+3] summed over that half
    c[i] = _mm256_add_ps(_mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm256_shuffle_ps(b[2 * i], b[2 * i + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm256_add_ps(_mm256_permute2f128_ps(c[0], c[1], 0x20), _mm256_permute2f128_ps(c[0], c[1], 0x31));
}
// Lane 2i + h of the result = the sum of half h of v[i] (i < 4): two rows' sums per vector (the
// 4-bit lane tiles of rows of 32 inputs). Three horizontal adds, the sums put in row order.
inline V SumHalves(const V* v) {
  const __m256 all = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));  // lane 4h + i
  return _mm256_permutevar8x32_ps(all, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}
// kLanes bfloat16 values (raw bits at p) widened exactly: zero-extended to 32 bits, shifted up.
inline V LoadBf16(const int8_t* p) {
  const __m256i h = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(h, 16));
}
inline V LoadI8(const int8_t* p) {
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p))));
}
// 4 bits: the table is the scale; 8 bytes -> signed low nibbles (bit 3 shifted to the sign bit
// and back) and high nibbles, converted, times the scale where Grouped.
using Lut = V;
inline Lut MakeLut(float scale) { return Set1(scale); }
template <bool Grouped>
inline void LoadI4(const int8_t* p, Lut scale, V* lo, V* hi) {
  const __m256i b = _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)));
  *lo = _mm256_cvtepi32_ps(_mm256_srai_epi32(_mm256_slli_epi32(b, 28), 28));
  *hi = _mm256_cvtepi32_ps(_mm256_srai_epi32(b, 4));
  if constexpr (Grouped) {
    *lo = Mul(*lo, scale);
    *hi = Mul(*hi, scale);
  }
}
// 4 bits in phases (moe_routed_experts_qtiles.inc): 32 bytes as 8 dwords of 8 nibbles; phase j
// sign-extends nibble j of each dword by two shifts of the loaded dwords (one for the top nibble)
// and converts it (no table; shifting the dwords down between phases measured 0.9x as fast).
struct Nibbles {
  __m256i v;
  int j;  // the phase
};
inline Nibbles LoadNibbles(const int8_t* p) {
  return {_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)), 0};
}
inline V LowNibbles(Lut /*unscaled*/, Nibbles n) {
  const __m256i top = n.j == 7 ? n.v : _mm256_slli_epi32(n.v, 28 - 4 * n.j);
  return _mm256_cvtepi32_ps(_mm256_srai_epi32(top, 28));
}
inline Nibbles NextNibbles(Nibbles n) { return {n.v, n.j + 1}; }
// LaneScales(sc, map): lane l = sc[8 l / block] for the map of `block` (a multiple of 8 dividing
// 64; from 64 on, sc[0] in every lane): the chunk's scales loaded (masked) and spread by vpermps.
struct LaneScaleMap {
  __m256i group;   // lane -> its scale
  __m256i loaded;  // the chunk's scales
};
inline LaneScaleMap MakeLaneScaleMap(int64_t block) {
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int groups = block >= 64 ? 1 : static_cast<int>(64 / block);
  const __m256i group = block >= 64 ? _mm256_setzero_si256()
                                    : _mm256_srlv_epi32(lane, _mm256_set1_epi32(__builtin_ctzll(block / 8)));
  return {group, _mm256_cmpgt_epi32(_mm256_set1_epi32(groups), lane)};
}
inline V LaneScales(const float* sc, const LaneScaleMap& map) {
  return _mm256_permutevar8x32_ps(_mm256_maskload_ps(sc, map.loaded), map.group);
}

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_vector.inc"

}  // namespace ascend_moe::cpu::experts_avx2
ASCEND_MOE_CPU_TARGET_END
#endif
