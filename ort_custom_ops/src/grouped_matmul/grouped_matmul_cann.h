// GroupedMatmul kernel for the CANN execution provider: validates on the host (group_list is a
// host input), then runs ops_src/cann on the EP's stream. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "grouped_matmul_validate.h"

namespace ascend_moe {

class GroupedMatmulCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // The group list is checked on the host (monotonic, within M) and sizes the plan.
  static OrtMemType InputMemoryType(size_t index) {
    return index == gmm::kInGroupList ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit GroupedMatmulCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  gmm::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
