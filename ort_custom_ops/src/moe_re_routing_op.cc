// ascend.moe::MoeReRouting for ONNX Runtime (SPEC §2): the op definition (inputs, outputs,
// attributes, shape inference) and the CPU kernel, which validates and calls ops_src/cpu.
#include <iterator>

#include "moe_re_routing_cann.h"
#include "moe_re_routing_validate.h"
#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

namespace {

// Output types and shapes from the input types/shapes (SPEC §2.1); attribute values checked so
// a bad node fails at session creation.
OrtStatusPtr ORT_API_CALL InferMoeReRoutingShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  MoeReRoutingAttrs attrs;
  if (OrtStatusPtr s = InferAttrInt(api, ctx, kMoeReRoutingAttrs[kRrExpertTokenNumType],
                                    &attrs.expert_token_num_type))
    return s;
  if (OrtStatusPtr s = InferAttrInt(api, ctx, kMoeReRoutingAttrs[kRrIdxType], &attrs.idx_type))
    return s;
  const std::string error = CheckMoeReRoutingAttrs(attrs);
  if (!error.empty()) return api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());

  InferredTensor tokens{}, counts{}, scales{};
  if (!GetInferInput(api, ctx, kRrTokens, &tokens)) return nullptr;  // nothing known
  const bool has_counts = GetInferInput(api, ctx, kRrCounts, &counts);
  const bool has_scales = GetInferInput(api, ctx, kRrScales, &scales);

  const InferDim a = tokens.dims.empty() ? InferDim{} : tokens.dims[0];
  InferredTensor permute_scales{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{0, {}}}, true};
  if (has_scales) permute_scales = scales;
  const InferredTensor idx{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {a}, true};
  InferredTensor expert_token_num{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, {InferDim{}}, true};
  if (has_counts) {
    expert_token_num.type = counts.type;
    if (counts.dims.size() == 2) expert_token_num.dims = {counts.dims[1]};
  }

  if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteTokens, tokens)) return s;
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteScales, permute_scales)) return s;
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kRrPermuteIdx, idx)) return s;
  return SetInferOutput(api, ctx, kRrExpertTokenNum, expert_token_num);
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
    params.streaming_stores = params.num_tokens * params.token_row_bytes >= kStreamingBytes;
    ValidateMoeReRoutingCounts(params, counts.data);

    cpu::MoeReRoutingLayout layout;
    if (!layout.Build(params, counts.data)) {
      Fail(Str(kMoeReRoutingName, ": internal error: counts rejected by the CPU kernel"));
    }

    // All four outputs are required by the op definition, so every node has them.
    auto output = [&](size_t i, const std::vector<int64_t>& shape) -> void* {
      return ctx.GetOutput(i, shape).GetTensorMutableRawData();  // null when empty
    };
    cpu::MoeReRoutingBuffers buffers;
    buffers.tokens = tokens.data;
    buffers.permute_tokens = output(kRrPermuteTokens, tokens.shape);
    if (params.has_scales) {
      buffers.scales = scales.data;
      buffers.permute_scales = output(kRrPermuteScales, scales.shape);
    } else {
      output(kRrPermuteScales, {0});  // an empty float tensor, never left unset
    }
    buffers.permute_idx = static_cast<int32_t*>(output(kRrPermuteIdx, {params.num_tokens}));
    layout.WriteExpertTokenNum(output(kRrExpertTokenNum, {params.num_experts}));

    ParallelForRange(ctx, layout.num_rows(), layout.RowsPerChunk(kChunkBytes),
                     [&](int64_t begin, int64_t end) { layout.CopyRows(buffers, begin, end); });
  }

 private:
  MoeReRoutingAttrs attrs_;
};

// The op definition, independent of the execution provider (SPEC §2.1).
struct MoeReRoutingDef {
  static constexpr const char* kName = kMoeReRoutingName;
  static constexpr const AttrSpec* kAttrs = kMoeReRoutingAttrs;
  static constexpr size_t kNumAttrs = std::size(kMoeReRoutingAttrs);
  static constexpr size_t kNumInputs = kRrNumInputs;
  static constexpr size_t kNumOutputs = kRrNumOutputs;
  static bool InputOptional(size_t index) { return index == kRrScales; }
  static bool OutputOptional(size_t /*index*/) { return false; }
  static ONNXTensorElementDataType OutputType(size_t index) {
    return index == kRrPermuteIdx ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32
                                  : ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  }
  static constexpr auto InferShapes = &InferMoeReRoutingShapes;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeReRoutingOps() {
  static const AscendMoeOp<MoeReRoutingDef, MoeReRoutingCpuKernel> cpu_op;
  static const AscendMoeOp<MoeReRoutingDef, MoeReRoutingCannKernel> cann_op;
  return {&cpu_op, &cann_op};
}

}  // namespace ascend_moe
