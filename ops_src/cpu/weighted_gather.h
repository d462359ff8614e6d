// The weighted gather shared by the CPU kernels of MoeFinalizeRoutingV2 and MoeTokenUnpermute
// (docs/operators.md §8, §9). Each output row is the sum of its base rows (the residuals) and of
// its K slots' weight * (source row + bias row), accumulated in float32 and rounded once to the row type.
// Plain C++ over raw pointers; knows nothing of ONNX Runtime or torch.
#pragma once

#include <cstdint>

#include "attr_defaults.gen.h"

namespace ascend_moe::cpu {

enum class RowType { kFloat32, kFloat16, kBFloat16 };
enum class IndexType { kInt32, kInt64 };

struct WeightedGatherParams {
  int64_t num_out_rows = 0;              // N
  int64_t k = 1;                         // K: slots per output row
  int64_t hidden = 0;                    // H
  int64_t num_rows = 0;                  // rows of the source table; a slot index outside [0, num_rows) reads
                                         // a zero row (callers validate indices first: only the op's
                                         // "dropped" values get here)
  RowType row_type = RowType::kFloat32;  // source rows, base rows, bias rows and the output
  IndexType index_type = IndexType::kInt32;
  // Slot (i, j)'s index is at i * K + j (token-major) or j * N + i (slot-major).
  bool token_major = true;
  bool has_weights = false;  // weights [N, K]; absent: weight 1
  RowType weight_type = RowType::kFloat32;
  bool skip_zero_weight = false;  // a slot of weight 0 adds nothing (its rows are not read)
  int num_base = 0;               // base rows [N, H] added first (0, 1 or 2)
  bool has_bias = false;          // bias [E, H] selected by expert_idx [N, K]
  IndexType expert_type = IndexType::kInt32;
  // Write the output with non-temporal (cache-bypassing) stores where the CPU has them and the
  // output is 64-byte aligned with rows of 64-byte multiples: faster when the output is much larger
  // than the caches (it is not read before it is overwritten).
  bool streaming_stores = false;
  // drop_pad_mode of MoeFinalizeRoutingV2 (only its index layout is used by the kernel)
  int64_t drop_pad_mode = attr_defaults::moe_finalize_routing_v2::kDropPadMode;
};

struct WeightedGatherBuffers {
  const void* rows = nullptr;                // [num_rows, H]
  const void* row_index = nullptr;           // [N * K]
  const void* weights = nullptr;             // [N, K]
  const void* base[2] = {nullptr, nullptr};  // [N, H] each
  const void* bias = nullptr;                // [E, H]
  const void* expert_index = nullptr;        // [N, K]
  void* out = nullptr;                       // [N, H]
};

// Output rows [begin, end) of the call (any split over threads gives the same result).
void WeightedGatherRows(const WeightedGatherParams& params, const WeightedGatherBuffers& buffers,
                        int64_t begin, int64_t end);

// Output rows per parallel chunk: about `chunk_bytes` of rows read and written per chunk.
int64_t WeightedGatherRowsPerChunk(const WeightedGatherParams& params, int64_t chunk_bytes);

// Position of the first of `n` indices outside [low, high), or -1 when all are inside.
int64_t FirstIndexOutside(const void* index, IndexType type, int64_t n, int64_t low, int64_t high);

// Position (in row_index) of the first slot that is read (all but those of weight 0 when
// skip_zero_weight) and whose index lies outside [low, high); -1 when there is none.
int64_t FirstReadSlotOutside(const WeightedGatherParams& params, const WeightedGatherBuffers& buffers,
                             int64_t low, int64_t high);

// Index value at position i.
int64_t IndexAt(const void* index, IndexType type, int64_t i);

// Element size in bytes of a row type.
inline int64_t RowTypeBytes(RowType t) { return t == RowType::kFloat32 ? 4 : 2; }

}  // namespace ascend_moe::cpu
