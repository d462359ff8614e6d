// MoeTokenPermute kernel for the CANN execution provider: validates on the host (indices is a
// host input), then runs aclnnMoeTokenPermute on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class MoeTokenPermuteCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The ids are checked on the host.
  static OrtMemType InputMemoryType(size_t index) {
    return index == defs::moe_token_permute::kInIndices ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeTokenPermuteCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::moe_token_permute::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
