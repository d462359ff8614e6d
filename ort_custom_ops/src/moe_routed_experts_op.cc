// ascend.moe::MoeRoutedExperts for ONNX Runtime (docs/operators.md §3): the op definition (inputs,
// outputs, attribute, shape inference) and the CPU kernel, which validates
// (moe_routed_experts_validate) and runs ops_src/cpu's two phases on the session's intra-op pool.
// CPU execution provider only: on a session with another provider ORT places the node on the CPU.
#include <iterator>
#include <new>
#include <stdexcept>

#include "moe_routed_experts_validate.h"
#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/moe_routed_experts.h"

namespace ascend_moe {

namespace {

// y is float [T, H] like x (symbolic dims kept); [?, ?] when x's rank is unknown (a rank other
// than 2 fails at run time with the validation's message).
OrtStatusPtr ORT_API_CALL InferMoeRoutedExpertsShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  InferredTensor x{};
  InferredTensor y{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{}, InferDim{}}, true};
  if (GetInferInput(api, ctx, experts_defs::kInX, &x) && x.dims.size() == 2) y.dims = x.dims;
  return SetInferOutput(api, ctx, experts_defs::kOutY, y);
}

// Weight bytes per parallel chunk: large enough that one thread streams long contiguous blocks,
// small enough to split a decode call's few experts over several threads.
constexpr int64_t kChunkBytes = int64_t{4} << 20;

struct MoeRoutedExpertsCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit MoeRoutedExpertsCpuKernel(const OrtKernelInfo* info) : limit_(ReadMoeRoutedExpertsLimit(info)) {}

  void Compute(Ort::KernelContext& ctx) {
    using namespace experts_defs;
    const InputView x = GetInputView(ctx, kInX);
    const InputView idx = GetInputView(ctx, kInExpertIdx);
    const InputView w = GetInputView(ctx, kInRoutingWeights);
    const InputView gu = GetInputView(ctx, kInGateUpWeights);
    const InputView down = GetInputView(ctx, kInDownWeights);
    const cpu::MoeRoutedExpertsParams params = ValidateMoeRoutedExpertsShapes(x, idx, w, gu, down, limit_);
    if (params.tokens == 0 || params.hidden == 0) {
      // y is empty: nothing to compute, and the weights may declare any E and I (they hold no
      // element when H = 0), so no buffer is sized from them; the indices are still checked.
      const int64_t bad = FirstBadMoeRoutedExpertsIndex(params, idx.data);
      if (bad >= 0) FailMoeRoutedExpertsIndex(params, idx.data, bad);
      GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                       ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true);
      return;
    }
    CheckMoeRoutedExpertsScratch(params);
    cpu::MoeRoutedExpertsPlan plan;
    int64_t bad_pair = -1;
    bool built = false;
    try {
      built = plan.Build(params, idx.data, &bad_pair);
    } catch (const std::bad_alloc&) {
      CheckMoeRoutedExpertsScratch(params, /*allocation_failed=*/true);
    } catch (const std::length_error&) {
      CheckMoeRoutedExpertsScratch(params, /*allocation_failed=*/true);
    }
    if (!built) FailMoeRoutedExpertsIndex(params, idx.data, bad_pair);
    cpu::MoeRoutedExpertsBuffers b;
    b.x = static_cast<const float*>(x.data);
    b.expert_idx = idx.data;
    b.routing_weights = static_cast<const float*>(w.data);
    b.gate_up = static_cast<const float*>(gu.data);
    b.down = static_cast<const float*>(down.data);
    b.y = static_cast<float*>(GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                                               ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true));
    ParallelForRange(ctx, plan.num_up_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.UpItems(b, begin, end); });
    ParallelForRange(ctx, params.hidden, plan.ColumnsPerChunk(kChunkBytes),
                     [&](int64_t begin, int64_t end) { plan.DownColumns(b, begin, end); });
  }

 private:
  float limit_;
};

// The op definition (docs/operators.md §3.1).
struct MoeRoutedExpertsDef {
  static constexpr const char* kName = kMoeRoutedExpertsName;
  static constexpr int kSinceVersion = experts_defs::kSinceVersion;
  static constexpr const ParamSpec* kInputs = experts_defs::kInputs;
  static constexpr size_t kNumInputs = std::size(experts_defs::kInputs);
  static constexpr const ParamSpec* kOutputs = experts_defs::kOutputs;
  static constexpr size_t kNumOutputs = std::size(experts_defs::kOutputs);
  static constexpr const AttrSpec* kAttrs = experts_defs::kAttrs;
  static constexpr size_t kNumAttrs = std::size(experts_defs::kAttrs);
  static constexpr auto InferShapes = &InferMoeRoutedExpertsShapes;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeRoutedExpertsOps() {
  static const AscendMoeOp<MoeRoutedExpertsDef, MoeRoutedExpertsCpuKernel> cpu_op;
  return {&cpu_op};
}

}  // namespace ascend_moe
