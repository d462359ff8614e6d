// SwiGlu kernel for the CANN execution provider: aclnnSwiGlu on the EP's stream where the chip
// and the operator allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "cann_host_stage.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/swi_glu.h"
#include "swi_glu_host.h"

namespace ascend_moe {

class SwiGluCann {
 public:
  static constexpr const char* kName = swiglu::kName;

  explicit SwiGluCann(const OrtKernelInfo* info);
  void Compute(Ort::KernelContext& ctx, NativeOrHost& node);

 private:
  defs::swi_glu::Attrs attrs_;
};

SwiGluCann::SwiGluCann(const OrtKernelInfo* info) : attrs_(swiglu::ReadAttrs(info)) {}

void SwiGluCann::Compute(Ort::KernelContext& ctx, NativeOrHost& node) {
  using namespace swiglu;
  const auto in = GetInputViews(ctx, kName, kInputs);
  const InputView& x = in[kInX];
  std::vector<int64_t> y_shape;
  int64_t axis = 0;
  const cpu::SwiGluParams p = ValidateSwiGlu(x, attrs_, &y_shape, &axis);
  void* y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, y_shape, x.type, /*required=*/true);
  if (p.outer == 0 || p.inner == 0) return;  // empty
  cann::SwiGluDeviceArgs a;
  AclTypeOf(x.type, &a.type);
  a.x_dims = x.shape;
  a.dim = attrs_.dim;
  a.x = x.data;
  a.out = y;
  const std::string blocker = node.Blocker(cann::SwiGluNativeBlocker(a), cann::kAclnnSwiGlu);
  CannDevice device(ctx, kInX);
  auto run_on_host = [&]() {
    CannHostStage stage(ctx, device.context());
    const InputView host_x = stage.Host(x, false);
    void* host_y = stage.Output(kName, kOutputs, kOutY, y_shape, x.type);
    RunSwiGlu(ctx, p, host_x.data, host_y);
    stage.Finish();
  };
  node.Run(blocker, [&]() { cann::LaunchSwiGlu(device.context(), a); }, run_on_host);
}

const OrtCustomOp* SwiGluCannOp() { return KernelOp<defs::swi_glu::Def, CannKernel<SwiGluCann>>(); }

}  // namespace ascend_moe
