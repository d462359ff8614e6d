// The baseline build of the MoeRoutedExperts tiles: the compiler's default target (SSE2 on x86-64,
// portable C++ elsewhere), on every CPU. See isa.h for the pattern and moe_routed_experts_tiles.inc
// for the code.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

#if defined(__SSE2__)
#include <immintrin.h>
#endif

namespace ascend_moe::cpu::experts_baseline {

constexpr CpuIsa kIsa = CpuIsa::kBaseline;
constexpr int kLanes = 4;

#if defined(__SSE2__)
// x86-64's baseline: SSE2 registers (GCC's auto-vectorisation of the struct below interleaved the
// accumulators with shuffles and ran 16-token calls 1.6x slower than one stream).
using V = __m128;
inline V Zero() { return _mm_setzero_ps(); }
inline V Load(const float* p) { return _mm_loadu_ps(p); }
inline void Store(float* p, V v) { _mm_storeu_ps(p, v); }
inline V LoadTail(const float* p, int64_t n) {
  alignas(16) float v[4] = {0.f, 0.f, 0.f, 0.f};
  for (int64_t i = 0; i < n; ++i) v[i] = p[i];
  return _mm_load_ps(v);
}
inline V Fma(V a, V b, V c) { return _mm_add_ps(_mm_mul_ps(a, b), c); }
inline V Add(V a, V b) { return _mm_add_ps(a, b); }
inline float Sum(V v) {
  const __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));  // (v0 + v2, v1 + v3)
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
#else
struct V {
  float v[4];
};
inline V Zero() { return V{{0.f, 0.f, 0.f, 0.f}}; }
inline V Load(const float* p) { return V{{p[0], p[1], p[2], p[3]}}; }
inline void Store(float* p, V v) {
  for (int i = 0; i < 4; ++i) p[i] = v.v[i];
}
inline V LoadTail(const float* p, int64_t n) {
  V r = Zero();
  for (int64_t i = 0; i < n; ++i) r.v[i] = p[i];
  return r;
}
inline V Fma(V a, V b, V c) {
  for (int i = 0; i < 4; ++i) c.v[i] += a.v[i] * b.v[i];
  return c;
}
inline V Add(V a, V b) {
  for (int i = 0; i < 4; ++i) a.v[i] += b.v[i];
  return a;
}
inline float Sum(V v) { return (v.v[0] + v.v[2]) + (v.v[1] + v.v[3]); }
#endif

#if defined(__SSE2__)
inline V Set1(float v) { return _mm_set1_ps(v); }
inline V Mul(V a, V b) { return _mm_mul_ps(a, b); }
#else
inline V Set1(float v) { return V{{v, v, v, v}}; }
inline V Mul(V a, V b) {
  for (int i = 0; i < 4; ++i) a.v[i] *= b.v[i];
  return a;
}
#endif
inline void Sum4(const V* v, float* out) {
  for (int j = 0; j < 4; ++j) out[j] = Sum(v[j]);
}
// Lane j of the result = the lanes of v[j] summed, j < 4.
#if defined(__SSE2__)
inline V SumLanes(const V* v) {
  const __m128 b0 = _mm_add_ps(_mm_unpacklo_ps(v[0], v[1]), _mm_unpackhi_ps(v[0], v[1]));
  const __m128 b1 = _mm_add_ps(_mm_unpacklo_ps(v[2], v[3]), _mm_unpackhi_ps(v[2], v[3]));
  return _mm_add_ps(_mm_shuffle_ps(b0, b1, _MM_SHUFFLE(1, 0, 1, 0)),
                    _mm_shuffle_ps(b0, b1, _MM_SHUFFLE(3, 2, 3, 2)));
}
#else
inline V SumLanes(const V* v) { return V{{Sum(v[0]), Sum(v[1]), Sum(v[2]), Sum(v[3])}}; }
#endif
// Lane 2i + h of the result = the sum of half h of v[i] (i < 2): two rows' sums per vector (the
// 4-bit lane tiles of rows of 16 inputs).
#if defined(__SSE2__)
inline V SumHalves(const V* v) {
  return _mm_add_ps(_mm_shuffle_ps(v[0], v[1], _MM_SHUFFLE(2, 0, 2, 0)),
                    _mm_shuffle_ps(v[0], v[1], _MM_SHUFFLE(3, 1, 3, 1)));
}
#else
inline V SumHalves(const V* v) {
  return V{{v[0].v[0] + v[0].v[1], v[0].v[2] + v[0].v[3], v[1].v[0] + v[1].v[1], v[1].v[2] + v[1].v[3]}};
}
#endif
// 4 bfloat16 values (raw bits at p) widened exactly (each the high half of a float32).
#if defined(__SSE2__)
inline V LoadBf16(const int8_t* p) {
  const __m128i h = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p));
  return _mm_castsi128_ps(_mm_unpacklo_epi16(_mm_setzero_si128(), h));
}
#else
inline V LoadBf16(const int8_t* p) {
  V r;
  for (int i = 0; i < 4; ++i) {
    uint16_t h;
    std::memcpy(&h, p + 2 * i, sizeof h);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    std::memcpy(&r.v[i], &bits, sizeof bits);
  }
  return r;
}
#endif
inline V LoadI8(const int8_t* p) {
  alignas(16) const float v[4] = {static_cast<float>(p[0]), static_cast<float>(p[1]),
                                  static_cast<float>(p[2]), static_cast<float>(p[3])};
  return Load(v);
}
using Lut = V;  // 4 bits: the table is the scale
inline Lut MakeLut(float scale) { return Set1(scale); }
template <bool Grouped>
inline void LoadI4(const int8_t* p, Lut scale, V* lo, V* hi) {
  alignas(16) float l[4], h[4];
  for (int i = 0; i < 4; ++i) {
    // Signed nibbles: sign-extended by arithmetic shifts (the int4 format's definition).
    // NOLINTNEXTLINE(bugprone-signed-bitwise)
    l[i] = static_cast<float>(static_cast<int8_t>(static_cast<uint8_t>(p[i]) << 4) >> 4);
    h[i] = static_cast<float>(p[i] >> 4);  // NOLINT(bugprone-signed-bitwise)
  }
  *lo = Load(l);
  *hi = Load(h);
  if constexpr (Grouped) {
    *lo = Mul(*lo, scale);
    *hi = Mul(*hi, scale);
  }
}
// 4 bits in phases (moe_routed_experts_qtiles.inc): 16 bytes as 4 dwords of 8 nibbles; a phase
// converts each dword's low nibble and shifts the next one down.
#if defined(__SSE2__)
using Nibbles = __m128i;
inline Nibbles LoadNibbles(const int8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }
inline V LowNibbles(Lut /*unscaled*/, Nibbles v) {
  return _mm_cvtepi32_ps(_mm_srai_epi32(_mm_slli_epi32(v, 28), 28));
}
inline Nibbles NextNibbles(Nibbles v) { return _mm_srli_epi32(v, 4); }
#else
struct Nibbles {
  uint32_t d[4];
};
inline Nibbles LoadNibbles(const int8_t* p) {
  Nibbles v;
  for (int i = 0; i < 4; ++i) {
    v.d[i] = 0;
    for (int j = 3; j >= 0; --j)
      v.d[i] = (v.d[i] << 8) | static_cast<uint8_t>(p[4 * i + j]);  // little-endian
  }
  return v;
}
inline V LowNibbles(Lut /*unscaled*/, Nibbles v) {
  V r;
  for (int i = 0; i < 4; ++i)
    r.v[i] = static_cast<float>(static_cast<int>(v.d[i] & 15u) - (v.d[i] & 8u ? 16 : 0));
  return r;
}
inline Nibbles NextNibbles(Nibbles v) {
  for (int i = 0; i < 4; ++i) v.d[i] >>= 4;
  return v;
}
#endif
// LaneScales(sc, map): lane l = sc[8 l / block] for the map of `block` (a multiple of 8 dividing
// 32; from 32 on, sc[0] in every lane).
struct LaneScaleMap {
  int group[4];  // lane -> its scale
};
inline LaneScaleMap MakeLaneScaleMap(int64_t block) {
  LaneScaleMap map{};
  for (int l = 0; l < 4; ++l) map.group[l] = block >= 32 ? 0 : static_cast<int>(8 * int64_t{l} / block);
  return map;
}
inline V LaneScales(const float* sc, const LaneScaleMap& map) {
  alignas(16) float s[4];
  for (int l = 0; l < 4; ++l) s[l] = sc[map.group[l]];
  return Load(s);
}

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_vector.inc"

}  // namespace ascend_moe::cpu::experts_baseline
