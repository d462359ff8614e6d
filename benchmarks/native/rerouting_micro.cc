// Single-thread micro-benchmark of the MoeReRouting CPU kernel against one memcpy of the same
// bytes, without ONNX Runtime or Python (small in-cache shapes, where per-call costs show).
// Build from the repository root:
//   g++ -O2 -std=c++17 -I. benchmarks/native/rerouting_micro.cc ops_src/cpu/moe_re_routing.cc \
//       -o build/rerouting_micro
// Run: build/rerouting_micro RANKS EXPERTS ROW_BYTES [scales|-] [BUFFER_SETS]
//   1024 token rows of ROW_BYTES, uniform random counts; "scales": float32 scales [A] too;
//   BUFFER_SETS (default 1) rotating input/output sets (4 sets of 2 MiB rows leave L2).
// Prints the 25th-percentile time of each (kernel and memcpy alternate) and their ratio.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "ops_src/cpu/moe_re_routing.h"

using namespace ascend_moe::cpu;

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s RANKS EXPERTS ROW_BYTES [scales|-] [BUFFER_SETS]\n", argv[0]);
    return 2;
  }
  const int ranks = std::atoi(argv[1]), experts = std::atoi(argv[2]), row_bytes = std::atoi(argv[3]);
  const bool scales = argc > 4 && std::strcmp(argv[4], "scales") == 0;
  const int sets = argc > 5 ? std::max(1, std::atoi(argv[5])) : 1;
  const int tokens = 1024;
  const size_t bytes = static_cast<size_t>(tokens) * row_bytes;
  std::vector<std::vector<unsigned char>> in(sets, std::vector<unsigned char>(bytes, 1));
  std::vector<std::vector<unsigned char>> out(sets, std::vector<unsigned char>(bytes, 2));
  std::vector<float> sc(tokens, 1.0f), out_sc(tokens);
  std::vector<int32_t> idx(tokens);
  std::vector<int64_t> counts(static_cast<size_t>(ranks) * experts, 0), totals(experts);
  std::mt19937 rng(1);
  for (int i = 0; i < tokens; ++i) counts[rng() % counts.size()]++;
  MoeReRoutingParams p;
  p.num_tokens = tokens, p.token_row_bytes = row_bytes, p.num_ranks = ranks, p.num_experts = experts;
  p.scale_row_bytes = sizeof(float), p.has_scales = scales;

  using Clock = std::chrono::steady_clock;
  std::vector<double> kernel, copy;
  for (int rep = 0; rep < 2000; ++rep) {
    const int s = rep % sets;
    const auto t0 = Clock::now();
    if (rep % 2 == 1) {
      MoeReRoutingBuffers b{in[s].data(), sc.data(), out[s].data(), out_sc.data(), idx.data()};
      if (!MoeReRouting(p, counts.data(), b, totals.data())) return 1;
    } else {
      std::memcpy(out[s].data(), in[s].data(), bytes);
      if (scales) std::memcpy(out_sc.data(), sc.data(), tokens * sizeof(float));
    }
    (rep % 2 == 1 ? kernel : copy).push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  std::sort(kernel.begin(), kernel.end());
  std::sort(copy.begin(), copy.end());
  const double k = kernel[kernel.size() / 4], c = copy[copy.size() / 4];
  std::printf("N=%d E=%d row=%d B scales=%d sets=%d: kernel %.1f us, memcpy %.1f us, %.1f%% of copy\n",
              ranks, experts, row_bytes, scales ? 1 : 0, sets, k * 1e6, c * 1e6, c / k * 100);
  return 0;
}
