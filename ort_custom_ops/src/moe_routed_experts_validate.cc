#include "moe_routed_experts_validate.h"

namespace ascend_moe {

namespace {

[[noreturn]] void FailInput(experts::In input, const std::string& what_and_value) {
  Fail(Str(experts::kName, ": input '", experts::kInputs[input].name, "' ", what_and_value));
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
  if (gu.shape.size() != 3 || gu.shape[0] < 1 || gu.shape[1] < 2 || gu.shape[1] % 2 != 0 ||
      gu.shape[2] != h) {
    FailInput(kInGateUpWeights, Str("must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = ", h,
                                    " (x.shape[1]), got shape ", ShapeStr(gu.shape)));
  }
  const int64_t e = gu.shape[0], i = gu.shape[1] / 2;
  if (down.shape != std::vector<int64_t>{e, h, i}) {
    FailInput(kInDownWeights, Str("must be [E, H, I] = [", e, ", ", h, ", ", i,
                                  "] (from gate_up_weights), got shape ", ShapeStr(down.shape)));
  }
  cpu::MoeRoutedExpertsParams p;
  p.tokens = t;
  p.hidden = h;
  p.k = k;
  p.experts = e;
  p.inter = i;
  p.index64 = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  p.swiglu_limit = attrs.swiglu_limit;
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
