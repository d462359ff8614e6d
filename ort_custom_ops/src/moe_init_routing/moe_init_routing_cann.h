// MoeInitRouting kernel for the CANN execution provider: validates on the host (row_idx and
// expert_idx are host inputs), then runs aclnnMoeInitRouting on the EP's stream, or the CPU
// computation on host copies where it cannot. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class MoeInitRoutingCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_init_routing;
    return index == kInRowIdx || index == kInExpertIdx ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeInitRoutingCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::moe_init_routing::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
