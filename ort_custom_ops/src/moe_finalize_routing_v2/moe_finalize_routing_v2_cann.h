// MoeFinalizeRoutingV2 kernel for the CANN execution provider: validates on the host (the row and
// expert indices are host inputs), then runs aclnnMoeFinalizeRoutingV2 on the EP's stream where
// its limits allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class MoeFinalizeRoutingV2CannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The indices are checked on the host (the NPU operator would read out of bounds).
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_finalize_routing_v2;
    return index == kInExpandedRowIdx || index == kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeFinalizeRoutingV2CannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::moe_finalize_routing_v2::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
