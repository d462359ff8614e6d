// ascend.moe::MoeReRouting for ONNX Runtime (docs/operators.md §2): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, and the CPU kernel, which validates
// (moe_re_routing_validate, shared with the CANN kernel) and calls ops_src/cpu.
#include "cann_kernel.h"
#include "moe_re_routing_validate.h"
#include "op_base.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

using namespace rerouting_defs;

namespace {

// Output types and shapes from the input types/shapes (docs/operators.md §2.1). An input without
// dims has an unknown rank (a rank-0 input fails at run time), and the C API cannot declare
// "unknown rank" (it would declare a scalar, which ORT's optimisers then trust). tokens is
// [A, H] by the contract, so permute_tokens is declared [?, ?] then; per_token_scales may be [A]
// or [A, S], so permute_per_token_scales is left unset for scales of unknown rank: ORT types an
// unset output like the node's last input, which is per_token_scales itself (kernel creation
// checks that type), and leaves its shape unknown.
OrtStatusPtr SetMoeReRoutingOutputs(const OrtApi& api, OrtShapeInferContext* ctx) {
  InferredTensor tokens{}, counts{}, scales{};
  if (!GetInferInput(api, ctx, kInTokens, &tokens)) return nullptr;  // nothing known
  const bool has_counts = GetInferInput(api, ctx, kInExpertTokenNumPerRank, &counts);
  const bool has_scales = GetInferInput(api, ctx, kInPerTokenScales, &scales);
  const bool tokens_rank_known = !tokens.dims.empty();

  InferredTensor permute_tokens = tokens;
  if (!tokens_rank_known) permute_tokens.dims = {InferDim{}, InferDim{}};  // [A, H], both unknown
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutPermuteTokens, permute_tokens)) return s;
  if (!has_scales) {
    const InferredTensor empty{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{0, {}}}, true};
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutPermutePerTokenScales, empty)) return s;
  } else if (!scales.dims.empty()) {
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutPermutePerTokenScales, scales)) return s;
  }
  const InferDim a = tokens_rank_known ? tokens.dims[0] : InferDim{};
  const InferredTensor idx{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {a}, true};
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutPermuteTokenIdx, idx)) return s;
  if (!has_counts) return nullptr;
  InferredTensor expert_token_num{counts.type, {InferDim{}}, true};  // [E], rank 1 in any case
  if (counts.dims.size() == 2) expert_token_num.dims = {counts.dims[1]};
  return SetInferOutput(api, ctx, kOutExpertTokenNum, expert_token_num);
}

}  // namespace

// Attribute values are checked so that a bad node fails at session creation.
OrtStatusPtr ORT_API_CALL rerouting_defs::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  // A bad attribute fails kernel creation; the outputs are declared all the same, since ORT
  // would type the unset ones like the node's last input and report a type clash instead.
  std::string error;
  InferAttrs(api, ctx, &error);
  if (OrtStatusPtr s = SetMoeReRoutingOutputs(api, ctx)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

namespace {

// Rows moved per parallel chunk: large enough to amortise scheduling, small enough that the
// threads finish together whatever the block sizes are.
constexpr int64_t kChunkBytes = int64_t{1 << 20};
// Token outputs at least this large are written with non-temporal stores: they are larger than
// the last-level caches of common CPUs, which could not keep them for the consumer anyway, and
// bypassing the caches saves reading every destination line before overwriting it.
constexpr int64_t kStreamingBytes = int64_t{32 << 20};

void RunMoeReRoutingCpu(Ort::KernelContext& ctx, const rerouting_defs::Def::Inputs& in,
                        const rerouting_defs::Def::Attrs& attrs) {
  const InputView& tokens = in[kInTokens];
  const InputView& counts = in[kInExpertTokenNumPerRank];
  const InputView& scales = in[kInPerTokenScales];
  cpu::MoeReRoutingParams params = ValidateMoeReRoutingShapes(tokens, counts, scales, attrs);
  // A * row_bytes >= kStreamingBytes, without the product (it overflows for huge rows).
  params.streaming_stores =
      params.num_tokens > 0 &&
      params.token_row_bytes >= (kStreamingBytes + params.num_tokens - 1) / params.num_tokens;
  // The layout reads and checks the counts in one pass; only a rejected call pays for the
  // pass that finds what to report.
  cpu::MoeReRoutingLayout layout;
  if (!layout.Build(params, counts.data)) {
    ValidateMoeReRoutingCounts(params, counts.data);
    Fail(Str(kName, ": internal error: counts rejected by the CPU kernel"));
  }

  auto output = [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
    return GetCheckedOutput(ctx, kName, kOutputs, i, shape, type,
                            /*required=*/true);
  };
  cpu::MoeReRoutingBuffers buffers;
  buffers.tokens = tokens.data;
  buffers.permute_tokens = output(kOutPermuteTokens, tokens.shape, tokens.type);
  if (params.has_scales) {
    buffers.scales = scales.data;
    buffers.permute_scales = output(kOutPermutePerTokenScales, scales.shape, scales.type);
  } else {  // an empty float tensor, never left unset
    output(kOutPermutePerTokenScales, {0}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  }
  buffers.permute_idx = static_cast<int32_t*>(
      output(kOutPermuteTokenIdx, {params.num_tokens}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32));
  layout.WriteExpertTokenNum(output(kOutExpertTokenNum, {params.num_experts}, counts.type));

  ParallelForRange(ctx, layout.num_rows(), layout.RowsPerChunk(kChunkBytes),
                   [&](int64_t begin, int64_t end) { layout.CopyRows(buffers, begin, end); });
}

}  // namespace

std::vector<const OrtCustomOp*> MoeReRoutingOps() {
  return OpKernels<rerouting_defs::Def, CpuKernel<rerouting_defs::Def, &RunMoeReRoutingCpu>>(
      MoeReRoutingCannOp());
}

}  // namespace ascend_moe
