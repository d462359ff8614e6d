// Single-thread micro-benchmark of the MoeGatingTopKHash CPU kernel, per instruction-set path,
// without ONNX Runtime or Python in the way (also for perf / valgrind --tool=callgrind).
// Build from the repository root (benchmarks/native/build_micro.sh gating does both):
//   g++ -O3 -g -std=c++17 -I. benchmarks/native/gating_micro.cc $(find ops_src/cpu -name "*.cc") -o build/gating_micro
// or, to time an older kernel in the same process ("before" column), with its sources extracted
// into DIR and compiled under another namespace:
//   build/gating_micro_before (see build_micro.sh gating BASE_COMMIT)
// Run: build/gating_micro PRESET|all [rows] [seconds] [float32|bfloat16] [baseline|avx2|avx512|avx512-wide]
//   (the last argument: time only that path, e.g. under perf)
//   PRESET: deepseek-v3 | kimi-k2 | qwen3-moe | deepseek-v4-hash | sigmoid-256 (no groups)
// Prints ns/row per path (fastest repetition; the candidates are interleaved, each repetition
// times every one once), with the "before" kernel when linked: its ns/row on the same path, the
// ratio, and whether the two wrote the same bytes (exit status 3 where they did not); and the
// floor estimate.
// Logits are N(0, 1), bias N(0, 0.01).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

#ifdef GATING_MICRO_BEFORE
// The older kernel's header and objects, compiled with -Dascend_moe=ascend_moe_before.
#define ascend_moe ascend_moe_before
#include "build/gating_before/ops_src/cpu/moe_gating_top_k_hash.h"
#undef ascend_moe
// Its structs have the same layout as today's: copied bytewise.
template <typename To, typename From>
To SameLayout(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "kernel structs changed layout");
  To to;
  std::memcpy(static_cast<void*>(&to), &from, sizeof to);
  return to;
}
#endif

using namespace ascend_moe::cpu;

namespace {

struct Preset {
  MoeGatingTopKHashParams params;
  bool bias = false;
  int64_t vocab = 0;  // > 0: hash routing with a [vocab, k] table
  // Estimated floor, ns/row, single thread, float32 (an analysis of DeepSeek-V3: the
  // sigmoid pass at full vector throughput plus the selection's minimal instruction count).
  double floor_avx2 = 0, floor_avx512 = 0;
};

bool MakePreset(const std::string& name, Preset* p) {
  MoeGatingTopKHashParams& q = p->params;
  if (name == "deepseek-v3") {
    q.experts = 256, q.k = 8, q.group_count = 8, q.k_group = 4, q.group_select_mode = 1;
    q.norm_type = 1, q.routed_scaling_factor = 2.5f, p->bias = true;
    p->floor_avx2 = 155, p->floor_avx512 = 120;
  } else if (name == "sigmoid-256") {
    q.experts = 256, q.k = 8, q.norm_type = 1, q.routed_scaling_factor = 2.5f, p->bias = true;
  } else if (name == "kimi-k2") {
    q.experts = 384, q.k = 8, q.norm_type = 1, q.routed_scaling_factor = 2.827f, p->bias = true;
  } else if (name == "qwen3-moe") {
    q.experts = 128, q.k = 8, q.norm_type = 0, q.renorm = 1;
  } else if (name == "deepseek-v4-hash") {
    q.experts = 256, q.k = 6, q.norm_type = 2, q.routed_scaling_factor = 1.5f, p->vocab = 129280;
  } else {
    return false;
  }
  return true;
}

// One kernel on one path, with outputs of its own (compared bytewise with the "before" kernel's
// on the same path).
struct Candidate {
  std::string name;
  bool before = false;  // the older kernel
  std::function<bool(const MoeGatingTopKHashOutputs&)> run;  // false: failed
  std::vector<float> y = {};
  std::vector<int32_t> idx = {};
  double best = 1e30;
};

int Bench(const std::string& preset_name, int64_t rows, double seconds, bool bf16,
          const std::string& only) {
  Preset preset;
  if (!MakePreset(preset_name, &preset)) {
    std::fprintf(stderr, "unknown preset %s\n", preset_name.c_str());
    return 2;
  }
  MoeGatingTopKHashParams params = preset.params;
  params.rows = rows;
  const int64_t E = params.experts, k = params.k;
  int rc = 0;

  std::mt19937 rng(1);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> x(static_cast<size_t>(rows * E)), bias(static_cast<size_t>(E));
  for (float& v : x) v = normal(rng);
  for (float& v : bias) v = 0.1f * normal(rng);
  std::vector<uint16_t> x16(x.size()), bias16(bias.size());
  for (size_t i = 0; i < x.size(); ++i) x16[i] = FloatToBf16(x[i]);
  for (size_t i = 0; i < bias.size(); ++i) bias16[i] = FloatToBf16(bias[i]);
  std::vector<int64_t> ids(static_cast<size_t>(rows));
  std::vector<int32_t> table(static_cast<size_t>(preset.vocab * k));
  for (int64_t& v : ids) v = preset.vocab > 0 ? static_cast<int64_t>(rng() % preset.vocab) : 0;
  for (int32_t& v : table) v = static_cast<int32_t>(rng() % E);

  MoeGatingTopKHashInputs in;
  in.x_type = bf16 ? GatingFloatType::kBFloat16 : GatingFloatType::kFloat32;
  in.x = bf16 ? static_cast<const void*>(x16.data()) : x.data();
  if (preset.bias) in.bias = bf16 ? static_cast<const void*>(bias16.data()) : bias.data();
  if (preset.vocab > 0) {
    in.hash = true;
    in.ids_type = GatingIntType::kInt64;
    in.input_ids = ids.data();
    in.table_type = GatingIntType::kInt32;
    in.tid2eid = table.data();
    in.table_rows = preset.vocab;
  }
  // Every path this CPU runs (AVX-512 with both selection widths), today's kernel and, when
  // linked, the older one on the same path beside it.
#ifdef GATING_MICRO_BEFORE
  namespace old = ascend_moe_before::cpu;
  const auto old_params = SameLayout<old::MoeGatingTopKHashParams>(params);
  const auto old_in = SameLayout<old::MoeGatingTopKHashInputs>(in);
#endif
  std::vector<Candidate> candidates;
  for (CpuIsa isa : {CpuIsa::kBaseline, CpuIsa::kAvx2, CpuIsa::kAvx512}) {
    if (!CpuRuns(isa)) continue;
    const bool both = isa == CpuIsa::kAvx512;
    for (GatingSelect select : {GatingSelect::kNarrow, GatingSelect::kWide}) {
      if (!both && select == GatingSelect::kWide) continue;
      const std::string name = std::string(CpuIsaName(isa)) +
                               (both && select == GatingSelect::kWide ? "-wide" : "");
      if (!only.empty() && only != name) continue;
#ifdef GATING_MICRO_BEFORE
      candidates.push_back({name, true, [&, isa, select](const MoeGatingTopKHashOutputs& out) {
        old::MoeGatingTopKHashError e;
        return old::MoeGatingTopKHashRowsWithIsa(static_cast<old::GatingIsa>(isa), old_params,
                                                 old_in, SameLayout<old::MoeGatingTopKHashOutputs>(out),
                                                 0, rows, &e, static_cast<old::GatingSelect>(select)) &&
               e.ok();
      }});
#endif
      candidates.push_back({name, false, [&, isa, select](const MoeGatingTopKHashOutputs& out) {
        MoeGatingTopKHashError e;
        return MoeGatingTopKHashRowsWithIsa(isa, params, in, out, 0, rows, &e, select) && e.ok();
      }});
    }
  }
  for (Candidate& c : candidates) {
    c.y.assign(static_cast<size_t>(rows * k), 0.f);
    c.idx.assign(static_cast<size_t>(rows * k), -1);
  }

  using Clock = std::chrono::steady_clock;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  size_t rotation = 0;
  do {
    for (size_t j = 0; j < candidates.size(); ++j) {
      Candidate& c = candidates[(j + rotation) % candidates.size()];
      MoeGatingTopKHashOutputs out;
      out.y = c.y.data();
      out.expert_idx = c.idx.data();
      const auto t0 = Clock::now();
      if (!c.run(out)) return 1;
      c.best = std::min(c.best, std::chrono::duration<double>(Clock::now() - t0).count());
    }
    ++rotation;
  } while (Clock::now() < end);

  std::printf("%s %s rows=%lld (ns/row, fastest of %zu interleaved repetitions)\n",
              preset_name.c_str(), bf16 ? "bfloat16" : "float32", static_cast<long long>(rows),
              rotation);
  const Candidate* before = nullptr;
  for (const Candidate& c : candidates) {
    if (c.before) {
      before = &c;
      continue;
    }
    std::printf("  %-11s", c.name.c_str());
    if (before != nullptr && before->name == c.name) {
      const bool same = c.idx == before->idx &&
                        std::memcmp(c.y.data(), before->y.data(), c.y.size() * sizeof(float)) == 0;
      std::printf(" before %7.1f  after %7.1f  after/before %.3f  %s", before->best / rows * 1e9,
                  c.best / rows * 1e9, c.best / before->best,
                  same ? "bit-identical" : "OUTPUTS DIFFER");
      if (!same) rc = 3;
    } else {
      std::printf(" %7.1f", c.best / rows * 1e9);
    }
    if (c.idx != candidates[0].idx) std::printf("   experts differ from %s", candidates[0].name.c_str());
    double floor = c.name == "avx2" ? preset.floor_avx2 : c.name.rfind("avx512", 0) == 0 ? preset.floor_avx512 : 0;
    if (floor > 0 && !bf16) std::printf("   (floor estimate ~%.0f)", floor);
    std::printf("\n");
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PRESET|all [rows] [seconds] [float32|bfloat16] [path]\n", argv[0]);
    return 2;
  }
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 4096;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  const bool bf16 = argc > 4 && std::strcmp(argv[4], "bfloat16") == 0;
  std::vector<std::string> presets;
  if (std::strcmp(argv[1], "all") == 0) {
    presets = {"deepseek-v3", "kimi-k2", "qwen3-moe", "deepseek-v4-hash"};
  } else {
    presets = {argv[1]};
  }
  for (const std::string& p : presets) {
    const int rc = Bench(p, rows, seconds, bf16, argc > 5 ? argv[5] : "");
    if (rc != 0) return rc;
  }
  return 0;
}
