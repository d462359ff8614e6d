// What MoeFinalizeRoutingV2 and MoeTokenUnpermute share on the ORT side: their output's shape
// inference, their element types as ops_src/cpu's weighted gather names them, and running it over
// the output rows.
#pragma once

#include <string>

#include "op_base.h"
#include "ops_src/cpu/weighted_gather.h"

namespace ascend_moe {

// The output of a weighted gather is [N, H] of the rows' type: N = weights.shape[0] (weights
// [N, K]), or index.shape[0] without weights; H = rows.shape[-1]. Unknown parts stay unknown (a
// bad rank fails at run time). Returns the status of an attribute error (`attr_error`) once the
// output is declared.
inline OrtStatusPtr InferWeightedGatherShape(const OrtApi& api, OrtShapeInferContext* ctx, size_t rows_input,
                                             size_t index_input, size_t weights_input, size_t output,
                                             const std::string& attr_error) {
  InferredTensor rows{}, index{}, weights{};
  if (!GetInferInput(api, ctx, rows_input, &rows)) return nullptr;
  InferredTensor out{rows.type, {InferDim{}, InferDim{}}, true};
  if (!rows.dims.empty()) out.dims[1] = rows.dims.back();
  if (GetInferInput(api, ctx, weights_input, &weights)) {
    if (weights.dims.size() == 2) out.dims[0] = weights.dims[0];
  } else if (GetInferInput(api, ctx, index_input, &index) && index.dims.size() == 1) {
    out.dims[0] = index.dims[0];
  }
  if (OrtStatusPtr s = SetInferOutput(api, ctx, output, out)) return s;
  return attr_error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, attr_error.c_str());
}

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
