// Micro-benchmark of GroupedMatmul's quantized CPU paths, one thread, same process: float32
// weights, W8A16 (int8, per-channel antiquant scale and offset), W4A16 (int4 words, scales per
// 128 rows of k) and W8A8 (int8 x and weights, per-token and per-channel scales, bfloat16 y) on
// the same shapes, each against the read bound of its own weight bytes (float sums over a
// buffer larger than the caches as 1, 4 and 8 streams side by side, the fastest kept; see
// benchmarks/read_probe.py). Calls rotate through inputs routed to disjoint expert subsets, so
// the weights come from DRAM as in decode. Medians of interleaved samples, in wall time and in
// thread CPU time (on a shared machine a process waits for a core much of its wall time; the CPU
// time leaves the wait out, for the probes and the kernels alike).
//   benchmarks/native/build_micro.sh gmm_quant && build/gmm_quant_micro [K N experts rows...]
// GMM_MICRO_TRANSPOSE=1: the weights stored [E, N, K] (transpose_weight 1, the exported layout);
// GMM_MICRO_REPS=N: N samples per scheme (default 7; more on a loaded machine).
// Built with a base commit (build_micro.sh gmm_quant BASE), it also times that commit's antiquant
// paths ("before", linked in under another namespace), interleaved with today's, and prints the
// before / today ratios (same process).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <random>
#include <string>
#include <vector>

#include "benchmarks/native/read_probe.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

using namespace ascend_moe::cpu;

#ifdef GMM_QUANT_MICRO_BEFORE
// The base commit's headers and objects, compiled with -Dascend_moe=ascend_moe_before (its isa.h
// first, by its own path: "ops_src/cpu/isa.h" would find today's, already included).
#define ascend_moe ascend_moe_before
#include "build/gmm_quant_before/ops_src/cpu/isa.h"
#if __has_include("build/gmm_quant_before/ops_src/cpu/grouped_matmul/grouped_matmul.h")
#include "build/gmm_quant_before/ops_src/cpu/grouped_matmul/grouped_matmul.h"
#else  // a commit before the per-op folders
#include "build/gmm_quant_before/ops_src/cpu/grouped_matmul.h"
#endif
#undef ascend_moe
namespace before = ascend_moe_before::cpu;
#endif

namespace {

constexpr int64_t kTopK = 8, kGroupRows = 128;

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

double CpuNow() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return t.tv_sec + 1e-9 * t.tv_nsec;
}

struct Scheme {
  const char* name;
  GroupedMatmulParams p;
  GroupedMatmulBuffers b;
  double bytes_per_weight;
  std::vector<double> times, cpu_times;
  bool before = false;  // the base commit's kernel on the same parameters and buffers
};

// One call of a plan (Build untimed): wall and thread CPU seconds added to t and c.
template <class Plan, class Params, class Buffers>
void TimeCall(const Params& p, const Buffers& b, const int64_t* ends, double& t, double& c) {
  Plan plan;
  plan.Build(p, ends);
  const double t0 = Now(), c0 = CpuNow();
  plan.Prepare(b);
  plan.RunItems(b, 0, plan.num_items());
  plan.FinishItems(b, 0, plan.num_finish_items());
  t += Now() - t0;
  c += CpuNow() - c0;
}

#ifdef GMM_QUANT_MICRO_BEFORE
before::GroupedMatmulParams Before(const GroupedMatmulParams& p) {
  before::GroupedMatmulParams o;
  o.rows = p.rows, o.depth = p.depth, o.cols = p.cols, o.groups = p.groups;
  o.type = static_cast<before::GmmType>(p.type), o.bias_float32 = p.bias_float32;
  o.transpose_weight = p.transpose_weight, o.weight = static_cast<before::GmmWeight>(p.weight);
  o.out_type = static_cast<before::GmmType>(p.out_type), o.antiquant_groups = p.antiquant_groups;
  o.antiquant_type = static_cast<before::GmmType>(p.antiquant_type);
  o.scale_type = static_cast<before::GmmType>(p.scale_type);
  return o;
}

before::GroupedMatmulBuffers Before(const GroupedMatmulBuffers& b) {
  return {b.x, b.weight, b.bias, b.scale, b.antiquant_scale, b.antiquant_offset, b.per_token_scale, b.y};
}
#endif

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t K = argc > 1 ? atoll(argv[1]) : 7168, N = argc > 2 ? atoll(argv[2]) : 2048;
  const int64_t E = argc > 3 ? atoll(argv[3]) : 16;
  std::vector<int64_t> row_counts;
  for (int i = 4; i < argc; ++i) row_counts.push_back(atoll(argv[i]));
  if (row_counts.empty()) row_counts = {1, 4, 16};
  const char* reps_env = std::getenv("GMM_MICRO_REPS");  // samples per scheme (the first is a warm-up)
  const int reps = reps_env != nullptr ? std::max(2, atoi(reps_env)) : 7;
  const char* transpose_env = std::getenv("GMM_MICRO_TRANSPOSE");
  const bool transpose = transpose_env != nullptr && std::string(transpose_env) == "1";
  std::mt19937 rng(1);
  std::uniform_int_distribution<int> i8(-128, 127);
  std::vector<float> wf(static_cast<size_t>(E * K * N));
  std::vector<int8_t> w8(wf.size());
  std::vector<int32_t> w4(wf.size() / 8);
  for (size_t i = 0; i < wf.size(); ++i) {
    w8[i] = static_cast<int8_t>(i8(rng));
    wf[i] = w8[i] * 1e-3f;
  }
  for (size_t i = 0; i < w4.size(); ++i) w4[i] = static_cast<int32_t>(rng());
  std::vector<float> ch_scale(static_cast<size_t>(E * N), 1e-2f), ch_offset(ch_scale.size(), 0.5f);
  std::vector<float> g_scale(static_cast<size_t>(E * (K / kGroupRows) * N), 1e-2f),
      g_offset(g_scale.size(), 0.5f);
  std::vector<float> probe(static_cast<size_t>(1) << 26);  // 256 MiB
  for (auto& v : probe) v = 1.f;
  const double rate =
      std::max({ReadProbe<1>(probe, 5, Now), ReadProbe<4>(probe, 5, Now), ReadProbe<8>(probe, 5, Now)});
  const double cpu_rate = std::max(
      {ReadProbe<1>(probe, 5, CpuNow), ReadProbe<4>(probe, 5, CpuNow), ReadProbe<8>(probe, 5, CpuNow)});
  std::printf(
      "K %lld N %lld experts %lld%s, one thread; read probe %.1f GB/s (wall), %.1f GB/s (thread CPU time)\n",
      static_cast<long long>(K), static_cast<long long>(N), static_cast<long long>(E),
      transpose ? " [E, N, K]" : " [E, K, N]", rate / 1e9, cpu_rate / 1e9);
  std::printf(
      "| rows/expert | scheme | ms | share of read bound | vs float32 | CPU ms | CPU share | CPU vs float32 "
      "|\n"
      "|---|---|---|---|---|---|---|---|\n");
  for (int64_t rows : row_counts) {
    const int64_t M = kTopK * rows;
    std::vector<float> x(static_cast<size_t>(M * K), 0.01f), y(static_cast<size_t>(M * N));
    std::vector<int8_t> xq(static_cast<size_t>(M * K), 3);
    std::vector<float> pts(static_cast<size_t>(M), 1e-2f);
    std::vector<Scheme> schemes(4);
    GroupedMatmulParams base;
    base.rows = M;
    base.depth = K;
    base.cols = N;
    base.groups = E;
    base.transpose_weight = transpose;
    schemes[0] = {
        "float32", base, {x.data(), wf.data(), nullptr, nullptr, nullptr, nullptr, nullptr, y.data()}, 4, {}};
    schemes[1] = {
        "w8a16",
        base,
        {x.data(), w8.data(), nullptr, nullptr, ch_scale.data(), ch_offset.data(), nullptr, y.data()},
        1,
        {}};
    schemes[1].p.weight = GmmWeight::kInt8;
    schemes[2] = {"w4a16",
                  base,
                  {x.data(), w4.data(), nullptr, nullptr, g_scale.data(), g_offset.data(), nullptr, y.data()},
                  0.5,
                  {}};
    schemes[2].p.weight = GmmWeight::kInt4;
    schemes[2].p.antiquant_groups = K / kGroupRows;
    schemes[3] = {"w8a8",
                  base,
                  {xq.data(), w8.data(), nullptr, ch_scale.data(), nullptr, nullptr, pts.data(), y.data()},
                  1,
                  {}};
    schemes[3].p.weight = GmmWeight::kInt8;
    schemes[3].p.type = GmmType::kInt8;
    schemes[3].p.out_type = GmmType::kBFloat16;
#ifdef GMM_QUANT_MICRO_BEFORE
    for (int i : {1, 2}) {
      Scheme s = schemes[i];
      s.name = i == 1 ? "w8a16 before" : "w4a16 before";
      s.before = true;
      schemes.push_back(s);
    }
#endif
    const int64_t steps = std::max<int64_t>(1, E / kTopK);
    for (int rep = 0; rep < reps; ++rep) {
      for (auto& s : schemes) {
        double t = 0, c = 0;
        for (int64_t step = 0; step < steps; ++step) {
          std::vector<int64_t> ends(static_cast<size_t>(E));
          int64_t end = 0;
          for (int64_t e = 0; e < E; ++e) {
            if (e >= step * kTopK && e < (step + 1) * kTopK) end += rows;
            ends[e] = end;
          }
#ifdef GMM_QUANT_MICRO_BEFORE
          if (s.before) {
            TimeCall<before::GroupedMatmulPlan>(Before(s.p), Before(s.b), ends.data(), t, c);
            continue;
          }
#endif
          TimeCall<GroupedMatmulPlan>(s.p, s.b, ends.data(), t, c);
        }
        if (rep > 0) {
          s.times.push_back(t / steps);
          s.cpu_times.push_back(c / steps);
        }
      }
    }
    const double base_t = Median(schemes[0].times),
                 base_c = *std::min_element(schemes[0].cpu_times.begin(), schemes[0].cpu_times.end());
    for (auto& s : schemes) {
      const double t = Median(s.times), bytes = kTopK * K * N * s.bytes_per_weight;
      const double c = *std::min_element(s.cpu_times.begin(), s.cpu_times.end());  // least disturbed
      std::printf("| %lld | %s | %.2f | %.0f%% | %.2fx | %.2f | %.0f%% | %.2fx |\n",
                  static_cast<long long>(rows), s.name, t * 1e3, 100.0 * bytes / rate / t, base_t / t,
                  c * 1e3, 100.0 * bytes / cpu_rate / c, base_c / c);
    }
    for (const auto& s : schemes) {  // today's time over the base commit's, same process
      if (!s.before) continue;
      const Scheme& now = schemes[std::string(s.name).rfind("w8a16", 0) == 0 ? 1 : 2];
      std::printf("| %lld | %s / before | wall %.3f | CPU %.3f |\n", static_cast<long long>(rows), now.name,
                  Median(now.times) / Median(s.times),
                  *std::min_element(now.cpu_times.begin(), now.cpu_times.end()) /
                      *std::min_element(s.cpu_times.begin(), s.cpu_times.end()));
    }
  }
  return 0;
}
