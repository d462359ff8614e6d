// MoeReRouting kernel for the CANN execution provider: validates on the host (the counts are a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "moe_re_routing_validate.h"

namespace ascend_moe {

class MoeReRoutingCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The counts are read on the host (validation, copy plan); ORT copies them there.
  static OrtMemType InputMemoryType(size_t index) {
    return index == rerouting_defs::kInExpertTokenNumPerRank ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeReRoutingCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  rerouting_defs::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
