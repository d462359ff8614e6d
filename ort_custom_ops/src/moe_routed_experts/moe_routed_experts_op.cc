// ascend.moe::MoeRoutedExperts for ONNX Runtime (docs/operators.md §3): what the generated
// definition (op_defs.gen.h) leaves to the op: shape inference, the attribute rule and the CPU
// kernel, which runs ops_src/cpu's two phases on the session's intra-op pool. The validation
// (docs/operators.md §3.3) is moe_routed_experts_validate's, shared with the CANN kernel
// (moe_routed_experts_cann).
#include <algorithm>
#include <cmath>
#include <iterator>
#include <memory>
#include <cstdint>
#include <new>
#include <stdexcept>
#include <utility>

#include "cann_kernel.h"
#include "moe_routed_experts_validate.h"
#include "op_base.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_a8.h"

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
  for (const auto& [attr, value] : {std::pair{kAttrActivationAlpha, a.activation_alpha},
                                    std::pair{kAttrActivationBeta, a.activation_beta}}) {
    if (!std::isfinite(value))
      return Str(kName, ": attribute '", kAttrs[attr].name, "' must be finite, got ", value);
  }
  if (a.act_quant == 1 &&
      (a.activation_alpha != static_cast<float>(kAttrs[kAttrActivationAlpha].default_value) ||
       a.activation_beta != static_cast<float>(kAttrs[kAttrActivationBeta].default_value))) {
    return Str(kName, ": attribute '", kAttrs[kAttrActQuant].name,
               "' = 1 takes the default activation_alpha (1) and activation_beta (0), got ",
               a.activation_alpha, " and ", a.activation_beta);
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
  if (a.act_quant != 0 && a.act_quant != 1) {
    return Str(kName, ": attribute '", kAttrs[kAttrActQuant].name,
               "' must be 0 (float activations) or 1 (per-token int8), got ", a.act_quant);
  }
  if (a.act_quant == 1 && a.block_size % limits::moe_routed_experts::kA8Step != 0) {
    return Str(kName, ": attribute '", kAttrs[kAttrBlockSize].name, "' must be a multiple of ",
               limits::moe_routed_experts::kA8Step,
               " with act_quant 1 (whole steps of the integer dot products), got ", a.block_size);
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

// Rows of `row_floats` floats per chunk of a row-wise pass (the int8 quantization of x and of the
// activations): about kRowChunkFloats, so that a 16-token call's x rows still reach both threads.
constexpr int64_t kRowChunkFloats = 8192;
int64_t RowsPerChunk(int64_t row_floats) {
  return std::max<int64_t>(1, kRowChunkFloats / std::max<int64_t>(1, row_floats));
}

// A call with an empty y: nothing to compute, and the weights may declare any E and I (they hold
// no element when H = 0), so no buffer is sized from them; the indices are still checked.
bool EmptyCall(Ort::KernelContext& ctx, const cpu::MoeRoutedExpertsParams& params, const void* idx) {
  using namespace experts;
  if (params.tokens != 0 && params.hidden != 0) return false;
  const int64_t bad = FirstBadExpertIndex(params, idx);
  if (bad >= 0) FailExpertIndex(params, idx, bad);
  GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                   ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT,
                   /*required=*/true);
  return true;
}

void RunMoeRoutedExpertsCpu(Ort::KernelContext& ctx, const experts::Def::Inputs& in,
                            const experts::Def::Attrs& attrs) {
  using namespace experts;
  const cpu::MoeRoutedExpertsParams params = ValidateMoeRoutedExpertsShapes(in, attrs);
  const void* idx = in[kInExpertIdx].data;
  if (EmptyCall(ctx, params, idx)) return;
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
  if (params.bf16_weights) {
    b.gate_up_bf16 = static_cast<const uint16_t*>(in[kInGateUpWeights].data);
    b.down_bf16 = static_cast<const uint16_t*>(in[kInDownWeights].data);
  } else if (params.quant_bits == 0) {
    b.gate_up = static_cast<const float*>(in[kInGateUpWeights].data);
    b.down = static_cast<const float*>(in[kInDownWeights].data);
  } else {
    b.gate_up_q = static_cast<const int8_t*>(in[kInGateUpWeights].data);
    b.down_q = static_cast<const int8_t*>(in[kInDownWeights].data);
    b.gate_up_scales = static_cast<const float*>(in[kInGateUpScales].data);
    b.down_scales = static_cast<const float*>(in[kInDownScales].data);
  }
  b.gate_up_bias = static_cast<const float*>(in[kInGateUpBias].data);  // null when absent
  b.down_bias = static_cast<const float*>(in[kInDownBias].data);
  b.y = static_cast<float*>(GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                                             ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true));
  plan.PrepareInputs(b);
  ParallelForRange(ctx, plan.num_up_items(), 1,
                   [&](int64_t begin, int64_t end) { plan.UpItems(b, begin, end); });
  ParallelForRange(ctx, params.hidden, plan.ColumnsPerChunk(kChunkBytes),
                   [&](int64_t begin, int64_t end) { plan.DownColumns(b, begin, end); });
}

// The four weight inputs' data: which buffers a repack was made from.
struct WeightBuffers {
  const void* data[4] = {nullptr, nullptr, nullptr, nullptr};
  bool operator==(const WeightBuffers& o) const {
    return std::equal(std::begin(data), std::end(data), std::begin(o.data));
  }
};

// The CPU kernel keeps state: with act_quant 1 and constant weights, their repacked copy.
struct MoeRoutedExpertsCpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  // With act_quant 1 and constant weights (initializers), the weights are repacked here, once per
  // session, for the integer dot products (ORT has no PrePack for custom ops; constant inputs are
  // readable at kernel creation). Weights that are not constant are repacked on every call.
  explicit MoeRoutedExpertsCpuKernel(const OrtKernelInfo* info) : attrs_(experts::ReadAttrs(info)) {
    if (attrs_.act_quant == 1) RepackConstantWeights(info);
  }

  void Compute(Ort::KernelContext& ctx) {
    using namespace experts;
    const Def::Inputs in = Def::GetInputs(ctx);
    if (attrs_.act_quant != 1) {
      RunMoeRoutedExpertsCpu(ctx, in, attrs_);
      return;
    }
    const cpu::MoeRoutedExpertsParams params = ValidateMoeRoutedExpertsShapes(in, attrs_);
    if (EmptyCall(ctx, params, in[kInExpertIdx].data)) return;
    CheckScratch(params);
    ComputeA8(ctx, in, params);
  }

 private:
  static WeightBuffers BuffersOf(const RoutedExpertsInputs& in) {
    using namespace experts;
    WeightBuffers w;
    w.data[0] = in[kInGateUpWeights].data;
    w.data[1] = in[kInDownWeights].data;
    w.data[2] = in[kInGateUpScales].data;
    w.data[3] = in[kInDownScales].data;
    return w;
  }

  // Repacks the weights now when all four weight inputs are constant and consistent (else Compute
  // validates them and repacks per call, or fails with the validation's message).
  void RepackConstantWeights(const OrtKernelInfo* info) {
    using namespace experts;
    try {
      Ort::ConstKernelInfo ki(info);
      std::vector<int64_t> shapes[4];
      const void* data[4] = {};
      for (size_t j = 0; j < 4; ++j) {
        int is_constant = 0;
        Ort::ConstValue v = ki.GetTensorConstantInput(kInGateUpWeights + j, &is_constant);
        if (!is_constant || !v) return;
        const auto info_j = v.GetTensorTypeAndShapeInfo();
        const ONNXTensorElementDataType want =
            j < 2 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
        if (info_j.GetElementType() != want) return;
        shapes[j] = info_j.GetShape();
        data[j] = v.GetTensorRawData();
      }
      const int pack = attrs_.weight_bits == 4 ? 2 : 1;
      const int64_t g = attrs_.block_size;
      if (shapes[0].size() != 3 || shapes[1].size() != 3 || shapes[0][1] % 2 != 0) return;
      cpu::MoeRoutedExpertsParams p;
      p.experts = shapes[0][0];
      p.inter = shapes[0][1] / 2;
      p.hidden = shapes[0][2] * pack;
      p.quant_bits = static_cast<int>(attrs_.weight_bits);
      p.block_size = g;
      const int64_t h = p.hidden, i = p.inter, e = p.experts;
      if (e < 1 || i < 1 || h < 1 || shapes[1] != std::vector<int64_t>{e, h, i / pack} || i % pack != 0)
        return;
      if (g > 0 && (h % g != 0 || i % g != 0)) return;
      const std::vector<int64_t> su =
          g == 0 ? std::vector<int64_t>{e, 2 * i} : std::vector<int64_t>{e, 2 * i, h / g};
      const std::vector<int64_t> sd = g == 0 ? std::vector<int64_t>{e, h} : std::vector<int64_t>{e, h, i / g};
      if (shapes[2] != su || shapes[3] != sd) return;
      const cpu::A8Dot dot = cpu::ActiveA8Dot();
      repacked_ = std::make_unique<cpu::A8ExpertWeights>(
          cpu::RepackA8Experts(p, static_cast<const int8_t*>(data[0]), static_cast<const float*>(data[2]),
                               static_cast<const int8_t*>(data[1]), static_cast<const float*>(data[3]), dot));
      std::copy(std::begin(data), std::end(data), std::begin(repacked_from_.data));
      repacked_params_ = p;
    } catch (const Ort::Exception&) {
      repacked_.reset();  // not readable here: Compute repacks per call
    }
  }

  void ComputeA8(Ort::KernelContext& ctx, const RoutedExpertsInputs& in,
                 const cpu::MoeRoutedExpertsParams& params) {
    using namespace experts;
    if (params.hidden > limits::moe_routed_experts::kA8MaxInputs) {
      Fail(Str(kName, ": input '", kInputs[kInX].name, "' with act_quant 1 must have H <= ",
               limits::moe_routed_experts::kA8MaxInputs, " (int32 sums), got H = ", params.hidden));
    }
    if (params.inter > limits::moe_routed_experts::kA8MaxInputs) {
      Fail(Str(kName, ": input '", kInputs[kInDownWeights].name, "' with act_quant 1 must have I <= ",
               limits::moe_routed_experts::kA8MaxInputs, " (int32 sums), got I = ", params.inter));
    }
    const cpu::A8Dot dot = cpu::ActiveA8Dot();
    std::unique_ptr<cpu::A8ExpertWeights> per_call;
    const cpu::A8ExpertWeights* w = repacked_.get();
    if (w == nullptr || !(repacked_from_ == BuffersOf(in)) || w->dot != dot ||
        repacked_params_.experts != params.experts || repacked_params_.hidden != params.hidden ||
        repacked_params_.inter != params.inter) {
      per_call = std::make_unique<cpu::A8ExpertWeights>(
          cpu::RepackA8Experts(params, static_cast<const int8_t*>(in[kInGateUpWeights].data),
                               static_cast<const float*>(in[kInGateUpScales].data),
                               static_cast<const int8_t*>(in[kInDownWeights].data),
                               static_cast<const float*>(in[kInDownScales].data), dot));
      w = per_call.get();
    }
    cpu::MoeRoutedExpertsA8Plan plan;
    int64_t bad_pair = -1;
    bool built = false;
    try {
      built = plan.Build(params, in[kInExpertIdx].data, dot, &bad_pair);
    } catch (const std::bad_alloc&) {
      CheckScratch(params, /*allocation_failed=*/true);
    } catch (const std::length_error&) {
      CheckScratch(params, /*allocation_failed=*/true);
    }
    if (!built) FailExpertIndex(params, in[kInExpertIdx].data, bad_pair);
    const float* x = static_cast<const float*>(in[kInX].data);
    const float* routing_weights = static_cast<const float*>(in[kInRoutingWeights].data);
    float* y =
        static_cast<float*>(GetCheckedOutput(ctx, kName, kOutputs, kOutY, {params.tokens, params.hidden},
                                             ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, /*required=*/true));
    ParallelForRange(ctx, params.tokens, RowsPerChunk(params.hidden),
                     [&](int64_t begin, int64_t end) { plan.QuantizeTokens(x, begin, end); });
    ParallelForRange(ctx, plan.num_up_items(), 1,
                     [&](int64_t begin, int64_t end) { plan.UpItems(*w, begin, end); });
    ParallelForRange(ctx, plan.num_pairs(), RowsPerChunk(params.inter),
                     [&](int64_t begin, int64_t end) { plan.QuantizeActs(begin, end); });
    ParallelForRange(ctx, params.hidden, plan.ColumnsPerChunk(kChunkBytes), [&](int64_t begin, int64_t end) {
      plan.DownColumns(*w, routing_weights, y, begin, end);
    });
  }

  experts::Attrs attrs_;
  std::unique_ptr<cpu::A8ExpertWeights> repacked_;  // act_quant 1, constant weights
  WeightBuffers repacked_from_;
  cpu::MoeRoutedExpertsParams repacked_params_;
};

}  // namespace

std::vector<const OrtCustomOp*> MoeRoutedExpertsOps() {
  return OpKernels<experts::Def, MoeRoutedExpertsCpuKernel>(MoeRoutedExpertsCannOp());
}

}  // namespace ascend_moe
