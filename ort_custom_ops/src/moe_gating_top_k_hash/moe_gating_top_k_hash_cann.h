// MoeGatingTopKHash kernel for the CANN execution provider: validates on the host (input_ids is a
// host input; a constant tid2eid is copied to the host once), then runs ops_src/cann on the EP's
// stream. Registered beside the CPU kernel.
#pragma once

#include <memory>
#include <vector>

#include "cann_support.h"
#include "moe_gating_top_k_hash_validate.h"

namespace ascend_moe {

class MoeGatingCannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  // Token ids are checked on the host against the table before a native hash call.
  static OrtMemType InputMemoryType(size_t index) {
    return index == gating_defs::kInInputIds ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit MoeGatingCannKernel(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx);

 private:
  gating_defs::Attrs attrs_;
  std::unique_ptr<NativeOrHost> node_;
  // Host copy of tid2eid when it is a constant initializer (read once at kernel creation).
  bool table_constant_ = false;
  ONNXTensorElementDataType table_type_ = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> table_shape_;
  std::vector<unsigned char> table_host_;
};

}  // namespace ascend_moe
