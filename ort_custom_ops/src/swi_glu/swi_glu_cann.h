// SwiGlu kernel for the CANN execution provider: aclnnSwiGlu on the EP's stream where the chip
// and the operator allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#pragma once

#include <memory>

#include "cann_support.h"
#include "op_defs.gen.h"

namespace ascend_moe {

class SwiGluCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;

  explicit SwiGluCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  defs::swi_glu::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
};

}  // namespace ascend_moe
