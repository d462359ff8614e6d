// MoeRoutedExperts with int8 activations (act_quant 1: W8A8 / W4A8; docs/quantization.md).
//
// Each x row is quantized per token to int8 (symmetric, scale = max |x| / 127); the expert weights,
// repacked once (RepackA8) into blocks of 8 rows whose 4-byte groups interleave (one broadcast
// activation dword meets 8 rows: the layout of ggml's repacked blocks and MLAS's packed B), are
// multiplied with integer dot products (vpdpbusd where the CPU has AVX-VNNI or AVX-512 VNNI, else
// AVX2 vpmaddubsw, else scalar code), summed in int32 per block, dequantized per block in float32;
// the SwiGLU runs in float32 and each pair's activation row is quantized again for the down
// projection. The result is the NumPy model's bit for bit (onnx_schemas/moe_routed_experts.py,
// _reference_a8) on every path. Knows nothing of ONNX Runtime or torch.
#pragma once

#include <cstdint>
#include <vector>

#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

namespace ascend_moe::cpu {

// How the integer dot products are computed (the path and the int8 weights' stored encoding).
enum class A8Dot : int {
  kScalar = 0,        // portable C++ (baseline ISA)
  kMaddubs = 1,       // AVX2 vpmaddubsw + vpmaddwd; int8 weights stored signed
  kAvxVnni = 2,       // AVX-VNNI vpdpbusd (256-bit); int8 weights stored + 128
  kAvx512Vnni = 3,    // AVX-512 VNNI + VL vpdpbusd on 256-bit registers; int8 weights stored + 128
  kEmulatedVnni = 4,  // AVX2 code computing vpdpbusd's sums exactly (tests the VNNI encoding anywhere)
};
const char* A8DotName(A8Dot dot);
// The path the A8 kernel takes on this CPU under ActiveCpuIsa(): the best of the above the CPU
// runs; ASCEND_MOE_CPU_A8_DOT = scalar | maddubs | avxvnni | avx512vnni | emulated-vnni (read on
// every call; a path the CPU cannot run is ignored) picks another for tests and benchmarks.
A8Dot ActiveA8Dot();
// Whether int8 weights are stored with + 128 (unsigned bytes for vpdpbusd) on this path.
inline bool A8Int8Offset(A8Dot dot) { return dot != A8Dot::kScalar && dot != A8Dot::kMaddubs; }

// One quantized weight stack [E, N, K] repacked: expert e's rows in blocks of 8 (N padded with
// zero rows), each block [K/8 steps][8 rows][4 bytes]: 8 bits: a step is two sub-steps of 4
// inputs, each [8 rows][inputs 4s..4s+3]; 4 bits: byte j of a row holds input 8s+j (low nibble) and
// 8s+4+j (high nibble) as value + 8. K padded with zeros to a multiple of 8. Scales [groups][8
// rows] per block (0 for padded rows).
struct A8Weights {
  int bits = 8;
  bool int8_offset = false;  // 8 bits: stored q + 128 (VNNI paths) rather than q
  int64_t experts = 0, rows = 0, inputs = 0;
  int64_t inputs_pad = 0;   // K rounded up to 8
  int64_t group = 0;        // inputs per scale (K: per channel)
  int64_t groups = 1;       // inputs_pad / group
  int64_t blocks = 0;       // row blocks per expert
  int64_t block_bytes = 0;  // bytes of one block
  std::vector<uint8_t> w;
  std::vector<float> scales;
};

// The view a tile reads: one expert's blocks.
struct A8Matrix {
  const uint8_t* w = nullptr;
  const float* scales = nullptr;
  int64_t block_bytes = 0, inputs_pad = 0, group = 0, groups = 1;
  int bits = 8;
  int32_t offset = 0;  // stored value - q: 8 (4 bits), 128 (8 bits + 128) or 0
};

// Repacks `q` ([E, N, K] int8, or [E, N, K/2] with 4 bits) and its float scales ([E, N] with
// block_size 0, else [E, N, K / block_size]) for `dot`'s encoding. block_size must be 0 or a
// multiple of 8 dividing K.
A8Weights RepackA8(const int8_t* q, const float* scales, int bits, int64_t block_size, int64_t E, int64_t N,
                   int64_t K, A8Dot dot);

// Both stacks of one op's weights.
struct A8ExpertWeights {
  A8Weights gate_up;  // [E, 2I, H]
  A8Weights down;     // [E, H, I]
  A8Dot dot = A8Dot::kScalar;
};
A8ExpertWeights RepackA8Experts(const MoeRoutedExpertsParams& p, const int8_t* gate_up_q,
                                const float* gate_up_scales, const int8_t* down_q, const float* down_scales,
                                A8Dot dot);

// One call: pairs grouped by expert (as MoeRoutedExpertsPlan), the quantized rows and scratch.
// Phases, each splittable over threads: QuantizeTokens, UpItems, QuantizeActs, DownColumns.
class MoeRoutedExpertsA8Plan {
 public:
  // Reads expert_idx; false (bad_pair set) when an index is outside [0, E). `dot` must be the
  // repacked weights' path (A8ExpertWeights::dot).
  bool Build(const MoeRoutedExpertsParams& params, const void* expert_idx, A8Dot dot, int64_t* bad_pair);
  // Tokens [begin, end) of x quantized.
  void QuantizeTokens(const float* x, int64_t begin, int64_t end);
  int64_t num_up_items() const { return static_cast<int64_t>(items_.size()); }
  // Gate/up + SwiGLU of work items [begin, end).
  void UpItems(const A8ExpertWeights& w, int64_t begin, int64_t end);
  int64_t num_pairs() const { return static_cast<int64_t>(pair_.size()); }
  // The SwiGLU rows of sorted pairs [begin, end) quantized.
  void QuantizeActs(int64_t begin, int64_t end);
  // y[:, h0:h1) (zeroed first); h0 a multiple of 8. Every split gives the same y bit for bit.
  void DownColumns(const A8ExpertWeights& w, const float* routing_weights, float* y, int64_t h0,
                   int64_t h1) const;
  // Columns per phase-2 chunk for about `bytes` of weights (a multiple of 16).
  int64_t ColumnsPerChunk(int64_t bytes) const;

 private:
  using UpItem = ExpertRowsItem;  // units: row blocks of the [2I, H] matrix
  MoeRoutedExpertsParams p_;
  A8Dot dot_ = A8Dot::kScalar;
  int64_t h_pad_ = 0, i_pad_ = 0, h_groups_ = 1, i_groups_ = 1;
  std::vector<int64_t> active_, begin_, pair_;
  std::vector<UpItem> items_;
  std::vector<int8_t> qx_;     // [T, h_pad]
  std::vector<int32_t> xsum_;  // [T, h_groups]: sum of each group's q (for the stored offset)
  std::vector<float> xscale_;  // [T]
  std::vector<float> act_;     // [P, I] SwiGLU rows, sorted pair order
  std::vector<int8_t> qa_;     // [P, i_pad]
  std::vector<int32_t> asum_;  // [P, i_groups]
  std::vector<float> ascale_;  // [P]
};

// The entry point of each path's tiles (moe_routed_experts_a8_tiles.inc): the dequantized values
// out[q * ld + 8 j + r] of row r of block b + j of `m` (rows 8(b+j) + r), j < nb, for n activation
// rows X[q] ([inputs_pad] int8), their group sums S[q] ([groups]) and scales xs[q].
using A8BlocksFn = void(const A8Matrix& m, int64_t b, int64_t nb, const int8_t* const* X,
                        const int32_t* const* S, const float* xs, int64_t n, float* out, int64_t ld);

}  // namespace ascend_moe::cpu
