#include "moe_routed_experts_validate.h"

#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ascend_moe {

namespace {

constexpr const char* kX = "x";
constexpr const char* kIdx = "expert_idx";
constexpr const char* kWeights = "routing_weights";
constexpr const char* kGateUp = "gate_up_weights";
constexpr const char* kDown = "down_weights";

[[noreturn]] void FailInput(const char* name, const std::string& what_and_value) {
  Fail(Str(kMoeRoutedExpertsName, ": input '", name, "' ", what_and_value));
}

void CheckFloat(const InputView& v, const char* name) {
  if (v.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT) FailInput(name, Str("must be float, got ", TypeName(v.type)));
}

}  // namespace

std::string CheckMoeRoutedExpertsLimit(float swiglu_limit) {
  if (!(swiglu_limit >= 0.f) || !std::isfinite(swiglu_limit)) {
    return Str(kMoeRoutedExpertsName, ": attribute '", experts_defs::kAttrs[experts_defs::kAttrSwigluLimit].name,
               "' must be finite and >= 0 (0 = no clamp), got ", swiglu_limit);
  }
  return {};
}

float ReadMoeRoutedExpertsLimit(const OrtKernelInfo* info) {
  const float limit =
      ReadFloatAttr(info, kMoeRoutedExpertsName, experts_defs::kAttrs[experts_defs::kAttrSwigluLimit]);
  const std::string error = CheckMoeRoutedExpertsLimit(limit);
  if (!error.empty()) Fail(error);
  return limit;
}

cpu::MoeRoutedExpertsParams ValidateMoeRoutedExpertsShapes(const InputView& x, const InputView& idx,
                                                           const InputView& w, const InputView& gu,
                                                           const InputView& down, float swiglu_limit) {
  const std::pair<const InputView*, const char*> all[] = {{&x, kX}, {&idx, kIdx}, {&w, kWeights},
                                                          {&gu, kGateUp}, {&down, kDown}};
  for (const auto& [v, name] : all) {
    if (!v->present) FailInput(name, "is required, got none");
  }
  CheckFloat(x, kX);
  if (idx.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 && idx.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64) {
    FailInput(kIdx, Str("must be int32 or int64, got ", TypeName(idx.type)));
  }
  CheckFloat(w, kWeights);
  CheckFloat(gu, kGateUp);
  CheckFloat(down, kDown);
  if (x.shape.size() != 2) FailInput(kX, Str("must be 2-D [T, H], got shape ", ShapeStr(x.shape)));
  const int64_t t = x.shape[0], h = x.shape[1];
  if (idx.shape.size() != 2 || idx.shape[0] != t) {
    FailInput(kIdx, Str("must be 2-D [T, k] with T = ", t, " (x.shape[0]), got shape ", ShapeStr(idx.shape)));
  }
  const int64_t k = idx.shape[1];
  if (w.shape != std::vector<int64_t>{t, k}) {
    FailInput(kWeights, Str("must have the shape of expert_idx [", t, ", ", k, "], got shape ", ShapeStr(w.shape)));
  }
  if (gu.shape.size() != 3 || gu.shape[0] < 1 || gu.shape[1] < 2 || gu.shape[1] % 2 != 0 || gu.shape[2] != h) {
    FailInput(kGateUp, Str("must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = ", h,
                           " (x.shape[1]), got shape ", ShapeStr(gu.shape)));
  }
  const int64_t e = gu.shape[0], i = gu.shape[1] / 2;
  if (down.shape != std::vector<int64_t>{e, h, i}) {
    FailInput(kDown, Str("must be [E, H, I] = [", e, ", ", h, ", ", i, "] (from gate_up_weights), got shape ",
                         ShapeStr(down.shape)));
  }
  cpu::MoeRoutedExpertsParams p;
  p.tokens = t;
  p.hidden = h;
  p.k = k;
  p.experts = e;
  p.inter = i;
  p.index64 = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  p.swiglu_limit = swiglu_limit;
  return p;
}

int64_t FirstBadMoeRoutedExpertsIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx) {
  const int64_t pairs = p.tokens * p.k;  // the elements of expert_idx
  for (int64_t i = 0; i < pairs; ++i) {
    const int64_t e = p.index64 ? static_cast<const int64_t*>(expert_idx)[i]
                                : static_cast<const int32_t*>(expert_idx)[i];
    if (e < 0 || e >= p.experts) return i;
  }
  return -1;
}

void CheckMoeRoutedExpertsScratch(const cpu::MoeRoutedExpertsParams& p, bool allocation_failed) {
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
  Fail(Str(kMoeRoutedExpertsName, ": inputs '", kIdx, "' [T, k] = [", p.tokens, ", ", p.k, "] and '", kDown,
           "' [E, H, I] = [", p.experts, ", ", p.hidden, ", ", p.inter, "] need T*k*I = ", pairs, "*", p.inter,
           " activations of scratch: ", need));
}

void FailMoeRoutedExpertsIndex(const cpu::MoeRoutedExpertsParams& p, const void* expert_idx, int64_t bad_pair) {
  const int64_t value = p.index64 ? static_cast<const int64_t*>(expert_idx)[bad_pair]
                                  : static_cast<const int32_t*>(expert_idx)[bad_pair];
  FailInput(kIdx, Str("must be in [0, E) = [0, ", p.experts, "), got ", value, " at [", bad_pair / p.k, ", ",
                      bad_pair % p.k, "]"));
}

}  // namespace ascend_moe
