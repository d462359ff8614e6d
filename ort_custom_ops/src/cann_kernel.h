// The CANN execution-provider kernel of every op, declared once. An op's `<op>_cann.cc` supplies
// only its steps, a class `Steps` with
//   static constexpr const char* kName;          the op (the fallback log says "<kName> runs on ...")
//   explicit Steps(const OrtKernelInfo* info);    reads the attributes (and any constant input)
//   void Compute(Ort::KernelContext& ctx, NativeOrHost& node);
//       validate on the host, fill the device args, then node.Run(blocker, native launch, host run)
//   optional: static OrtMemType InputMemoryType(size_t);  the inputs checked on the host
//   optional: static constexpr const char* kFallback;     what runs instead ("host fallback")
// and registers CannKernel<Steps> (`KernelOp<Def, CannKernel<Steps>>()`) through `<Op>CannOp()`
// (below), which the op's Ops() lists after its CPU kernel: `OpKernels<Def, Cpu>(<Op>CannOp())`.
#pragma once

#include <type_traits>

#include "cann_support.h"
#include "op_base.h"

namespace ascend_moe {

namespace cann_kernel_detail {
template <typename S, typename = void>
struct HasInputMemoryType : std::false_type {};
template <typename S>
struct HasInputMemoryType<S, std::void_t<decltype(S::InputMemoryType(size_t{0}))>> : std::true_type {};
template <typename S, typename = void>
struct Fallback {
  static constexpr const char* kName = "host fallback";
};
template <typename S>
struct Fallback<S, std::void_t<decltype(S::kFallback)>> {
  static constexpr const char* kName = S::kFallback;
};
}  // namespace cann_kernel_detail

template <typename Steps>
class CannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  static OrtMemType InputMemoryType(size_t index) {
    if constexpr (cann_kernel_detail::HasInputMemoryType<Steps>::value) return Steps::InputMemoryType(index);
    return OrtMemTypeDefault;
  }

  explicit CannKernel(const OrtKernelInfo* info)
      : steps_(info), node_(info, Steps::kName, cann_kernel_detail::Fallback<Steps>::kName) {}
  void Compute(Ort::KernelContext& ctx) { steps_.Compute(ctx, node_); }

 private:
  Steps steps_;
  NativeOrHost node_;
};

// Each op's CANN kernel (its `<op>_cann.cc`), registered by the op's Ops() beside the CPU kernel.
const OrtCustomOp* GroupedMatmulCannOp();
const OrtCustomOp* MoeFinalizeRoutingV2CannOp();
const OrtCustomOp* MoeGatingTopKHashCannOp();
const OrtCustomOp* MoeInitRoutingCannOp();
const OrtCustomOp* MoeInitRoutingV3CannOp();
const OrtCustomOp* MoeReRoutingCannOp();
const OrtCustomOp* MoeRoutedExpertsCannOp();
const OrtCustomOp* MoeTokenPermuteCannOp();
const OrtCustomOp* MoeTokenUnpermuteCannOp();
const OrtCustomOp* SwiGluCannOp();

}  // namespace ascend_moe
