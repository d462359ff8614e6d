// Exhaustive check of the AVX2 build's ApproxSigmoid (ops_src/cpu/moe_gating_top_k_hash/select_avx2.inc,
// the candidate filter of LazySigmoidTopK): for every float32 x, |ApproxSigmoid(x) - Sigmoid1(x)|
// <= kApproxSigmoidError (the bound the filter's margin is built on), NaN exactly for NaN x.
// Sigmoid1 is the kernel's own score (what the selection ranks). Built and run by
// tests/ops/moe_gating_top_k_hash/test_gating_kernel.py on CPUs with AVX2 + FMA; prints the largest
// error, exits 1 past the bound. Also prints the x of the largest error of either sign (the test builds rows of
// near-tied keys from them, where a margin below the two errors' sum loses an expert).
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <immintrin.h>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

ASCEND_MOE_CPU_TARGET_AVX2_BEGIN
namespace ascend_moe::cpu::approx_check {
constexpr CpuIsa kIsa = CpuIsa::kAvx2;
constexpr int kLanes = 8;
namespace narrow_build = approx_check;  // the AVX-512 build's `narrow` selection: unused here
#include "ops_src/cpu/moe_gating_top_k_hash/vector.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/simd_x86.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/simd_avx2.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/normalise.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/select.inc"
#include "ops_src/cpu/moe_gating_top_k_hash/select_avx2.inc"

__attribute__((noinline)) int Check(double* worst, uint32_t* worst_bits, float* x_over,
                                    float* x_under) {
  int bad_nan = 0;
  double max_err = 0, over = 0, under = 0;
  uint32_t at = 0;
  for (uint64_t base = 0; base < (1ull << 32); base += 8) {
    VecI bits;
    for (int l = 0; l < 8; ++l) bits[l] = static_cast<int32_t>(static_cast<uint32_t>(base + l));
    const VecF x = AsFloat(bits);
    const VecF a = ApproxSigmoid(x), e = Sigmoid1(x);
    for (int l = 0; l < 8; ++l) {
      const bool x_nan = x[l] != x[l];
      if (x_nan || a[l] != a[l] || e[l] != e[l]) {
        bad_nan += !(x_nan && a[l] != a[l] && e[l] != e[l]);
        continue;
      }
      const double signed_d = static_cast<double>(a[l]) - static_cast<double>(e[l]);
      const double d = std::fabs(signed_d);
      if (d > max_err) max_err = d, at = static_cast<uint32_t>(base + l);
      if (signed_d > over) over = signed_d, *x_over = x[l];
      if (signed_d < under) under = signed_d, *x_under = x[l];
    }
  }
  *worst = max_err;
  *worst_bits = at;
  return bad_nan;
}
}  // namespace ascend_moe::cpu::approx_check
ASCEND_MOE_CPU_TARGET_END

int main() {
  using namespace ascend_moe::cpu::approx_check;
  double worst;
  uint32_t at;
  float x_over = 0, x_under = 0;
  const int bad_nan = Check(&worst, &at, &x_over, &x_under);
  float x;
  std::memcpy(&x, &at, sizeof x);
  std::printf("max |ApproxSigmoid - Sigmoid1| = %.6g at x = %.9g (bound %g); NaN mismatches %d\n",
              worst, x, static_cast<double>(kApproxSigmoidError), bad_nan);
  std::printf("extremes %.9g %.9g\n", x_over, x_under);
  return worst <= kApproxSigmoidError && bad_nan == 0 ? 0 : 1;
}
