// GroupedMatmul kernel alone (ops_src/cpu/grouped_matmul/grouped_matmul.cc), one thread, in thread CPU time:
// K x N bfloat16 / float32 weights, 8 groups of `rows` rows per call, rotating through disjoint
// expert sets so that each call reads its weights from DRAM; prints the best and median ms per
// call, GB/s of weights read and GFLOP/s.
//
//   benchmarks/native/build_micro.sh gmm && build/gmm_micro K N ROWS [bf16|f32] [calls]
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"
#ifdef GMM_MICRO_BEFORE
#define ascend_moe ascend_moe_before
#include GMM_MICRO_BEFORE
#undef ascend_moe
#endif

static double ThreadSeconds() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

// One call of a GroupedMatmul kernel, today's or the base commit's (the same types under another
// namespace): M rows of x through the groups' weights, [K, N], float32 or bfloat16.
template <typename Params, typename Buffers, typename Type, typename Kernel>
void CallGmm(Kernel kernel, bool bf16, int64_t M, int64_t K, int64_t N, int64_t E, const void* x, const void* w,
             float* y, const int64_t* ends) {
  Params p;
  p.rows = M, p.depth = K, p.cols = N, p.groups = E;
  p.type = bf16 ? Type::kBFloat16 : Type::kFloat32;
  Buffers b;
  b.x = x, b.weight = w, b.y = y;
  kernel(p, b, ends);
}

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s K N ROWS [bf16|f32] [calls]\n", argv[0]);
    return 2;
  }
  const int64_t K = std::atoll(argv[1]), N = std::atoll(argv[2]), rows = std::atoll(argv[3]);
  const bool bf16 = argc < 5 || std::strcmp(argv[4], "f32") != 0;
  const int calls = argc > 5 ? std::atoi(argv[5]) : 24;
  const int64_t elem = bf16 ? 2 : 4, top_k = 8;
  const int64_t per_set = top_k * K * N * elem;
  const int64_t sets = std::max<int64_t>(2, (int64_t{512} << 20) / per_set + 1);  // > 512 MiB in all
  const int64_t E = sets * top_k;
  std::vector<uint16_t> w16;
  std::vector<float> w32;
  if (bf16) {
    w16.resize(static_cast<size_t>(E * K * N));
    for (size_t i = 0; i < w16.size(); ++i)
      w16[i] = static_cast<uint16_t>(0x3c00 + (i * 2654435761u >> 24) % 128);
  } else {
    w32.resize(static_cast<size_t>(E * K * N));
    for (size_t i = 0; i < w32.size(); ++i)
      w32[i] = static_cast<float>((i * 2654435761u >> 20) % 1000) * 1e-3f;
  }
  const int64_t M = top_k * rows;
  std::vector<uint16_t> x16(static_cast<size_t>(M * K), 0x3f80);
  std::vector<float> x32(static_cast<size_t>(M * K), 0.5f);
  std::vector<float> y(static_cast<size_t>(M * N));
  std::vector<std::vector<int64_t>> ends(static_cast<size_t>(sets),
                                         std::vector<int64_t>(static_cast<size_t>(E)));
  for (int64_t s = 0; s < sets; ++s) {
    int64_t end = 0;
    for (int64_t e = 0; e < E; ++e) {
      if (e / top_k == s) end += rows;
      ends[s][e] = end;
    }
  }
  const void* x = bf16 ? static_cast<const void*>(x16.data()) : x32.data();
  const void* w = bf16 ? static_cast<const void*>(w16.data()) : w32.data();
  auto now = [&](const int64_t* e) {
    namespace cpu = ascend_moe::cpu;
    CallGmm<cpu::GroupedMatmulParams, cpu::GroupedMatmulBuffers, cpu::GmmType>(cpu::GroupedMatmul, bf16, M, K, N,
                                                                               E, x, w, y.data(), e);
  };
  std::vector<double> t[2];
  const char* names[2] = {"now", "before"};
  int variants = 1;
#ifdef GMM_MICRO_BEFORE
  variants = 2;
  std::vector<float> y_before(y.size());
  auto before = [&](const int64_t* e) {
    namespace cpu = ascend_moe_before::cpu;
    CallGmm<cpu::GroupedMatmulParams, cpu::GroupedMatmulBuffers, cpu::GmmType>(cpu::GroupedMatmul, bf16, M, K, N,
                                                                               E, x, w, y_before.data(), e);
  };
#endif
  for (int c = 0; c < calls + static_cast<int>(sets); ++c) {
    const int64_t* e = ends[static_cast<size_t>(c % sets)].data();
    for (int v = 0; v < variants; ++v) {
      const int which = (c + v) % variants;  // alternate which goes first
      const double t0 = ThreadSeconds();
#ifdef GMM_MICRO_BEFORE
      if (which == 1) {
        before(e);
      } else {
        now(e);
      }
#else
      now(e);
#endif
      if (c >= sets) t[which].push_back(ThreadSeconds() - t0);
    }
  }
  double best_now = 0;
  for (int v = 0; v < variants; ++v) {
    std::sort(t[v].begin(), t[v].end());
    const double best = t[v].front(), med = t[v][t[v].size() / 2];
    if (v == 0) best_now = best;
    std::printf(
        "%-6s K %lld N %lld rows %lld %s: best %.3f ms, median %.3f ms; %.1f GB/s, %.1f GFLOP/s (best)\n",
        names[v], static_cast<long long>(K), static_cast<long long>(N), static_cast<long long>(rows),
        bf16 ? "bf16" : "f32", best * 1e3, med * 1e3, static_cast<double>(per_set) / best / 1e9,
        2.0 * static_cast<double>(M * K * N) / best / 1e9);
  }
#ifdef GMM_MICRO_BEFORE
  double diff = 0;
  auto value = [&](const std::vector<float>& v, size_t i) -> double {
    if (!bf16) return v[i];
    uint16_t h;
    std::memcpy(&h, reinterpret_cast<const char*>(v.data()) + 2 * i, 2);
    const uint32_t bits = static_cast<uint32_t>(h) << 16;
    float f;
    std::memcpy(&f, &bits, 4);
    return f;
  };
  for (size_t i = 0; i < static_cast<size_t>(M * N); ++i)
    diff = std::max(diff, std::abs(value(y, i) - value(y_before, i)));
  std::printf("before / now (best): %.3f; max |y - y_before| %.3g\n", t[1].front() / best_now, diff);
#endif
  return 0;
}
