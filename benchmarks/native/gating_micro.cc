// Single-thread micro-benchmark of the MoeGatingTopKHash CPU kernel, for profiling without ONNX
// Runtime or Python in the way (perf, valgrind --tool=callgrind). Build from the repository root:
//   g++ -O3 -g -std=c++17 -I. benchmarks/native/gating_micro.cc ops_src/cpu/*.cc -o build/gating_micro
// Run: build/gating_micro PRESET [rows] [seconds] [float32|bfloat16]
//   PRESET: deepseek-v3 | kimi-k2 | qwen3-moe | deepseek-v4-hash | sigmoid-256 (no groups)
// Prints the time per row (best of the repetitions). Logits are N(0, 1), bias N(0, 0.01).
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "ops_src/cpu/half.h"
#include "ops_src/cpu/moe_gating_top_k_hash.h"

using namespace ascend_moe::cpu;

namespace {

struct Preset {
  MoeGatingTopKHashParams params;
  bool bias = false;
  int64_t vocab = 0;  // > 0: hash routing with a [vocab, k] table
};

bool MakePreset(const std::string& name, Preset* p) {
  MoeGatingTopKHashParams& q = p->params;
  if (name == "deepseek-v3") {
    q.experts = 256, q.k = 8, q.group_count = 8, q.k_group = 4, q.group_select_mode = 1;
    q.norm_type = 1, q.routed_scaling_factor = 2.5f, p->bias = true;
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

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PRESET [rows] [seconds] [float32|bfloat16]\n", argv[0]);
    return 2;
  }
  Preset preset;
  if (!MakePreset(argv[1], &preset)) {
    std::fprintf(stderr, "unknown preset %s\n", argv[1]);
    return 2;
  }
  const int64_t rows = argc > 2 ? std::atoll(argv[2]) : 4096;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 2.0;
  const bool bf16 = argc > 4 && std::strcmp(argv[4], "bfloat16") == 0;
  MoeGatingTopKHashParams params = preset.params;
  params.rows = rows;
  const int64_t E = params.experts, k = params.k;

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
    in.ids_type = GatingIntType::kInt64;
    in.input_ids = ids.data();
    in.table_type = GatingIntType::kInt32;
    in.tid2eid = table.data();
    in.table_rows = preset.vocab;
  }
  std::vector<float> y(static_cast<size_t>(rows * k));
  std::vector<int32_t> idx(static_cast<size_t>(rows * k));
  MoeGatingTopKHashOutputs out;
  out.y = y.data();
  out.expert_idx = idx.data();

  using Clock = std::chrono::steady_clock;
  double best = 1e30;
  int reps = 0;
  const auto end = Clock::now() + std::chrono::duration<double>(seconds);
  do {
    const auto t0 = Clock::now();
    if (!MoeGatingTopKHashRows(params, in, out, 0, rows).ok()) return 1;
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
    ++reps;
  } while (Clock::now() < end);
  long checksum = 0;
  for (int32_t v : idx) checksum += v;
  std::printf("%s %s rows=%lld: %.1f ns/row (best of %d), checksum %ld\n", argv[1],
              bf16 ? "bfloat16" : "float32", static_cast<long long>(rows), best / rows * 1e9, reps,
              checksum);
  return 0;
}
