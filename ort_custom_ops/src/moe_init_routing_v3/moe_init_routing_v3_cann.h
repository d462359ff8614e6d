// MoeInitRoutingV3 kernel for the CANN execution provider: validates on the host (expert_idx is a
// host input), then runs aclnnMoeInitRoutingV3 on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class MoeInitRoutingV3CannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The expert ids are checked on the host (the NPU operator would write out of bounds).
  static OrtMemType InputMemoryType(size_t index) {
    return index == defs::moe_init_routing_v3::kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeInitRoutingV3CannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::moe_init_routing_v3::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
