// ascend.moe::MoeReRouting for ONNX Runtime (docs/operators.md §2): the op definition (inputs, outputs,
// attributes, shape inference) and the CPU kernel, which validates and calls ops_src/cpu.
#include <iterator>

#include "moe_re_routing_cann.h"
#include "moe_re_routing_validate.h"
#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

namespace {

// Output types and shapes from the input types/shapes (docs/operators.md §2.1). An input without
// dims has an unknown rank (a rank-0 input fails at run time), and the C API cannot declare
// "unknown rank" (it would declare a scalar, which ORT's optimisers then trust). tokens is
// [A, H] by the contract, so permute_tokens is declared [?, ?] then; per_token_scales may be [A]
// or [A, S], so permute_per_token_scales is left unset for scales of unknown rank: ORT types an
// unset output like the node's last input, which is per_token_scales itself (kernel creation
// checks that type), and leaves its shape unknown.
OrtStatusPtr SetMoeReRoutingOutputs(const OrtApi& api, OrtShapeInferContext* ctx) {
  using namespace rerouting_defs;
  InferredTensor tokens{}, counts{}, scales{};
  if (!GetInferInput(api, ctx, kRrTokens, &tokens)) return nullptr;  // nothing known
  const bool has_counts = GetInferInput(api, ctx, kRrCounts, &counts);
  const bool has_scales = GetInferInput(api, ctx, kRrScales, &scales);
  const bool tokens_rank_known = !tokens.dims.empty();

  InferredTensor permute_tokens = tokens;
  if (!tokens_rank_known) permute_tokens.dims = {InferDim{}, InferDim{}};  // [A, H], both unknown
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteTokens, permute_tokens)) return s;
  if (!has_scales) {
    const InferredTensor empty{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{0, {}}}, true};
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteScales, empty)) return s;
  } else if (!scales.dims.empty()) {
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteScales, scales)) return s;
  }
  const InferDim a = tokens_rank_known ? tokens.dims[0] : InferDim{};
  const InferredTensor idx{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {a}, true};
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteIdx, idx)) return s;
  if (!has_counts) return nullptr;
  InferredTensor expert_token_num{counts.type, {InferDim{}}, true};  // [E], rank 1 in any case
  if (counts.dims.size() == 2) expert_token_num.dims = {counts.dims[1]};
  return SetInferOutput(api, ctx, kRrExpertTokenNum, expert_token_num);
}

// Attribute values are checked so that a bad node fails at session creation.
OrtStatusPtr ORT_API_CALL InferMoeReRoutingShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  using namespace rerouting_defs;
  MoeReRoutingAttrs attrs{};
  attrs.expert_token_num_type = InferAttrInt(api, ctx, kAttrs[kAttrExpertTokenNumType]);
  attrs.idx_type = InferAttrInt(api, ctx, kAttrs[kAttrIdxType]);
  // A bad attribute fails kernel creation; the outputs are declared all the same, since ORT
  // would type the unset ones like the node's last input and report a type clash instead.
  const std::string error = CheckMoeReRoutingAttrs(attrs);
  if (OrtStatusPtr s = SetMoeReRoutingOutputs(api, ctx)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

// Rows moved per parallel chunk: large enough to amortise scheduling, small enough that the
// threads finish together whatever the block sizes are.
constexpr int64_t kChunkBytes = int64_t{1} << 20;
// Token outputs at least this large are written with non-temporal stores: they are larger than
// the last-level caches of common CPUs, which could not keep them for the consumer anyway, and
// bypassing the caches saves reading every destination line before overwriting it.
constexpr int64_t kStreamingBytes = int64_t{32} << 20;

struct MoeReRoutingCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit MoeReRoutingCpuKernel(const OrtKernelInfo* info) : attrs_(ReadMoeReRoutingAttrs(info)) {}

  void Compute(Ort::KernelContext& ctx) {
    const InputView tokens = GetInputView(ctx, kRrTokens);
    const InputView counts = GetInputView(ctx, kRrCounts);
    const InputView scales = GetInputView(ctx, kRrScales);
    cpu::MoeReRoutingParams params = ValidateMoeReRoutingShapes(tokens, counts, scales, attrs_);
    // A * row_bytes >= kStreamingBytes, without the product (it overflows for huge rows).
    params.streaming_stores =
        params.num_tokens > 0 &&
        params.token_row_bytes >= (kStreamingBytes + params.num_tokens - 1) / params.num_tokens;
    // The layout reads and checks the counts in one pass; only a rejected call pays for the
    // pass that finds what to report.
    cpu::MoeReRoutingLayout layout;
    if (!layout.Build(params, counts.data)) {
      ValidateMoeReRoutingCounts(params, counts.data);
      Fail(Str(kMoeReRoutingName, ": internal error: counts rejected by the CPU kernel"));
    }

    auto output = [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
      return GetCheckedOutput(ctx, kMoeReRoutingName, rerouting_defs::kOutputs, i, shape, type,
                              /*required=*/true);
    };
    cpu::MoeReRoutingBuffers buffers;
    buffers.tokens = tokens.data;
    buffers.permute_tokens = output(kRrPermuteTokens, tokens.shape, tokens.type);
    if (params.has_scales) {
      buffers.scales = scales.data;
      buffers.permute_scales = output(kRrPermuteScales, scales.shape, scales.type);
    } else {  // an empty float tensor, never left unset
      output(kRrPermuteScales, {0}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
    }
    buffers.permute_idx = static_cast<int32_t*>(
        output(kRrPermuteIdx, {params.num_tokens}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32));
    layout.WriteExpertTokenNum(output(kRrExpertTokenNum, {params.num_experts}, counts.type));

    ParallelForRange(ctx, layout.num_rows(), layout.RowsPerChunk(kChunkBytes),
                     [&](int64_t begin, int64_t end) { layout.CopyRows(buffers, begin, end); });
  }

 private:
  MoeReRoutingAttrs attrs_;
};

// The op definition, independent of the execution provider (docs/operators.md §2.1).
struct MoeReRoutingDef {
  static constexpr const char* kName = kMoeReRoutingName;
  static constexpr int kSinceVersion = rerouting_defs::kSinceVersion;
  static constexpr const ParamSpec* kInputs = rerouting_defs::kInputs;
  static constexpr size_t kNumInputs = std::size(rerouting_defs::kInputs);
  static constexpr const ParamSpec* kOutputs = rerouting_defs::kOutputs;
  static constexpr size_t kNumOutputs = std::size(rerouting_defs::kOutputs);
  static constexpr const AttrSpec* kAttrs = rerouting_defs::kAttrs;
  static constexpr size_t kNumAttrs = std::size(rerouting_defs::kAttrs);
  static constexpr auto InferShapes = &InferMoeReRoutingShapes;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeReRoutingOps() {
  static const AscendMoeOp<MoeReRoutingDef, MoeReRoutingCpuKernel> cpu_op;
  static const AscendMoeOp<MoeReRoutingDef, MoeReRoutingCannKernel> cann_op;
  return {&cpu_op, &cann_op};
}

}  // namespace ascend_moe
