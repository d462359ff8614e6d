// Micro-benchmark of the MoeRoutedExperts CPU kernel, one thread: GB/s of selected-expert weights
// streamed per call, against plain read probes (float sums over a buffer larger than the caches, as
// one stream and as 4 streams side by side: the faster is this core's read rate) in the same
// process. Calls rotate through inputs routed to different experts, so the weights come from DRAM as
// in decode. Built with a base commit (build_micro.sh experts BASE), it also times that commit's
// kernel ("before", linked under another namespace), interleaved with today's.
//   benchmarks/native/build_micro.sh experts [BASE] && build/experts_micro [H E I k T...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/native/read_probe.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

using namespace ascend_moe::cpu;

#ifdef EXPERTS_MICRO_BEFORE
// The base commit's header and objects, compiled with -Dascend_moe=ascend_moe_before. Its isa.h and
// attr_defaults.gen.h first, by their own paths: the header's "ops_src/cpu/..." includes would find
// today's (already included, #pragma once) and leave their names undeclared in the base's namespace.
#define ascend_moe ascend_moe_before
#include "build/experts_before/ops_src/cpu/attr_defaults.gen.h"
#include "build/experts_before/ops_src/cpu/isa.h"
#include "build/experts_before/ops_src/cpu/moe_routed_experts/moe_routed_experts.h"
#undef ascend_moe
#endif

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

// Weight bytes per phase-2 chunk: the ORT wrapper's (moe_routed_experts_op.cc, kChunkBytes).
constexpr int64_t kChunkBytes = int64_t{4} << 20;

// One kernel (today's or the base commit's) on one ISA path: a call over one rotation input, phase 2
// in the column chunks the ORT wrapper hands its threads (here all on this thread, in order).
template <class Params, class Buffers, class Plan, class Isa>
bool RunKernel(const Params& p, const Buffers& b, const void* idx, Isa isa, int64_t H) {
  Plan plan;
  plan.Build(p, idx, nullptr);
  if (!plan.UseIsa(isa)) return false;
  plan.PrepareInputs(b);
  plan.UpItems(b, 0, plan.num_up_items());
  const int64_t step = plan.ColumnsPerChunk(kChunkBytes);
  for (int64_t h = 0; h < H; h += step) plan.DownColumns(b, h, std::min(H, h + step));
  return true;
}

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
  // Quantized candidates (docs/quantization.md): random bytes and scales (the time does not depend
  // on the values): int8 per channel, int4 per group of kInt4Block.
  constexpr int64_t kInt4Block = 32;
  std::vector<int8_t> fc1q(fc1.size()), fc2q(fc2.size());
  for (auto& v : fc1q) v = static_cast<int8_t>(rng());
  for (auto& v : fc2q) v = static_cast<int8_t>(rng());
  std::vector<float> sc1(static_cast<size_t>(E * 2 * I * (H / kInt4Block))), sc2(static_cast<size_t>(E * H * (I / kInt4Block)));
  for (auto& v : sc1) v = uni(rng);
  for (auto& v : sc2) v = uni(rng);
  std::vector<uint16_t> fc1b(fc1.size()), fc2b(fc2.size());
  auto high_half = [](float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    return static_cast<uint16_t>(bits >> 16);
  };
  for (size_t i = 0; i < fc1.size(); ++i) fc1b[i] = high_half(fc1[i]);
  for (size_t i = 0; i < fc2.size(); ++i) fc2b[i] = high_half(fc2[i]);
  std::vector<float> probe(static_cast<size_t>(256) << 20 >> 2, 1.0f);  // 256 MiB
  const double one = ReadProbe<1>(probe, 10, Now), four = ReadProbe<4>(probe, 10, Now);
  const double dram = std::max(one, four);
  std::printf("H %lld E %lld I %lld k %lld; read probe %.1f GB/s (one stream %.1f, four %.1f)\n", (long long)H,
              (long long)E, (long long)I, (long long)k, dram / 1e9, one / 1e9, four / 1e9);
  for (int64_t T : token_counts) {
    const int rotation = 8;
    std::vector<std::vector<int64_t>> idx(rotation);
    std::vector<float> x(static_cast<size_t>(T * H)), w(static_cast<size_t>(T * k), 0.125f),
        y(static_cast<size_t>(T * H)), y_before(y.size()), y_q(y.size()), y_q_before(y.size());
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
      bytes += std::count(used.begin(), used.end(), 1) * 3.0 * H * I * 4;  // float32's
    }
    bytes /= rotation;
    for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2, CpuIsa::kBaseline}) {
      const char* only = std::getenv("EXPERTS_MICRO_ISA");  // one path only (its name, isa.h)
      if (only != nullptr && std::string(only) != CpuIsaName(isa)) continue;
      MoeRoutedExpertsParams p;
      p.tokens = T, p.hidden = H, p.k = k, p.experts = E, p.inter = I;
      struct Candidate {
        std::string name;
        std::function<bool(int)> call;  // one rotation input; false: the ISA is missing
        double best = 1e30;
      };
      std::vector<Candidate> candidates;
      candidates.push_back({"now", [&](int r) {
        MoeRoutedExpertsBuffers b;
        b.x = x.data(), b.expert_idx = idx[r].data(), b.routing_weights = w.data();
        b.gate_up = fc1.data(), b.down = fc2.data(), b.y = y.data();
        return RunKernel<MoeRoutedExpertsParams, MoeRoutedExpertsBuffers, MoeRoutedExpertsPlan>(p, b, idx[r].data(),
                                                                                                isa, H);
      }});
      for (int bits : {8, 4}) {
        candidates.push_back({bits == 8 ? "int8" : "int4", [&, bits](int r) {
          MoeRoutedExpertsParams pq = p;
          pq.quant_bits = bits;
          pq.block_size = bits == 8 ? 0 : kInt4Block;
          MoeRoutedExpertsBuffers b;
          b.x = x.data(), b.expert_idx = idx[r].data(), b.routing_weights = w.data(), b.y = y_q.data();
          b.gate_up_q = fc1q.data(), b.down_q = fc2q.data(), b.gate_up_scales = sc1.data(), b.down_scales = sc2.data();
          return RunKernel<MoeRoutedExpertsParams, MoeRoutedExpertsBuffers, MoeRoutedExpertsPlan>(pq, b, idx[r].data(),
                                                                                                  isa, H);
        }});
      }
      candidates.push_back({"bf16", [&](int r) {  // bfloat16 weights (the float32 ones' high halves)
        MoeRoutedExpertsParams pb = p;
        pb.bf16_weights = true;
        MoeRoutedExpertsBuffers b;
        b.x = x.data(), b.expert_idx = idx[r].data(), b.routing_weights = w.data(), b.y = y_q.data();
        b.gate_up_bf16 = fc1b.data(), b.down_bf16 = fc2b.data();
        return RunKernel<MoeRoutedExpertsParams, MoeRoutedExpertsBuffers, MoeRoutedExpertsPlan>(pb, b, idx[r].data(),
                                                                                                isa, H);
      }});
#ifdef EXPERTS_MICRO_BEFORE
      namespace old = ascend_moe_before::cpu;
      old::MoeRoutedExpertsParams op;
      op.tokens = T, op.hidden = H, op.k = k, op.experts = E, op.inter = I;
      candidates.push_back({"before", [&](int r) {
        old::MoeRoutedExpertsBuffers b;
        b.x = x.data(), b.expert_idx = idx[r].data(), b.routing_weights = w.data();
        b.gate_up = fc1.data(), b.down = fc2.data(), b.y = y_before.data();
        return RunKernel<old::MoeRoutedExpertsParams, old::MoeRoutedExpertsBuffers, old::MoeRoutedExpertsPlan>(
            op, b, idx[r].data(), static_cast<old::CpuIsa>(isa), H);
      }});
      for (int bits : {8, 4}) {
        candidates.push_back({bits == 8 ? "int8-before" : "int4-before", [&, bits](int r) {
          old::MoeRoutedExpertsParams pq = op;
          pq.quant_bits = bits;
          pq.block_size = bits == 8 ? 0 : kInt4Block;
          old::MoeRoutedExpertsBuffers b;
          b.x = x.data(), b.expert_idx = idx[r].data(), b.routing_weights = w.data(), b.y = y_q_before.data();
          b.gate_up_q = fc1q.data(), b.down_q = fc2q.data(), b.gate_up_scales = sc1.data(), b.down_scales = sc2.data();
          return RunKernel<old::MoeRoutedExpertsParams, old::MoeRoutedExpertsBuffers, old::MoeRoutedExpertsPlan>(
              pq, b, idx[r].data(), static_cast<old::CpuIsa>(isa), H);
        }});
      }
#endif
      bool ok = true;
      for (int rep = 0; rep < 6 && ok; ++rep) {
        for (auto& c : candidates) {
          const double t0 = Now();
          for (int r = 0; r < rotation && ok; ++r) ok = c.call(r);
          c.best = std::min(c.best, (Now() - t0) / rotation);
        }
      }
      if (!ok) continue;
      for (const auto& c : candidates) {
        // bytes per float32 weight byte: int8 1/4 (+ a scale per row), int4 1/8 + a scale per block
        const std::string width = c.name.substr(0, 4);
        const double own = width == "int8"   ? bytes / 4
                           : width == "int4" ? bytes / 8 * (1 + 8.0 / kInt4Block)
                           : width == "bf16" ? bytes / 2
                                             : bytes;
        std::printf("T %4lld %-8s %-11s %8.3f ms  %6.1f GB/s  %5.1f%% of the probe  %5.2fx float32", (long long)T,
                    CpuIsaName(isa), c.name.c_str(), c.best * 1e3, own / c.best / 1e9, 100 * own / c.best / dram,
                    candidates.front().best / c.best);
        if (c.name == "before") {
          const bool same = std::memcmp(y.data(), y_before.data(), y.size() * sizeof(float)) == 0;
          std::printf("  now %.2fx of before, %s", candidates.front().best / c.best,
                      same ? "bit-identical" : "OUTPUTS DIFFER");
        } else if (c.name.size() > 4 && c.name.substr(4) == "-before") {  // the quantized kernel's, same width
          for (const auto& now : candidates)
            if (now.name == width) std::printf("  %s now %.2fx of before", width.c_str(), c.best / now.best);
        }
        std::printf("\n");
      }
    }
  }
  return 0;
}
