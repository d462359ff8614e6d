#include "ops_src/cpu/swi_glu.h"

#include <algorithm>
#include <cmath>

#include "ops_src/cpu/half.h"

namespace ascend_moe::cpu {

namespace {

constexpr int64_t kChunk = 256;  // float32 staging of half-precision rows, on the stack

// out[i] = a[i] / (1 + exp(-a[i])) * b[i]: a plain loop the compiler vectorises (expf through
// the vector math library where it has one).
inline void SwiGluFloat(const float* a, const float* b, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = a[i] / (1.f + std::exp(-a[i])) * b[i];
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void SwiGluHalfRow(const uint16_t* a, const uint16_t* b, uint16_t* out, int64_t n) {
  float fa[kChunk], fb[kChunk], fo[kChunk];
  for (int64_t start = 0; start < n; start += kChunk) {
    const int64_t m = std::min(kChunk, n - start);
    for (int64_t i = 0; i < m; ++i) {
      fa[i] = Load(a[start + i]);
      fb[i] = Load(b[start + i]);
    }
    SwiGluFloat(fa, fb, fo, m);
    for (int64_t i = 0; i < m; ++i) out[start + i] = Store(fo[i]);
  }
}

}  // namespace

void SwiGluRows(const SwiGluParams& p, const void* x, void* y, int64_t row_begin, int64_t row_end) {
  const int64_t n = p.inner;
  for (int64_t r = row_begin; r < row_end; ++r) {
    if (p.type == SwiGluType::kFloat32) {
      const float* in = static_cast<const float*>(x) + r * 2 * n;
      SwiGluFloat(in, in + n, static_cast<float*>(y) + r * n, n);
      continue;
    }
    const uint16_t* in = static_cast<const uint16_t*>(x) + r * 2 * n;
    uint16_t* out = static_cast<uint16_t*>(y) + r * n;
    if (p.type == SwiGluType::kFloat16) {
      SwiGluHalfRow<Fp16ToFloat, FloatToFp16>(in, in + n, out, n);
    } else {
      SwiGluHalfRow<Bf16ToFloat, FloatToBf16>(in, in + n, out, n);
    }
  }
}

}  // namespace ascend_moe::cpu
