// The host fallback of the CANN kernels whose CPU kernel runs on host memory: device inputs are
// copied to the host, the op's host computation writes host mirrors of its outputs (allocated on
// the device through the kernel context as usual), and Finish copies them back. One class for
// every op, so the fallback runs the CPU kernel's own code, with its messages.
#pragma once

#include <memory>
#include <vector>

#include "op_utils.h"
#include "ops_src/cann/device.h"

namespace ascend_moe {

class CannHostStage {
 public:
  CannHostStage(Ort::KernelContext& ctx, const cann::DeviceContext& device) : ctx_(ctx), device_(device) {}
  CannHostStage(const CannHostStage&) = delete;
  CannHostStage& operator=(const CannHostStage&) = delete;

  // A host view of `view`: itself when it is already in host memory (a CPU input) or absent,
  // otherwise a copy of its device data.
  InputView Host(const InputView& view, bool in_host_memory);
  // Output `index` of `shape` and `type` (checked like the CPU kernel's outputs): allocated on the
  // device; returns a host mirror that Finish copies there.
  void* Output(const char* op, const ParamSpec* specs, size_t index, const std::vector<int64_t>& shape,
               ONNXTensorElementDataType type);
  // Copies every output mirror to the device and synchronises the stream (the mirrors die with
  // the stage).
  void Finish();

 private:
  struct Mirror {
    void* device;
    size_t bytes;
    std::vector<unsigned char> host;
  };
  Ort::KernelContext& ctx_;
  const cann::DeviceContext& device_;
  std::vector<std::unique_ptr<std::vector<unsigned char>>> inputs_;
  std::vector<Mirror> outputs_;
};

}  // namespace ascend_moe
