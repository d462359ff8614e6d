// What the three init-routing ops (MoeInitRoutingV3, MoeTokenPermute, MoeInitRouting) share in
// their ORT glue: the kernel's row type of an ONNX element type, where a host computation writes
// its outputs (the CPU kernel: ORT's outputs; the CANN host fallback: host mirrors), what shape
// inference knows of a node, the expanded rows written on the intra-op pool, and the CPU kernel that
// runs the host computation on ORT's outputs.
#pragma once

#include <functional>
#include <vector>

#include "op_utils.h"
#include "ops_src/cpu/enum_names.h"
#include "ops_src/cpu/expert_sort.h"

namespace ascend_moe {

// Writable host memory for output `index` of `shape` and `type`.
using HostOutputFn =
    std::function<void*(size_t index, const std::vector<int64_t>& shape, ONNXTensorElementDataType type)>;

// Bytes read and written per parallel chunk of the expanded rows.
inline constexpr int64_t kExpertSortChunkBytes = int64_t{1 << 20};

// The row type of x / tokens (the tables allow float, float16, bfloat16 and int8 only).
inline cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  static constexpr EnumValue<ONNXTensorElementDataType, cpu::RowType> kRowTypes[] = {
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16, cpu::RowType::kFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16, cpu::RowType::kBFloat16},
      {ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8, cpu::RowType::kInt8}};
  return ValueOf(kRowTypes, t, cpu::RowType::kFloat);
}

// The plan parameters every init-routing op's validation sets: N tokens of K slots, H columns,
// the element types of the rows and of the expert ids.
inline cpu::MoeInitRoutingParams RoutingParams(int64_t n, int64_t k, int64_t h,
                                               ONNXTensorElementDataType row_type,
                                               ONNXTensorElementDataType ids_type) {
  cpu::MoeInitRoutingParams p;
  p.num_tokens = n;
  p.top_k = k;
  p.cols = h;
  p.x_type = RowTypeOf(row_type);
  p.idx_int64 = ids_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  return p;
}

// What shape inference knows of an init-routing node: the rows' type (float when unknown), H (the
// rows' dim 1, when they are 2-D), and N, K and the N*K (token, slot) pairs from the expert ids
// ([N, K], or [N] with K = 1 where min_ids_rank is 1); -1 where unknown.
struct InferredRouting {
  ONNXTensorElementDataType row_type = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  InferDim h, tokens, k, pairs;
};
inline InferredRouting InferRouting(const OrtApi& api, OrtShapeInferContext* ctx, size_t rows_input,
                                    size_t ids_input, size_t min_ids_rank) {
  InferredRouting r;
  InferredTensor rows{}, ids{};
  if (GetInferInput(api, ctx, rows_input, &rows)) {
    r.row_type = rows.type;
    if (rows.dims.size() == 2) r.h = rows.dims[1];
  }
  if (GetInferInput(api, ctx, ids_input, &ids) && ids.dims.size() >= min_ids_rank && ids.dims.size() <= 2) {
    r.tokens = ids.dims[0];
    r.k = ids.dims.size() == 2 ? ids.dims[1] : InferDim{1, {}};
    if (r.tokens.value >= 0 && r.k.value >= 0) r.pairs.value = r.tokens.value * r.k.value;
  }
  return r;
}

// Writes expanded rows [0, rows) of `plan` on the session's intra-op pool.
inline void ExpandRowsInParallel(Ort::KernelContext& ctx, const cpu::MoeInitRoutingPlan& plan,
                                 const cpu::MoeInitRoutingBuffers& buffers, int64_t rows) {
  ParallelForRange(ctx, rows, plan.RowsPerChunk(kExpertSortChunkBytes),
                   [&](int64_t begin, int64_t end) { plan.ExpandRows(buffers, begin, end); });
}

// The CPU kernel's Run (CpuKernel) of an op whose host computation is `Compute`: its outputs are
// ORT's, checked like every CPU kernel's.
template <typename Def, void (*Compute)(Ort::KernelContext&, const typename Def::Inputs&,
                                        const typename Def::Attrs&, const HostOutputFn&)>
void RunOnKernelOutputs(Ort::KernelContext& ctx, const typename Def::Inputs& in,
                        const typename Def::Attrs& attrs) {
  Compute(ctx, in, attrs, [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
    return GetCheckedOutput(ctx, Def::kName, Def::kOutputs, i, shape, type, /*required=*/true);
  });
}

}  // namespace ascend_moe
