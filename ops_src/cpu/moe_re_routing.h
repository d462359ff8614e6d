// MoeReRouting CPU kernel (docs/operators.md §2): regroups the rows of an expert-parallel all-to-all receive
// buffer from (source rank, local expert) order into (local expert, source rank) order.
// Plain C++ over raw pointers: rows are moved as bytes, so one kernel serves every token and scale
// element type. Knows nothing of ONNX Runtime or torch.
#pragma once

#include <cstdint>
#include <vector>

#include "attr_defaults.gen.h"

namespace ascend_moe::cpu {

enum class CountType { kInt32, kInt64 };

struct MoeReRoutingParams {
  int64_t num_tokens = 0;       // A: rows of tokens (and of scales)
  int64_t token_row_bytes = 0;  // H * element size of tokens
  int64_t num_ranks = 0;        // N
  int64_t num_experts = 0;      // E
  int64_t scale_row_bytes = 0;  // bytes per scale row (element size for [A], S * size for [A, S])
  bool has_scales = false;
  CountType count_type = CountType::kInt64;  // element type of the counts and of expert_token_num
  // 1 = per-expert counts, 0 = inclusive prefix sums; defaults from the schema (attr_defaults.gen.h)
  int64_t expert_token_num_type = attr_defaults::moe_re_routing::kExpertTokenNumType;
  int64_t idx_type = attr_defaults::moe_re_routing::kIdxType;  // 0 = gather index, 1 = scatter index
  // Write the rows with non-temporal (cache-bypassing) stores: faster when the output is much
  // larger than the caches, since it is not read before it is overwritten. No effect where the
  // CPU has no such stores (the rows are then copied with memcpy).
  bool streaming_stores = false;
};

struct MoeReRoutingBuffers {
  const void* tokens = nullptr;    // [A, H]
  const void* scales = nullptr;    // [A] or [A, S]; ignored unless has_scales
  void* permute_tokens = nullptr;  // [A, H]
  void* permute_scales = nullptr;  // like scales; ignored unless has_scales
  int32_t* permute_idx = nullptr;  // [A]; may be null (not written)
};

// The (rank, expert) block offsets of one call, computed once from the counts; the rows are then
// moved by CopyRows over any split of the destination rows (each block piece is one memcpy).
class MoeReRoutingLayout {
 public:
  // Reads the N*E counts (row-major, in params.count_type). Returns false, touching nothing else,
  // unless every count is >= 0, they sum to num_tokens, and num_tokens fits the int32 index.
  bool Build(const MoeReRoutingParams& params, const void* counts);

  // Writes expert_token_num ([E], in the counts' type): per-expert totals or their prefix sums.
  void WriteExpertTokenNum(void* out) const;

  // Moves destination rows [begin, end) of [0, A): token rows, scale rows and index entries.
  void CopyRows(const MoeReRoutingBuffers& buffers, int64_t begin, int64_t end) const;

  // Destination rows per parallel chunk: about `chunk_bytes` of data moved per chunk.
  int64_t RowsPerChunk(int64_t chunk_bytes) const;

  int64_t num_rows() const { return params_.num_tokens; }

 private:
  MoeReRoutingParams params_;
  // Blocks in destination order, k = e * N + r. dst_begin_ has N*E + 1 entries (last = A).
  std::vector<int64_t> dst_begin_;
  std::vector<int64_t> src_begin_;
  std::vector<int64_t> expert_totals_;
};

// The whole op on the calling thread. Returns false (writing nothing) if the counts are invalid.
bool MoeReRouting(const MoeReRoutingParams& params, const void* counts, const MoeReRoutingBuffers& buffers,
                  void* expert_token_num);

}  // namespace ascend_moe::cpu
