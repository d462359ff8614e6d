// The expert sort shared by the CPU kernels of MoeInitRoutingV3, MoeTokenPermute and MoeInitRouting
// (docs/operators.md): a stable counting sort of the (token, slot) pairs by expert, then one copy
// (or int8 quantisation) per output row.
// Plain C++ over raw pointers; knows nothing of ONNX Runtime or torch. The sort runs on the calling
// thread (a histogram pass, a prefix sum and one scatter of the pair positions); the rows are
// written by ExpandRows over any split of the output rows, so the caller parallelises them.
#pragma once

#include <cstdint>
#include <vector>

#include "attr_defaults.gen.h"

namespace ascend_moe::cpu {

enum class RowType { kFloat, kFloat16, kBFloat16, kInt8 };

struct MoeInitRoutingParams {
  int64_t num_tokens = 0;  // N
  int64_t top_k = 1;       // K (pairs per token)
  int64_t cols = 0;        // H
  RowType x_type = RowType::kFloat;
  bool idx_int64 = false;  // expert ids are int64 (else int32)
  // MoeInitRoutingV3 attributes (active_expert_end already resolved); MoeTokenPermute sets
  // permute = true and uses num_out_rows only.
  int64_t expert_num = attr_defaults::moe_init_routing_v3::kExpertNum;  // -1 is rejected: required in effect
  int64_t expert_start = attr_defaults::moe_init_routing_v3::kActiveExpertStart;
  int64_t expert_end = 0;
  int64_t active_num = attr_defaults::moe_init_routing_v3::kActiveNum;
  int64_t expert_capacity = attr_defaults::moe_init_routing_v3::kExpertCapacity;
  int64_t drop_pad_mode = attr_defaults::moe_init_routing_v3::kDropPadMode;
  // 0 cumsum, 1 count, 2 key/value
  int64_t tokens_num_type = attr_defaults::moe_init_routing_v3::kExpertTokensNumType;
  int64_t quant_mode = attr_defaults::moe_init_routing_v3::kQuantMode;  // -1 none, 0 static, 1 dynamic
  // 0 gather (row of each pair), 1 scatter (pair of each row)
  int64_t row_idx_type = attr_defaults::moe_init_routing_v3::kRowIdxType;
  int64_t scale_rows = 0;  // rows of the scale input (0 = absent)
  bool permute = false;
  int64_t num_out_rows = 0;  // MoeTokenPermute: R, already resolved from num_out_tokens
};

struct MoeInitRoutingBuffers {
  const void* x = nullptr;          // [N, H]
  const float* scale = nullptr;     // see docs/operators.md; null when absent
  const float* offset = nullptr;    // [1], static quantisation only
  void* expanded_x = nullptr;       // [rows, H] of x's type, or int8
  float* expanded_scale = nullptr;  // [rows]; may be null
};

// MoeInitRouting: the flat position of the first row_idx entry outside [0, pairs) or repeated
// (a permutation is required), or -1.
int64_t FirstBadRowIdx(const int32_t* row_idx, int64_t pairs);

class MoeInitRoutingPlan {
 public:
  // Sorts the pairs. Returns -1, or the flat position of the first expert id outside
  // [0, expert_num) (MoeTokenPermute, MoeInitRouting: outside [0, 2^31 - 1)), leaving the plan
  // unusable. `row_idx` (MoeInitRouting, with permute = true; a permutation of [0, N*K), see
  // FirstBadRowIdx) names the pairs: output row i reads token row_idx[order[i]] % N and
  // WriteRowIdx writes out[row_idx[order[i]]] = i.
  int64_t Build(const MoeInitRoutingParams& params, const void* expert_idx, const int32_t* row_idx = nullptr);

  int64_t out_rows() const { return static_cast<int64_t>(src_row_.size()); }
  // expanded_row_idx / sorted_indices [N*K].
  void WriteRowIdx(int32_t* out) const;
  // expert_tokens_count_or_cumsum: [end - start] or [expert_num, 2].
  void WriteCounts(int64_t* out) const;
  // MoeInitRouting's expanded_expert_idx: the expert ids in sorted order [N*K].
  void WriteSortedExperts(const void* expert_idx, int32_t* out) const;
  // Output rows [begin, end): rows of expanded_x and entries of expanded_scale.
  void ExpandRows(const MoeInitRoutingBuffers& buffers, int64_t begin, int64_t end) const;
  // Output rows per parallel chunk for about `chunk_bytes` written per chunk.
  int64_t RowsPerChunk(int64_t chunk_bytes) const;

 private:
  MoeInitRoutingParams p_;
  std::vector<int32_t> order_;        // pair positions sorted by expert (active pairs first)
  std::vector<int64_t> counts_;       // pairs per active expert (MoeTokenPermute: per id)
  std::vector<int32_t> src_row_;      // per output row: source token, -1 = zero row
  std::vector<int32_t> row_expert_;   // per output row: expert - start (smoothing scale row)
  int64_t available_ = 0;             // pairs with an active expert
  const int32_t* row_idx_ = nullptr;  // MoeInitRouting's pair names
};

}  // namespace ascend_moe::cpu
