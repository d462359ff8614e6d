// ascend.moe::MoeTokenUnpermute for ONNX Runtime (docs/operators.md §9): the op definition and the CPU
// kernel, which validates and runs ops_src/cpu's weighted gather (MoeFinalizeRoutingV2's kernel,
// token-major indices) over the output rows on the session's intra-op pool.
#include <iterator>

#include "moe_finalize_routing_v2_validate.h"
#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/moe_finalize_routing_v2.h"

namespace ascend_moe {

namespace {

// unpermuted_tokens is [N, H] of permuted_tokens' type: N = probs.shape[0], or
// sorted_indices.shape[0] without probs; H = permuted_tokens.shape[-1].
OrtStatusPtr ORT_API_CALL InferMoeTokenUnpermuteShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  using namespace unpermute_defs;
  const OrtApi& api = Ort::GetApi();
  const std::string error = CheckPaddedMode(InferAttrInt(api, ctx, kAttrs[kAttrPaddedMode]));
  InferredTensor tokens{}, idx{}, probs{};
  if (!GetInferInput(api, ctx, kInPermutedTokens, &tokens)) return nullptr;
  InferredTensor y{tokens.type, {InferDim{}, InferDim{}}, true};
  if (!tokens.dims.empty()) y.dims[1] = tokens.dims.back();
  if (GetInferInput(api, ctx, kInProbs, &probs)) {
    if (probs.dims.size() == 2) y.dims[0] = probs.dims[0];
  } else if (GetInferInput(api, ctx, kInSortedIndices, &idx) && idx.dims.size() == 1) {
    y.dims[0] = idx.dims[0];
  }
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutUnpermutedTokens, y)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

constexpr int64_t kChunkBytes = int64_t{1} << 20;
// Outputs at least this large are written with non-temporal stores: larger than the last-level
// caches of common CPUs, which could not keep them for the consumer anyway.
constexpr int64_t kStreamingBytes = int64_t{32} << 20;

struct MoeTokenUnpermuteCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit MoeTokenUnpermuteCpuKernel(const OrtKernelInfo* info) {
    const std::string error = CheckPaddedMode(
        ReadIntAttr(info, unpermute_defs::kName, unpermute_defs::kAttrs[unpermute_defs::kAttrPaddedMode]));
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace unpermute_defs;
    InputView inputs[kNumIns];
    for (size_t i = 0; i < kNumIns; ++i) inputs[i] = GetInputView(ctx, i);
    cpu::WeightedGatherBuffers buffers;
    cpu::WeightedGatherParams params = ValidateMoeTokenUnpermute(inputs, &buffers);
    buffers.out = GetCheckedOutput(ctx, kName, kOutputs, kOutUnpermutedTokens, {params.num_out_rows, params.hidden},
                                   inputs[kInPermutedTokens].type, /*required=*/true);
    // N * row bytes >= kStreamingBytes, without the product (it could overflow)
    params.streaming_stores = params.num_out_rows > 0 &&
                              params.hidden * cpu::RowTypeBytes(params.row_type) >=
                                  (kStreamingBytes + params.num_out_rows - 1) / params.num_out_rows;
    ParallelForRange(ctx, params.num_out_rows, cpu::WeightedGatherRowsPerChunk(params, kChunkBytes),
                     [&](int64_t begin, int64_t end) { cpu::WeightedGatherRows(params, buffers, begin, end); });
  }
};

struct MoeTokenUnpermuteDef {
  static constexpr const char* kName = unpermute_defs::kName;
  static constexpr int kSinceVersion = unpermute_defs::kSinceVersion;
  static constexpr const ParamSpec* kInputs = unpermute_defs::kInputs;
  static constexpr size_t kNumInputs = std::size(unpermute_defs::kInputs);
  static constexpr const ParamSpec* kOutputs = unpermute_defs::kOutputs;
  static constexpr size_t kNumOutputs = std::size(unpermute_defs::kOutputs);
  static constexpr const AttrSpec* kAttrs = unpermute_defs::kAttrs;
  static constexpr size_t kNumAttrs = std::size(unpermute_defs::kAttrs);
  static constexpr auto InferShapes = &InferMoeTokenUnpermuteShapes;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeTokenUnpermuteOps() {
  static const AscendMoeOp<MoeTokenUnpermuteDef, MoeTokenUnpermuteCpuKernel> cpu_op;
  return {&cpu_op};
}

}  // namespace ascend_moe
