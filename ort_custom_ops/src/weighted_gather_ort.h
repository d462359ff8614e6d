// What MoeFinalizeRoutingV2 and MoeTokenUnpermute share on the ORT side: their element types as
// ops_src/cpu's weighted gather names them, and running it over the output rows.
#pragma once

#include "op_base.h"
#include "ops_src/cpu/weighted_gather.h"

namespace ascend_moe {

inline cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::RowType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::RowType::kBFloat16;
  return cpu::RowType::kFloat32;
}

inline cpu::IndexType IndexTypeOf(ONNXTensorElementDataType t) {
  return t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 ? cpu::IndexType::kInt64 : cpu::IndexType::kInt32;
}

// Bytes read and written per parallel chunk: large enough to amortise scheduling.
inline constexpr int64_t kWeightedGatherChunkBytes = int64_t{1 << 20};
// Outputs at least this large are written with non-temporal stores: larger than the last-level
// caches of common CPUs, which could not keep them for the consumer anyway.
inline constexpr int64_t kWeightedGatherStreamingBytes = int64_t{32 << 20};

// Runs the weighted gather over the output rows on the session's intra-op pool.
inline void RunWeightedGather(Ort::KernelContext& ctx, cpu::WeightedGatherParams params,
                              const cpu::WeightedGatherBuffers& buffers) {
  // N * row bytes >= the streaming threshold, without the product (it could overflow)
  params.streaming_stores =
      params.num_out_rows > 0 &&
      params.hidden * cpu::RowTypeBytes(params.row_type) >=
          (kWeightedGatherStreamingBytes + params.num_out_rows - 1) / params.num_out_rows;
  ParallelForRange(ctx, params.num_out_rows,
                   cpu::WeightedGatherRowsPerChunk(params, kWeightedGatherChunkBytes),
                   [&](int64_t begin, int64_t end) { cpu::WeightedGatherRows(params, buffers, begin, end); });
}

}  // namespace ascend_moe
