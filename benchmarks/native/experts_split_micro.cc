// How well MoeRoutedExperts' work split can use N threads, measured on one thread: every phase's
// parallel pieces (phase-1 work items, phase-2 column chunks, the A8 quantization chunks) in the
// pieces and order the ORT wrapper hands its threads (moe_routed_experts_op.cc), each timed alone,
// the minimum over repetitions of one input (a shared machine preempts some pieces in every run,
// rarely the same one twice); then the finish time of N threads claiming the pieces in order, each
// taking the next when it is free (ONNX Runtime's ParallelFor), over the one-thread sum: the
// lowest N-thread / 1-thread time the split allows when N cores run it undisturbed, with nothing
// shared between them (memory bandwidth, caches) and no cost of starting a phase. The serial parts
// (the plan, the 4-bit input permutation) count once.
//   benchmarks/native/build_micro.sh experts_split && build/experts_split_micro H E I k SHARED T...
// e.g. 7168 256 64 8 1 16 256 (the DeepSeek-V3-like block: 256 routed experts, top 8, one shared
// expert in every token's last slot), 2048 128 768 8 0 16 256 (the Qwen3-like block).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

using namespace ascend_moe::cpu;

namespace {

// The ORT wrapper's chunking (moe_routed_experts_op.cc: kChunkBytes, RowsPerChunk).
constexpr int64_t kChunkBytes = int64_t{4} << 20;
int64_t RowsPerChunk(int64_t row_floats) {
  return std::max<int64_t>(1, 8192 / std::max<int64_t>(1, row_floats));
}

constexpr int kRepeats = 8;
constexpr int kThreads = 2;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One phase: the time of each piece, in claim order.
struct Phase {
  std::string name;
  std::vector<double> t;
};

// Finish time of `threads` threads claiming the pieces in order.
double Finish(const std::vector<double>& t, int threads) {
  std::vector<double> busy(static_cast<size_t>(threads), 0.0);
  for (double x : t) *std::min_element(busy.begin(), busy.end()) += x;
  return *std::max_element(busy.begin(), busy.end());
}

// Times fn(begin, end) over [0, n) in chunks of `grain`, appending each chunk's time.
template <class Fn>
void Pieces(Phase& phase, int64_t n, int64_t grain, Fn&& fn) {
  for (int64_t b = 0; b < n; b += grain) {
    const double t0 = Now();
    fn(b, std::min(n, b + grain));
    phase.t.push_back(Now() - t0);
  }
}

// Keeps the per-piece minimum of runs over one input.
void KeepMin(std::vector<Phase>& best, const std::vector<Phase>& run) {
  if (best.empty()) {
    best = run;
    return;
  }
  for (size_t p = 0; p < run.size(); ++p)
    for (size_t i = 0; i < run[p].t.size(); ++i) best[p].t[i] = std::min(best[p].t[i], run[p].t[i]);
}

void Report(const char* candidate, int64_t T, const std::vector<Phase>& phases) {
  double one = 0, many = 0;
  std::printf("T %4lld %-8s", static_cast<long long>(T), candidate);
  for (const Phase& p : phases) {
    double sum = 0;
    for (double x : p.t) sum += x;
    const double largest = p.t.empty() ? 0 : *std::max_element(p.t.begin(), p.t.end());
    one += sum;
    many += Finish(p.t, kThreads);
    std::printf("  %s %zu x, %.2f ms (largest %.2f)", p.name.c_str(), p.t.size(), sum * 1e3, largest * 1e3);
  }
  std::printf("  | 1 thread %.2f ms, %d threads / 1: %.3f\n", one * 1e3, kThreads, many / one);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 7) {
    std::fprintf(stderr, "usage: %s H E I k SHARED T...\n", argv[0]);
    return 2;
  }
  const int64_t H = atoll(argv[1]), routed = atoll(argv[2]), I = atoll(argv[3]), top_k = atoll(argv[4]);
  const int64_t shared = atoll(argv[5]), E = routed + shared, k = top_k + shared;
  if (H < 32 || I < 32 || H % 32 != 0 || I % 32 != 0 || routed < top_k || top_k < 1 || shared < 0) {
    std::fprintf(stderr,
                 "H and I must be multiples of 32 (the 4-bit candidates' block), E >= k >= 1, SHARED >= 0; "
                 "got H %lld, E %lld, I %lld, k %lld, SHARED %lld\n",
                 static_cast<long long>(H), static_cast<long long>(routed), static_cast<long long>(I),
                 static_cast<long long>(top_k), static_cast<long long>(shared));
    return 2;
  }
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> uni(-0.05f, 0.05f);
  // Random weights and scales (the time does not depend on the values): float32, int8 per channel
  // and int4 per group of 32 (the peer benchmark's candidates).
  std::vector<float> fc1(static_cast<size_t>(E * 2 * I * H)), fc2(static_cast<size_t>(E * H * I));
  for (auto& v : fc1) v = uni(rng);
  for (auto& v : fc2) v = uni(rng);
  std::vector<int8_t> fc1q(fc1.size()), fc2q(fc2.size());
  for (auto& v : fc1q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  for (auto& v : fc2q) v = static_cast<int8_t>(static_cast<int>(rng() % 255) - 127);
  std::vector<float> sc1(static_cast<size_t>(E * 2 * I * std::max<int64_t>(1, H / 32)), 0.01f);
  std::vector<float> sc2(static_cast<size_t>(E * H * std::max<int64_t>(1, I / 32)), 0.01f);
  for (int i = 6; i < argc; ++i) {
    const int64_t T = atoll(argv[i]);
    std::vector<int64_t> idx;  // top_k distinct routed experts per token, then the shared ones
    for (int64_t t = 0; t < T; ++t) {
      std::vector<int64_t> perm(static_cast<size_t>(routed));
      for (int64_t e = 0; e < routed; ++e) perm[e] = e;
      std::shuffle(perm.begin(), perm.end(), rng);
      idx.insert(idx.end(), perm.begin(), perm.begin() + top_k);
      for (int64_t s = 0; s < shared; ++s) idx.push_back(routed + s);
    }
    std::vector<float> x(static_cast<size_t>(T * H)), w(static_cast<size_t>(T * k), 0.125f), y(x.size());
    for (auto& v : x) v = uni(rng);
    for (const std::string candidate : {"float32", "int8", "int4", "w8a8", "w4a8"}) {
      MoeRoutedExpertsParams p;
      p.tokens = T, p.hidden = H, p.k = k, p.experts = E, p.inter = I;
      p.quant_bits = candidate == "float32" ? 0 : candidate == "int8" || candidate == "w8a8" ? 8 : 4;
      p.block_size = p.quant_bits == 4 ? 32 : 0;
      std::vector<Phase> best;
      if (candidate[0] == 'w') {
        const A8ExpertWeights wt =
            RepackA8Experts(p, fc1q.data(), sc1.data(), fc2q.data(), sc2.data(), ActiveA8Dot());
        for (int rep = 0; rep < kRepeats; ++rep) {
          std::vector<Phase> run = {
              {"plan", {}}, {"quantize x", {}}, {"up", {}}, {"quantize act", {}}, {"down", {}}};
          MoeRoutedExpertsA8Plan plan;
          Pieces(run[0], 1, 1, [&](int64_t, int64_t) { plan.Build(p, idx.data(), wt.dot, nullptr); });
          Pieces(run[1], T, RowsPerChunk(H),
                 [&](int64_t b, int64_t e) { plan.QuantizeTokens(x.data(), b, e); });
          Pieces(run[2], plan.num_up_items(), 1, [&](int64_t b, int64_t e) { plan.UpItems(wt, b, e); });
          Pieces(run[3], plan.num_pairs(), RowsPerChunk(I),
                 [&](int64_t b, int64_t e) { plan.QuantizeActs(b, e); });
          Pieces(run[4], H, plan.ColumnsPerChunk(kChunkBytes),
                 [&](int64_t b, int64_t e) { plan.DownColumns(wt, w.data(), y.data(), b, e); });
          KeepMin(best, run);
        }
      } else {
        MoeRoutedExpertsBuffers b;
        b.x = x.data(), b.expert_idx = idx.data(), b.routing_weights = w.data(), b.y = y.data();
        if (p.quant_bits == 0) {
          b.gate_up = fc1.data(), b.down = fc2.data();
        } else {
          b.gate_up_q = fc1q.data(), b.down_q = fc2q.data(), b.gate_up_scales = sc1.data(),
          b.down_scales = sc2.data();
        }
        for (int rep = 0; rep < kRepeats; ++rep) {
          std::vector<Phase> run = {{"plan", {}}, {"up", {}}, {"down", {}}};
          MoeRoutedExpertsPlan plan;
          Pieces(run[0], 1, 1, [&](int64_t, int64_t) {
            plan.Build(p, idx.data(), nullptr);
            plan.PrepareInputs(b);
          });
          Pieces(run[1], plan.num_up_items(), 1, [&](int64_t s, int64_t e) { plan.UpItems(b, s, e); });
          Pieces(run[2], H, plan.ColumnsPerChunk(kChunkBytes),
                 [&](int64_t s, int64_t e) { plan.DownColumns(b, s, e); });
          KeepMin(best, run);
        }
      }
      Report(candidate.c_str(), T, best);
    }
  }
  return 0;
}
