// MoeTokenUnpermute kernel for the CANN execution provider: validates on the host (sorted_indices
// and probs are host inputs: which slots are read depends on both), then runs
// aclnnMoeTokenUnpermute on the EP's stream where its limits allow, or the CPU kernel on host
// copies. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class MoeTokenUnpermuteCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  static OrtMemType InputMemoryType(size_t index) {
    using namespace defs::moe_token_unpermute;
    return index == kInSortedIndices || index == kInProbs ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeTokenUnpermuteCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::moe_token_unpermute::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
