// ascend.moe::MoeFinalizeRoutingV2 for ONNX Runtime (docs/operators.md §8): the op definition (inputs,
// output, attribute, shape inference) and the CPU kernel, which validates and runs ops_src/cpu's
// weighted gather over the output rows on the session's intra-op pool.
#include <iterator>

#include "moe_finalize_routing_v2_validate.h"
#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/moe_finalize_routing_v2.h"

namespace ascend_moe {

namespace {

// y is [N, H] like expanded_x's type: N = scales.shape[0], or expanded_row_idx.shape[0] without
// scales; H = expanded_x.shape[-1]. Unknown parts stay unknown (a bad rank fails at run time).
OrtStatusPtr ORT_API_CALL InferMoeFinalizeRoutingV2Shapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  using namespace finalize_defs;
  const OrtApi& api = Ort::GetApi();
  const std::string error = CheckDropPadMode(InferAttrInt(api, ctx, kAttrs[kAttrDropPadMode]));
  InferredTensor x{}, idx{}, scales{};
  if (!GetInferInput(api, ctx, kInExpandedX, &x)) return nullptr;
  InferredTensor y{x.type, {InferDim{}, InferDim{}}, true};
  if (!x.dims.empty()) y.dims[1] = x.dims.back();
  if (GetInferInput(api, ctx, kInScales, &scales)) {
    if (scales.dims.size() == 2) y.dims[0] = scales.dims[0];
  } else if (GetInferInput(api, ctx, kInExpandedRowIdx, &idx) && idx.dims.size() == 1) {
    y.dims[0] = idx.dims[0];
  }
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutY, y)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

// Bytes read and written per parallel chunk: large enough to amortise scheduling.
constexpr int64_t kChunkBytes = int64_t{1} << 20;
// Outputs at least this large are written with non-temporal stores: larger than the last-level
// caches of common CPUs, which could not keep them for the consumer anyway.
constexpr int64_t kStreamingBytes = int64_t{32} << 20;

struct MoeFinalizeRoutingV2CpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit MoeFinalizeRoutingV2CpuKernel(const OrtKernelInfo* info)
      : mode_(ReadIntAttr(info, finalize_defs::kName, finalize_defs::kAttrs[finalize_defs::kAttrDropPadMode])) {
    const std::string error = CheckDropPadMode(mode_);
    if (!error.empty()) Fail(error);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace finalize_defs;
    InputView inputs[kNumIns];
    for (size_t i = 0; i < kNumIns; ++i) inputs[i] = GetInputView(ctx, i);
    cpu::WeightedGatherBuffers buffers;
    cpu::WeightedGatherParams params = ValidateMoeFinalizeRoutingV2(inputs, mode_, &buffers);
    buffers.out = GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.num_out_rows, params.hidden},
                                   inputs[kInExpandedX].type, /*required=*/true);
    // N * row bytes >= kStreamingBytes, without the product (it could overflow)
    params.streaming_stores = params.num_out_rows > 0 &&
                              params.hidden * cpu::RowTypeBytes(params.row_type) >=
                                  (kStreamingBytes + params.num_out_rows - 1) / params.num_out_rows;
    ParallelForRange(ctx, params.num_out_rows, cpu::WeightedGatherRowsPerChunk(params, kChunkBytes),
                     [&](int64_t begin, int64_t end) { cpu::WeightedGatherRows(params, buffers, begin, end); });
  }

 private:
  int64_t mode_;
};

struct MoeFinalizeRoutingV2Def {
  static constexpr const char* kName = finalize_defs::kName;
  static constexpr int kSinceVersion = finalize_defs::kSinceVersion;
  static constexpr const ParamSpec* kInputs = finalize_defs::kInputs;
  static constexpr size_t kNumInputs = std::size(finalize_defs::kInputs);
  static constexpr const ParamSpec* kOutputs = finalize_defs::kOutputs;
  static constexpr size_t kNumOutputs = std::size(finalize_defs::kOutputs);
  static constexpr const AttrSpec* kAttrs = finalize_defs::kAttrs;
  static constexpr size_t kNumAttrs = std::size(finalize_defs::kAttrs);
  static constexpr auto InferShapes = &InferMoeFinalizeRoutingV2Shapes;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeFinalizeRoutingV2Ops() {
  static const AscendMoeOp<MoeFinalizeRoutingV2Def, MoeFinalizeRoutingV2CpuKernel> cpu_op;
  return {&cpu_op};
}

}  // namespace ascend_moe
