// ascend.moe::MoeRoutedExperts for ONNX Runtime (docs/operators.md §3): what the generated
// definition (op_defs.gen.h) leaves to the op: shape inference, the attribute rule, the shape
// validation (docs/operators.md §3.3; the messages of onnx_schemas.moe_routed_experts) and the CPU
// kernel, which runs ops_src/cpu's two phases on the session's intra-op pool.
// CPU execution provider only: on a session with another provider ORT places the node on the CPU.
#include <cmath>
#include <cstdint>
#include <new>
#include <stdexcept>

#include "op_base.h"
#include "op_defs.gen.h"
#include "ops_src/cpu/moe_routed_experts.h"

namespace ascend_moe {

namespace experts = defs::moe_routed_experts;

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

using Inputs = std::array<InputView, experts::kNumIns>;

[[noreturn]] void FailInput(experts::In input, const std::string& what_and_value) {
  Fail(Str(experts::kName, ": input '", experts::kInputs[input].name, "' ", what_and_value));
}

// The scale inputs of int8 weights: present, float, and shaped by block_size (which divides H and I).
void ValidateScales(const Inputs& in, const experts::Attrs& attrs, int64_t e, int64_t h, int64_t i) {
  using namespace experts;
  const int64_t g = attrs.block_size;
  for (In scales : {kInGateUpScales, kInDownScales}) {
    const bool gate_up = scales == kInGateUpScales;
    const InputView& s = in[scales];
    if (!s.present) FailInput(scales, "is required with int8 weights, got none");
    if (s.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
      FailInput(scales, Str("must be float, got ", TypeName(s.type)));
    const int64_t rows = gate_up ? 2 * i : h, inner = gate_up ? h : i;
    if (g > 0 && inner % g != 0) {
      Fail(Str(kName, ": attribute '", kAttrs[kAttrBlockSize].name, "' = ", g,
               " must divide the rows of input '", kInputs[gate_up ? kInGateUpWeights : kInDownWeights].name,
               "' (", gate_up ? 'H' : 'I', " = ", inner, ")"));
    }
    const std::vector<int64_t> want =
        g == 0 ? std::vector<int64_t>{e, rows} : std::vector<int64_t>{e, rows, inner / g};
    if (s.shape != want) {
      const char* layout = gate_up ? (g == 0 ? "[E, 2I]" : "[E, 2I, H / block_size]")
                                   : (g == 0 ? "[E, H]" : "[E, H, I / block_size]");
      FailInput(scales, Str("must be ", layout, " = ", ShapeStr(want), " (",
                            g == 0 ? std::string("one scale per row") : Str("block_size ", g),
                            "), got shape ", ShapeStr(s.shape)));
    }
  }
}

// Ranks and dims of the inputs (the table checked presence and element types; no data is read):
// the kernel parameters.
cpu::MoeRoutedExpertsParams ValidateShapes(const Inputs& in, const experts::Attrs& attrs) {
  using namespace experts;
  const InputView &x = in[kInX], &idx = in[kInExpertIdx], &w = in[kInRoutingWeights];
  const InputView &gu = in[kInGateUpWeights], &down = in[kInDownWeights];
  if (x.shape.size() != 2) FailInput(kInX, Str("must be 2-D [T, H], got shape ", ShapeStr(x.shape)));
  const int64_t t = x.shape[0], h = x.shape[1];
  if (idx.shape.size() != 2 || idx.shape[0] != t) {
    FailInput(kInExpertIdx,
              Str("must be 2-D [T, k] with T = ", t, " (x.shape[0]), got shape ", ShapeStr(idx.shape)));
  }
  const int64_t k = idx.shape[1];
  if (w.shape != std::vector<int64_t>{t, k}) {
    FailInput(kInRoutingWeights,
              Str("must have the shape of expert_idx [", t, ", ", k, "], got shape ", ShapeStr(w.shape)));
  }
  const bool quantized = gu.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
  if (!quantized) {
    for (In scales : {kInGateUpScales, kInDownScales}) {
      if (in[scales].present) FailInput(scales, "goes with int8 weights only: the weights are float");
    }
  }
  const int64_t pack = quantized && attrs.weight_bits == 4 ? 2 : 1;
  if (pack == 2 && h % 2 != 0) {
    FailInput(kInGateUpWeights,
              Str("with weight_bits 4 packs two values per byte along H, which must be even, "
                  "got H = ",
                  h, " (x.shape[1])"));
  }
  const char* inner = pack == 1 ? "H" : "H/2";
  if (gu.shape.size() != 3 || gu.shape[0] < 1 || gu.shape[1] < 2 || gu.shape[1] % 2 != 0 ||
      gu.shape[2] != h / pack) {
    FailInput(kInGateUpWeights,
              Str("must be 3-D [E, 2I, ", inner, "] with E >= 1, an even 2I >= 2 and ", inner, " = ",
                  h / pack, " (x.shape[1]", pack == 1 ? "" : " / 2", "), got shape ", ShapeStr(gu.shape)));
  }
  const int64_t e = gu.shape[0], i = gu.shape[1] / 2;
  if (pack == 2 && i % 2 != 0) {
    FailInput(kInDownWeights, Str("with weight_bits 4 packs two values per byte along I, which must be even, "
                                  "got I = ",
                                  i, " (from gate_up_weights)"));
  }
  if (down.shape != std::vector<int64_t>{e, h, i / pack}) {
    FailInput(kInDownWeights, Str("must be [E, H, ", pack == 1 ? "I" : "I/2", "] = [", e, ", ", h, ", ",
                                  i / pack, "] (from gate_up_weights), got shape ", ShapeStr(down.shape)));
  }
  if (quantized) ValidateScales(in, attrs, e, h, i);
  cpu::MoeRoutedExpertsParams p;
  p.tokens = t;
  p.hidden = h;
  p.k = k;
  p.experts = e;
  p.inter = i;
  p.index64 = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  p.swiglu_limit = attrs.swiglu_limit;
  p.quant_bits = quantized ? static_cast<int>(attrs.weight_bits) : 0;
  p.block_size = attrs.block_size;
  return p;
}

// Fails with the message for the out-of-range index of pair `bad_pair` (t * k + j).
[[noreturn]] void FailIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx, int64_t bad_pair) {
  const int64_t value = p.index64 ? static_cast<const int64_t*>(expert_idx)[bad_pair]
                                  : static_cast<const int32_t*>(expert_idx)[bad_pair];
  FailInput(experts::kInExpertIdx, Str("must be in [0, E) = [0, ", p.experts, "), got ", value, " at [",
                                       bad_pair / p.k, ", ", bad_pair % p.k, "]"));
}

// The first pair (t * k + j) whose index is outside [0, E), or -1; reads expert_idx, allocates nothing.
int64_t FirstBadIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx) {
  const int64_t pairs = p.tokens * p.k;  // the elements of expert_idx
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t e =
        p.index64 ? static_cast<const int64_t*>(expert_idx)[i] : static_cast<const int32_t*>(expert_idx)[i];
    if (e < 0 || e >= p.experts) return i;
  }
  return -1;
}

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
    const Inputs in = GetInputViews(ctx, kName, kInputs);
    const cpu::MoeRoutedExpertsParams params = ValidateShapes(in, attrs_);
    const void* idx = in[kInExpertIdx].data;
    if (params.tokens == 0 || params.hidden == 0) {
      // y is empty: nothing to compute, and the weights may declare any E and I (they hold no
      // element when H = 0), so no buffer is sized from them; the indices are still checked.
      const int64_t bad = FirstBadIndex(params, idx);
      if (bad >= 0) FailIndex(params, idx, bad);
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
    if (!built) FailIndex(params, idx, bad_pair);
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
  return {&cpu_op};
}

}  // namespace ascend_moe
