// MoeRoutedExperts CPU kernel (docs/operators.md §3): routed SwiGLU experts on the routed rows only.
//
// The T*k (token, slot) pairs are grouped by expert (counting sort); each selected expert's weight
// rows are then streamed once, each row applied to all of that expert's pairs while it is in
// registers. Two phases, each splittable over threads without write conflicts:
//   1. gate/up + activation: work items (expert, block of intermediate rows) write act[pair, i];
//   2. down + weighted sum: a range of hidden columns h, all experts in ascending order, writes
//      y[:, h] (the summation order of y does not depend on a split at multiples of 16 columns).
// Plain C++ over raw float32 pointers; AVX-512 / AVX2+FMA / baseline paths chosen at run time.
// Knows nothing of ONNX Runtime or torch.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "ops_src/cpu/attr_defaults.gen.h"
#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_bf16dot.h"

namespace ascend_moe::cpu {

struct MoeRoutedExpertsParams {
  int64_t tokens = 0;   // T
  int64_t hidden = 0;   // H
  int64_t k = 0;        // slots per token
  int64_t experts = 0;  // E
  int64_t inter = 0;    // I (gate_up_weights has 2I rows per expert)
  bool index64 = true;  // expert_idx is int64 (else int32)
  // > 0: gate clamped to <= limit and up to [-limit, limit] before the activation
  float swiglu_limit = attr_defaults::moe_routed_experts::kSwigluLimit;
  // the activation g sigmoid(alpha g) (u + beta) (defaults: SiLU)
  float activation_alpha = attr_defaults::moe_routed_experts::kActivationAlpha;
  float activation_beta = attr_defaults::moe_routed_experts::kActivationBeta;
  // 0: float weights; 8 or 4 (attribute weight_bits): int8 weights, one or two values per byte,
  // with scales (onnx_schemas/weight_quant.py), one per row (block_size 0) or per block_size inputs.
  int quant_bits = 0;
  int64_t block_size = attr_defaults::moe_routed_experts::kBlockSize;
  // bfloat16 weights (no scales): products with the x rows and SwiGLU rows rounded to bfloat16,
  // summed in float32 (docs/quantization.md).
  bool bf16_weights = false;
  // The optional bias inputs are present (MoeRoutedExpertsBuffers::gate_up_bias / down_bias).
  bool gate_up_bias = false;
  bool down_bias = false;
};

struct MoeRoutedExpertsBuffers {
  const float* x = nullptr;                // [T, H]
  const void* expert_idx = nullptr;        // [T, k] int32 or int64
  const float* routing_weights = nullptr;  // [T, k]
  const float* gate_up = nullptr;          // [E, 2I, H], rows gate_0, up_0, gate_1, up_1, ...
  const float* down = nullptr;             // [E, H, I]
  // Quantized weights (weight_bits 8 / 4) instead of gate_up / down: [E, 2I, H] / [E, H, I] int8,
  // or with the last dimension halved for 4 bits; scales [E, 2I] / [E, H] or [.., H/B] / [.., I/B].
  const int8_t* gate_up_q = nullptr;
  const int8_t* down_q = nullptr;
  const float* gate_up_scales = nullptr;
  const float* down_scales = nullptr;
  // bfloat16 weights instead of gate_up / down: [E, 2I, H] / [E, H, I], raw bfloat16 bits.
  const uint16_t* gate_up_bf16 = nullptr;
  const uint16_t* down_bf16 = nullptr;
  // Optional biases (null: none), float for every weight type: gate/up [E, 2I] (interleaved like
  // the rows, added before the clamp) and down [E, H] (weighted like the expert's output).
  const float* gate_up_bias = nullptr;
  const float* down_bias = nullptr;
  float* y = nullptr;  // [T, H]
};

// The pairs (t * k + j) of a call sorted by expert, by a stable counting sort (one expert's pairs
// stay in (token, slot) order, so y sums each token's slots in ascending expert order, ties in
// slot order: the NumPy model's order), for both plans: `active` the experts with pairs,
// ascending; `begin` the first sorted pair of each (+ an end sentinel); `pair` sorted position ->
// pair. Returns false, leaving the vectors as they were, when an index is outside [0, E);
// *bad_pair (if given) is then the first such pair.
bool SortPairsByExpert(const MoeRoutedExpertsParams& params, const void* expert_idx,
                       std::vector<int64_t>* active, std::vector<int64_t>* begin, std::vector<int64_t>* pair,
                       int64_t* bad_pair);

// Phase-1 work item: rows [begin, end) (in the plan's row units) of active expert `expert` (an
// index into the plan's ascending list of experts with pairs).
struct ExpertRowsItem {
  int64_t expert;
  int64_t begin, end;
};

// The work of one row unit, in pairs: each of the expert's pairs plus the weights' own cost
// (streaming and, for quantized rows, converting them), which a decode call's single pair is
// below. A rough weight: it only decides which experts are cut finer.
constexpr int64_t kUnitWeightWork = 4;
// Phase 1 is cut into items of at most this share of the call's work where an expert's pairs
// allow: the items are claimed one at a time by the threads, so the last thread to finish waits
// for at most about this share.
constexpr int64_t kMinUpItems = 64;

// Phase-1 items of a call whose active expert a has pairs[a + 1] - pairs[a] pairs and `units` row
// units: items of `max_units` units, cut down to a single unit for an expert whose full item would
// hold more than 1 / kMinUpItems of the work (the shared expert, a popular expert: one item of
// DeepSeek-V3's shared expert held 17-27 % of a 256-token call's phase 1 and ran alone at its
// end), but never below a one-pair expert's full item (decode keeps its long row runs). Ordered
// largest item first: the threads claim them in order (largest-first scheduling), so the last
// ones are small. Each item writes its own rows only, so neither the cut nor the order changes a
// result.
std::vector<ExpertRowsItem> SplitExpertRows(const std::vector<int64_t>& pairs, int64_t units,
                                            int64_t max_units);

// Phase 2 is split into at least this many column chunks where H allows and each chunk keeps at
// least kMinChunkBytes of weights: the chunks are claimed one at a time by the threads, so with ~16
// the last thread to finish waits for at most a sixteenth of the work (4 MiB chunks alone left a
// 16-token call 6-15 chunks: 2 threads ran >= 0.55 of 1 thread's time from the split alone), while
// a decode call's few experts still stream runs of rows as long as before (the floor binds below
// 16 tokens only).
constexpr int64_t kMinColumnChunks = 16;
constexpr int64_t kMinChunkBytes = int64_t{1024} * 1024;

// Columns per phase-2 chunk: about `bytes` of weights (at `bytes_per_column` per hidden column), cut
// to H / kMinColumnChunks but not below kMinChunkBytes, rounded up to a multiple of 16 (the widest
// lane tiles of the quantized down rows start at such columns), at least 16.
int64_t ColumnsPerChunk(int64_t hidden, int64_t bytes_per_column, int64_t bytes);

// One call's pairs grouped by expert, and its activation buffer.
class MoeRoutedExpertsPlan {
 public:
  // Reads expert_idx. Returns false, touching nothing else, when an index is outside [0, E);
  // *bad_pair is then the first such pair (t * k + j).
  // The plan runs on ActiveCpuIsa()'s path unless UseIsa picks another.
  bool Build(const MoeRoutedExpertsParams& params, const void* expert_idx, int64_t* bad_pair);

  // Before phase 1 when the weights have 4 bits: the x rows in the order the tiles read them;
  // bfloat16 weights: the x rows rounded to bfloat16.
  void PrepareInputs(const MoeRoutedExpertsBuffers& b);
  // Phase 1 over work items [begin, end) of [0, num_up_items()).
  int64_t num_up_items() const { return static_cast<int64_t>(items_.size()); }
  void UpItems(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end);
  // Phase 2 over hidden columns [begin, end) of [0, H) (also zeroes y there first); splits of
  // [0, H) at multiples of 16 give the same y bit for bit.
  void DownColumns(const MoeRoutedExpertsBuffers& b, int64_t begin, int64_t end) const;

  // Columns per phase-2 chunk and items per phase-1 chunk for about `bytes` of weights each.
  int64_t ColumnsPerChunk(int64_t bytes) const;
  int64_t active_experts() const { return static_cast<int64_t>(active_.size()); }

  // Forces an ISA (tests, benchmarks); false when the CPU lacks it.
  bool UseIsa(CpuIsa isa);
  // bfloat16 weights: how the products are computed (Bf16DotOn the plan's ISA path).
  Bf16Dot bf16_dot() const { return bf16_dot_; }

 private:
  void ChooseBf16Dot();  // bf16_dot_ for isa_, and the activation buffer it writes
  ExpertGlu GluOf(const MoeRoutedExpertsBuffers& b, int64_t e) const;  // expert e's activation
  using UpItem = ExpertRowsItem;  // units of kUpRowsPerUnit intermediate rows
  struct ItemPairs {
    int64_t expert;  // expert id
    int64_t first;   // the item's pairs are pair_[first, first + n)
    int64_t n;
  };
  ItemPairs PairsOf(const UpItem& item) const {
    const auto a = static_cast<size_t>(item.expert);
    return {active_[a], begin_[a], begin_[a + 1] - begin_[a]};
  }
  std::pair<int64_t, int64_t> RowsOf(const UpItem& item) const;  // intermediate rows [i0, i1)
  MoeRoutedExpertsParams p_;
  CpuIsa isa_ = CpuIsa::kBaseline;
  Bf16Dot bf16_dot_ = Bf16Dot::kWiden;
  std::vector<int64_t> active_;  // experts with pairs, ascending
  std::vector<int64_t> begin_;   // first sorted pair of each active expert (+ end sentinel)
  std::vector<int64_t> pair_;    // sorted position -> pair index t * k + j
  std::vector<UpItem> items_;
  std::vector<float> act_;    // [P, I] in sorted order (4-bit down weights: each row in their order)
  std::vector<float> xperm_;  // 4 bits: x [T, H] in the order of the gate/up tiles; bfloat16: rounded
  // bfloat16 dot products: x [T, H] and the SwiGLU rows [P, I] (sorted pair order) as bfloat16 bits
  std::vector<uint16_t> xb_, actb_;
};

// The whole op on the calling thread. Returns false (writing nothing) when an index is out of range.
bool MoeRoutedExperts(const MoeRoutedExpertsParams& params, const MoeRoutedExpertsBuffers& buffers,
                      int64_t* bad_pair);

}  // namespace ascend_moe::cpu
