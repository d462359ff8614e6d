#include "moe_routed_experts_validate.h"

#include <utility>

namespace ascend_moe {

namespace {

[[noreturn]] void FailInput(experts::In input, const std::string& what_and_value) {
  Fail(Str(experts::kName, ": input '", experts::kInputs[input].name, "' ", what_and_value));
}

// The scale inputs of int8 weights: present, float, and shaped by block_size (which divides H and I).
void ValidateScales(const RoutedExpertsInputs& in, const experts::Attrs& attrs, int64_t e, int64_t h,
                    int64_t i) {
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

// The optional biases: float [E, 2I] and [E, H]; none with act_quant 1.
void ValidateBiases(const RoutedExpertsInputs& in, const experts::Attrs& attrs, int64_t e, int64_t h,
                    int64_t i) {
  using namespace experts;
  for (In bias : {kInGateUpBias, kInDownBias}) {
    const InputView& b = in[bias];
    if (!b.present) continue;
    if (attrs.act_quant != 0)
      FailInput(bias, "is not taken with act_quant 1 (the integer path has no biases)");
    if (b.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)
      FailInput(bias, Str("must be float, got ", TypeName(b.type)));
    const bool gate_up = bias == kInGateUpBias;
    const std::vector<int64_t> want{e, gate_up ? 2 * i : h};
    if (b.shape != want) {
      FailInput(bias, Str("must be ", gate_up ? "[E, 2I]" : "[E, H]", " = ", ShapeStr(want), ", got shape ",
                          ShapeStr(b.shape)));
    }
  }
}

}  // namespace

cpu::MoeRoutedExpertsParams ValidateMoeRoutedExpertsShapes(const RoutedExpertsInputs& in,
                                                           const experts::Attrs& attrs) {
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
  if (attrs.act_quant != 0 && !quantized) {
    Fail(Str(kName, ": attribute '", kAttrs[kAttrActQuant].name, "' = ", attrs.act_quant,
             " needs int8 weights, got ", TypeName(gu.type), " gate_up_weights"));
  }
  const bool bf16 = gu.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16;
  if (bf16) {
    const std::pair<Attr, int64_t> unused[] = {{kAttrWeightBits, attrs.weight_bits},
                                               {kAttrBlockSize, attrs.block_size}};
    for (const auto& [attr, value] : unused) {
      const auto fallback = static_cast<int64_t>(kAttrs[attr].default_value);
      if (value != fallback) {
        Fail(Str(kName, ": attribute '", kAttrs[attr].name, "' = ", value,
                 " goes with int8 weights, got bfloat16 gate_up_weights (bfloat16 weights take the default, ",
                 fallback, ")"));
      }
    }
  }
  if (!quantized) {
    for (In scales : {kInGateUpScales, kInDownScales}) {
      if (in[scales].present)
        FailInput(scales, Str("goes with int8 weights only: the weights are ", TypeName(gu.type)));
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
  ValidateBiases(in, attrs, e, h, i);
  cpu::MoeRoutedExpertsParams p;
  p.tokens = t;
  p.hidden = h;
  p.k = k;
  p.experts = e;
  p.inter = i;
  p.index64 = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  p.swiglu_limit = attrs.swiglu_limit;
  p.activation_alpha = attrs.activation_alpha;
  p.activation_beta = attrs.activation_beta;
  p.gate_up_bias = in[kInGateUpBias].present;
  p.down_bias = in[kInDownBias].present;
  p.quant_bits = quantized ? static_cast<int>(attrs.weight_bits) : 0;
  p.bf16_weights = bf16;
  p.block_size = attrs.block_size;
  return p;
}

[[noreturn]] void FailExpertIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx,
                                  int64_t bad_pair) {
  const int64_t value = p.index64 ? static_cast<const int64_t*>(expert_idx)[bad_pair]
                                  : static_cast<const int32_t*>(expert_idx)[bad_pair];
  FailInput(experts::kInExpertIdx, Str("must be in [0, E) = [0, ", p.experts, "), got ", value, " at [",
                                       bad_pair / p.k, ", ", bad_pair % p.k, "]"));
}

int64_t FirstBadExpertIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx) {
  const int64_t pairs = p.tokens * p.k;  // the elements of expert_idx
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t e =
        p.index64 ? static_cast<const int64_t*>(expert_idx)[i] : static_cast<const int32_t*>(expert_idx)[i];
    if (e < 0 || e >= p.experts) return i;
  }
  return -1;
}

}  // namespace ascend_moe
