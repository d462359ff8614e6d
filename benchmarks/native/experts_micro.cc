// Micro-benchmark of the MoeRoutedExperts CPU kernel, one thread: GB/s of selected-expert weights
// streamed per call, against a plain read probe (a float sum over a buffer larger than the caches)
// in the same process. Calls rotate through inputs routed to different experts, so the weights
// come from DRAM as in decode.
//   benchmarks/native/build_experts_micro.sh && build/experts_micro [H E I k T...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

#include "ops_src/cpu/moe_routed_experts.h"

using namespace ascend_moe::cpu;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best read rate (B/s) of a 4-accumulator float sum over `buf`.
double ReadProbe(const std::vector<float>& buf, int calls) {
  double best = 1e30;
  volatile float sink = 0;
  for (int c = 0; c < calls; ++c) {
    const double t0 = Now();
    float s[64] = {};
    for (size_t i = 0; i + 64 <= buf.size(); i += 64)
      for (int j = 0; j < 64; ++j) s[j] += buf[i + j];  // vectorised: 4 independent 16-lane sums
    for (int j = 0; j < 64; ++j) sink = sink + s[j];
    best = std::min(best, Now() - t0);
  }
  return buf.size() * 4.0 / best;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t H = argc > 1 ? atoll(argv[1]) : 2048, E = argc > 2 ? atoll(argv[2]) : 32;
  const int64_t I = argc > 3 ? atoll(argv[3]) : 768, k = argc > 4 ? atoll(argv[4]) : 8;
  std::vector<int64_t> token_counts;
  for (int i = 5; i < argc; ++i) token_counts.push_back(atoll(argv[i]));
  if (token_counts.empty()) token_counts = {1, 2, 16};
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-0.05f, 0.05f);
  std::vector<float> fc1(static_cast<size_t>(E * 2 * I * H)), fc2(static_cast<size_t>(E * H * I));
  for (auto& v : fc1) v = uni(rng);
  for (auto& v : fc2) v = uni(rng);
  std::vector<float> probe(static_cast<size_t>(256) << 20 >> 2, 1.0f);  // 256 MiB
  const double dram = ReadProbe(probe, 10);
  std::printf("H %lld E %lld I %lld k %lld; read probe %.1f GB/s\n", (long long)H, (long long)E, (long long)I,
              (long long)k, dram / 1e9);
  for (int64_t T : token_counts) {
    const int rotation = 8;
    std::vector<std::vector<int64_t>> idx(rotation);
    std::vector<float> x(static_cast<size_t>(T * H)), w(static_cast<size_t>(T * k), 0.125f),
        y(static_cast<size_t>(T * H));
    for (auto& v : x) v = uni(rng);
    double bytes = 0;
    for (auto& ids : idx) {
      std::vector<char> used(E, 0);
      for (int64_t t = 0; t < T; ++t) {
        std::vector<int64_t> perm(E);
        for (int64_t e = 0; e < E; ++e) perm[e] = e;
        std::shuffle(perm.begin(), perm.end(), rng);
        for (int64_t j = 0; j < k; ++j) {
          ids.push_back(perm[j]);
          used[perm[j]] = 1;
        }
      }
      bytes += std::count(used.begin(), used.end(), 1) * 3.0 * H * I * 4;
    }
    bytes /= rotation;
    for (ExpertsIsa isa : {ExpertsIsa::kAvx512, ExpertsIsa::kAvx2, ExpertsIsa::kBaseline}) {
      MoeRoutedExpertsParams p;
      p.tokens = T, p.hidden = H, p.k = k, p.experts = E, p.inter = I;
      double best = 1e30;
      bool ok = true;
      for (int rep = 0; rep < 6 && ok; ++rep) {
        const double t0 = Now();
        for (int r = 0; r < rotation; ++r) {
          MoeRoutedExpertsBuffers b{x.data(), idx[r].data(), w.data(), fc1.data(), fc2.data(), y.data()};
          MoeRoutedExpertsPlan plan;
          plan.Build(p, idx[r].data(), nullptr);
          if (!plan.UseIsa(isa)) {
            ok = false;
            break;
          }
          plan.UpItems(b, 0, plan.num_up_items());
          plan.DownColumns(b, 0, H);
        }
        best = std::min(best, (Now() - t0) / rotation);
      }
      if (!ok) continue;
      std::printf("T %4lld %-8s %8.3f ms  %6.1f GB/s  %5.1f%% of the probe\n", (long long)T, ExpertsIsaName(isa),
                  best * 1e3, bytes / best / 1e9, 100 * bytes / best / dram);
    }
  }
  return 0;
}
