// MoeRoutedExperts kernel for the CANN execution provider: validates on the host (expert_idx is a
// host input), then runs ops_src/cann's operator chain on the EP's stream. Registered beside the
// CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "moe_routed_experts_validate.h"

namespace ascend_moe {

class MoeRoutedExpertsCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The expert ids are checked on the host (the NPU operators would read out of bounds).
  static OrtMemType InputMemoryType(size_t index) {
    return index == experts::kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeRoutedExpertsCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  experts::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
