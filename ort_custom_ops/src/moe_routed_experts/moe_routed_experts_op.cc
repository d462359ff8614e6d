// ascend.moe::MoeRoutedExperts for ONNX Runtime (docs/operators.md §3): what the generated
// definition (op_defs.gen.h) leaves to the op: shape inference, the attribute rule and the CPU
// kernel, which runs ops_src/cpu's two phases on the session's intra-op pool. The validation
// (docs/operators.md §3.3) is moe_routed_experts_validate's, shared with the CANN kernel
// (moe_routed_experts_cann).
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "cann_kernel.h"
#include "moe_routed_experts_validate.h"
#include "op_base.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

namespace ascend_moe {

// y is float [T, H] like x (symbolic dims kept); [?, ?] when x's rank is unknown (a rank other
// than 2 fails at run time with the validation's message).
OrtStatusPtr ORT_API_CALL experts::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  InferredTensor x{};
  InferredTensor y{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{}, InferDim{}}, true};
  if (GetInferInput(api, ctx, kInX, &x) && x.dims.size() == 2) y.dims = x.dims;
  return SetInferOutput(api, ctx, kOutY, y);
}

std::string experts::CheckAttrs(const Attrs& a) {
  if (!(a.swiglu_limit >= 0.f) || !std::isfinite(a.swiglu_limit)) {
    return Str(kName, ": attribute '", kAttrs[kAttrSwigluLimit].name,
               "' must be finite and >= 0 (0 = no clamp), got ", a.swiglu_limit);
  }
  if (a.weight_bits != 8 && a.weight_bits != 4) {
    return Str(kName, ": attribute '", kAttrs[kAttrWeightBits].name, "' must be 8 or 4, got ", a.weight_bits);
  }
  if (a.block_size < 0) {
    return Str(kName, ": attribute '", kAttrs[kAttrBlockSize].name,
               "' must be >= 0 (0 = one scale per row), got ", a.block_size);
  }
  if (a.weight_bits == 4 && a.block_size % 2 != 0) {
    return Str(kName, ": attribute '", kAttrs[kAttrBlockSize].name,
               "' must be even with weight_bits 4 (whole bytes per block), got ", a.block_size);
  }
  return {};
}

namespace {

// Fails, naming the inputs that set them, when the kernel's scratch (T*k*I floats of activations
// plus per-pair and per-expert bookkeeping) overflows or `allocation_failed`: checked before
// allocating (overflow-safe) and again when the allocation itself fails.
void CheckScratch(const cpu::MoeRoutedExpertsParams& p, bool allocation_failed = false) {
  // T*k and E are element counts of real tensors; T*k*I is not (I comes from the weights).
  const int64_t pairs = p.tokens * p.k;
  int64_t floats = 0, bytes = 0;
  const bool overflow = __builtin_mul_overflow(pairs, p.inter, &floats) ||
                        __builtin_mul_overflow(floats, static_cast<int64_t>(sizeof(float)), &bytes) ||
                        __builtin_add_overflow(bytes, (pairs + p.experts + 1) * int64_t{16}, &bytes) ||
                        static_cast<uint64_t>(bytes) > static_cast<uint64_t>(PTRDIFF_MAX);
  if (!overflow && !allocation_failed) return;
  const std::string need = overflow ? std::string("more than the address space")
                                    : Str(bytes, " bytes, which could not be allocated");
  Fail(Str(experts::kName, ": inputs '", experts::kInputs[experts::kInExpertIdx].name, "' [T, k] = [",
           p.tokens, ", ", p.k, "] and '", experts::kInputs[experts::kInDownWeights].name, "' [E, H, I] = [",
           p.experts, ", ", p.hidden, ", ", p.inter, "] need T*k*I = ", pairs, "*", p.inter,
           " activations of scratch: ", need));
}

// Weight bytes per parallel chunk: large enough that one thread streams long contiguous blocks,
// small enough to split a decode call's few experts over several threads.
constexpr int64_t kChunkBytes = int64_t{4 << 20};

struct MoeRoutedExpertsCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit MoeRoutedExpertsCpuKernel(const OrtKernelInfo* info) : attrs_(experts::ReadAttrs(info)) {}

  void Compute(Ort::KernelContext& ctx) {
    using namespace experts;
    const RoutedExpertsInputs in = GetInputViews(ctx, kName, kInputs);
    const cpu::MoeRoutedExpertsParams params = ValidateMoeRoutedExpertsShapes(in, attrs_);
    const void* idx = in[kInExpertIdx].data;
    if (params.tokens == 0 || params.hidden == 0) {
      // y is empty: nothing to compute, and the weights may declare any E and I (they hold no
      // element when H = 0), so no buffer is sized from them; the indices are still checked.
      const int64_t bad = FirstBadExpertIndex(params, idx);
      if (bad >= 0) FailExpertIndex(params, idx, bad);
      GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                       ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true);
      return;
    }
    CheckScratch(params);
    cpu::MoeRoutedExpertsPlan plan;
    int64_t bad_pair = -1;
    bool built = false;
    try {
      built = plan.Build(params, idx, &bad_pair);
    } catch (const std::bad_alloc&) {
      CheckScratch(params, /*allocation_failed=*/true);
    } catch (const std::length_error&) {
      CheckScratch(params, /*allocation_failed=*/true);
    }
    if (!built) FailExpertIndex(params, idx, bad_pair);
    cpu::MoeRoutedExpertsBuffers b;
    b.x = static_cast<const float*>(in[kInX].data);
    b.expert_idx = in[kInExpertIdx].data;
    b.routing_weights = static_cast<const float*>(in[kInRoutingWeights].data);
    if (params.quant_bits == 0) {
      b.gate_up = static_cast<const float*>(in[kInGateUpWeights].data);
      b.down = static_cast<const float*>(in[kInDownWeights].data);
    } else {
      b.gate_up_q = static_cast<const int8_t*>(in[kInGateUpWeights].data);
      b.down_q = static_cast<const int8_t*>(in[kInDownWeights].data);
      b.gate_up_scales = static_cast<const float*>(in[kInGateUpScales].data);
      b.down_scales = static_cast<const float*>(in[kInDownScales].data);
    }
    b.y = static_cast<float*>(GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                                               ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true));
    plan.PrepareInputs(b);
    ParallelForRange(ctx, plan.num_up_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.UpItems(b, begin, end); });
    ParallelForRange(ctx, params.hidden, plan.ColumnsPerChunk(kChunkBytes),
                     [&](int64_t begin, int64_t end) { plan.DownColumns(b, begin, end); });
  }

 private:
  experts::Attrs attrs_;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeRoutedExpertsOps() {
  static const AscendMoeOp<experts::Def, MoeRoutedExpertsCpuKernel> cpu_op;
  return {&cpu_op, MoeRoutedExpertsCannOp()};
}

}  // namespace ascend_moe
