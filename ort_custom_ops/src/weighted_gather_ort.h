// The ORT side of the two weighted-gather ops, MoeFinalizeRoutingV2 and MoeTokenUnpermute: their
// validations (each defined in its op's <op>_op.cc), their output's shape inference, the check of
// their index against their weights, their element types as ops_src/cpu's weighted gather names
// them, and running it over the output rows (CPU kernel, CANN host fallback).
#pragma once

#include <string>

#include "op_base.h"
#include "ops_src/cpu/weighted_gather.h"

namespace ascend_moe {

namespace finalize = defs::moe_finalize_routing_v2;
namespace unpermute = defs::moe_token_unpermute;

// Each op's validation, shared by its CPU and CANN kernels: ranks and dims (the table checked
// presence and element types), then the index values (host memory); returns the kernel parameters
// and sets the buffers' inputs to the views' data pointers. MoeFinalizeRoutingV2: expanded_row_idx
// and expert_idx checked. MoeTokenUnpermute: the indices of the slots that are read (which depends
// on probs); padded_mode, its one attribute, is checked when the kernel is created (CheckAttrs).
cpu::WeightedGatherParams ValidateMoeFinalizeRoutingV2(const finalize::Inputs& in,
                                                       const finalize::Attrs& attrs,
                                                       cpu::WeightedGatherBuffers* buffers);
cpu::WeightedGatherParams ValidateMoeTokenUnpermute(const unpermute::Inputs& in,
                                                    const unpermute::Attrs& attrs,
                                                    cpu::WeightedGatherBuffers* buffers);

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

// N (output rows) and K (slots per row) of a weighted gather.
struct WeightedGatherSlots {
  int64_t n = 0;
  int64_t k = 1;
};

// Checks Def's index input (1-D [N*K]) against its optional weights ([N, K], K >= 1; absent:
// K = 1, N = the index length); the errors name the inputs.
template <typename Def>
WeightedGatherSlots CheckWeightedGatherSlots(const typename Def::Inputs& in, size_t index_input,
                                             size_t weights_input) {
  const InputView &idx = in[index_input], &weights = in[weights_input];
  auto fail = [&](size_t input, const std::string& what_and_value) {
    Fail(Str(Def::kName, ": input '", Def::kInputs[input].name, "' ", what_and_value));
  };
  if (idx.shape.size() != 1) fail(index_input, Str("must be 1-D [N*K], got shape ", ShapeStr(idx.shape)));
  WeightedGatherSlots s{idx.shape[0], 1};
  if (!weights.present) return s;
  if (weights.shape.size() != 2 || weights.shape[1] < 1) {
    fail(weights_input, Str("must be 2-D [N, K] with K >= 1, got shape ", ShapeStr(weights.shape)));
  }
  s = {weights.shape[0], weights.shape[1]};
  if (idx.shape[0] != s.n * s.k) {
    fail(index_input, Str("must have N*K = ", s.n * s.k, " elements (N = ", s.n, ", K = ", s.k, " from ",
                          Def::kInputs[weights_input].name, "), got shape ", ShapeStr(idx.shape)));
  }
  return s;
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

// An op's validation of a call (every EP's kernel): the kernel parameters; the buffers' inputs
// set to the views' data pointers.
template <typename Def>
using WeightedGatherValidate = cpu::WeightedGatherParams (*)(const typename Def::Inputs&,
                                                             const typename Def::Attrs&,
                                                             cpu::WeightedGatherBuffers*);

// The CPU kernel's Run (CpuKernel) of a weighted gather op: Validate, then the rows gathered into
// output 0 ([N, H] of input 0's type) on the intra-op pool.
template <typename Def, WeightedGatherValidate<Def> Validate>
void RunWeightedGatherCpu(Ort::KernelContext& ctx, const typename Def::Inputs& in,
                          const typename Def::Attrs& attrs) {
  cpu::WeightedGatherBuffers buffers;
  const cpu::WeightedGatherParams params = Validate(in, attrs, &buffers);
  buffers.out = GetCheckedOutput(ctx, Def::kName, Def::kOutputs, 0, {params.num_out_rows, params.hidden},
                                 in[0].type, /*required=*/true);
  RunWeightedGather(ctx, params, buffers);
}

// The CPU kernel of a weighted gather op (its Ops() registers it).
template <typename Def, WeightedGatherValidate<Def> Validate>
using WeightedGatherCpuKernel = CpuKernel<Def, RunWeightedGatherCpu<Def, Validate>>;

// The CANN kernel's host fallback (CannCall::OnHostCopies on `device`): what the CPU kernel does,
// on host copies of the inputs.
template <typename Call, typename Device, typename Validate>
void WeightedGatherOnHost(Call& call, const Device& device, Validate validate) {
  call.OnHostCopies(device, [&](const auto& host, const auto& host_output) {
    cpu::WeightedGatherBuffers b;
    const cpu::WeightedGatherParams p = validate(host, call.attrs, &b);
    b.out = host_output(0, {p.num_out_rows, p.hidden}, host[0].type);
    cpu::WeightedGatherRows(p, b, 0, p.num_out_rows);
  });
}

}  // namespace ascend_moe
