// The CANN execution-provider kernel of every op, written once. An op's `<op>_cann.cc` supplies
// only its per-call work, a function
//   void Run<Op>Cann(CannCall<Def, Options>& call);
//       validate on the host, fill the device args, then either
//       call.node.Run(blocker, native launch, host run)  (one ACLNN operator or the host fallback;
//           the host run is usually call.OnHostCopies(device, <the CPU kernel's computation>)), or
//       call.RunPath(path, device_input, launch)         (ops_src/cann chose among its operators)
// and registers it: `CannKernelOp<Def, Options, Run<Op>Cann>()` in its `<Op>CannOp()` (below),
// which the op's Ops() lists after its CPU kernel: `OpKernels<Def, Cpu>(<Op>CannOp())`.
// `Options` says what differs between ops:
//   CannOptions<kInA, kInB>    the inputs the kernel reads on the host (ORT copies them there);
//   static constexpr const char* kFallback;   what runs instead ("host fallback" by default);
//   using State = ...;          per-node state made once from the OrtKernelInfo (a constant input).
#pragma once

#include <utility>
#include <vector>

#include "cann_host_stage.h"
#include "cann_support.h"
#include "op_base.h"

namespace ascend_moe {

// No per-node state besides the attributes.
struct NoCannState {
  explicit NoCannState(const OrtKernelInfo* /*info*/) {}
};

// The options of a CANN kernel; an op with more to say derives from it.
template <size_t... HostInputs>
struct CannOptions {
  static constexpr const char* kFallback = "host fallback";
  using State = NoCannState;
  // Whether input `index` is read on the host (OrtMemTypeCPUInput).
  static constexpr bool OnHost(size_t index) { return ((index == HostInputs) || ...); }
};

// One Compute call of a CANN kernel: the context, the node's native-or-host choice, the inputs
// (checked against the op's table), the attributes and the node's state.
template <typename Def, typename Options>
struct CannCall {
  using Inputs = typename Def::Inputs;
  Ort::KernelContext& ctx;
  NativeOrHost& node;
  const Inputs in;
  const typename Def::Attrs& attrs;
  typename Options::State& state;

  // Device output `index` of `shape` and `type`, checked like the CPU kernel's outputs.
  void* Output(size_t index, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
    return GetCheckedOutput(ctx, Def::kName, Def::kOutputs, index, shape, type, /*required=*/true);
  }

  // The host fallback: `compute(host_inputs, output)` runs the CPU kernel's computation on host
  // copies of the device inputs, writing host mirrors of the outputs (`output(index, shape,
  // type)`), which are copied to the device afterwards.
  template <typename Compute>
  void OnHostCopies(const cann::DeviceContext& device, Compute&& compute) {
    CannHostStage stage(ctx, device);
    Inputs host = in;
    for (size_t i = 0; i < host.size(); ++i) host[i] = stage.Host(in[i], Options::OnHost(i));
    compute(static_cast<const Inputs&>(host),
            [&](size_t index, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
              return stage.Output(Def::kName, Def::kOutputs, index, shape, type);
            });
    stage.Finish();
  }

  // The kernels whose launcher chooses among ACLNN operators (NativeOrHost::RunPath):
  // `launch(device, &path)` runs `path` on the EP's stream, found through device input
  // `device_input`.
  template <typename Launch>
  void RunPath(cann::NativePath path, size_t device_input, Launch&& launch) {
    node.RunPath(path, [&] {
      CannDevice device(ctx, device_input);
      launch(device.context(), &path);
    });
  }
};

// The kernel ORT creates: attributes and state read once, then Run per call.
template <typename Def, typename Options, void (*Run)(CannCall<Def, Options>&)>
class CannKernel {
 public:
  static constexpr const char* kProvider = kCannProvider;
  static OrtMemType InputMemoryType(size_t index) {
    return Options::OnHost(index) ? OrtMemTypeCPUInput : OrtMemTypeDefault;
  }

  explicit CannKernel(const OrtKernelInfo* info)
      : attrs_(Def::ReadAttrs(info)), state_(info), node_(info, Def::kName, Options::kFallback) {}
  void Compute(Ort::KernelContext& ctx) {
    CannCall<Def, Options> call{ctx, node_, Def::GetInputs(ctx), attrs_, state_};
    Run(call);
  }

 private:
  typename Def::Attrs attrs_;
  typename Options::State state_;
  NativeOrHost node_;
};

// An op's CANN kernel, registered with ORT: what its `<Op>CannOp()` returns.
template <typename Def, typename Options, void (*Run)(CannCall<Def, Options>&)>
const OrtCustomOp* CannKernelOp() {
  return KernelOp<Def, CannKernel<Def, Options, Run>>();
}

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

}  // namespace ascend_moe
