// SwiGlu kernel for the CANN execution provider: aclnnSwiGlu on the EP's stream where the chip
// and the operator allow, or the CPU kernel on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/swi_glu.h"
#include "swi_glu_host.h"

namespace ascend_moe {

namespace {

void RunSwiGluCann(CannCall<swiglu::Def, CannOptions<>>& call) {
  using namespace swiglu;
  const InputView& x = call.in[kInX];
  std::vector<int64_t> y_shape;
  int64_t axis = 0;
  const cpu::SwiGluParams p = ValidateSwiGlu(x, call.attrs, &y_shape, &axis);
  void* y = call.Output(kOutY, y_shape, x.type);
  if (p.outer == 0 || p.inner == 0) return;  // empty
  cann::SwiGluDeviceArgs a;
  AclTypeOf(x.type, &a.type);
  a.x_dims = x.shape;
  a.dim = call.attrs.dim;
  a.x = x.data;
  a.out = y;
  const std::string blocker = call.node.Blocker(cann::SwiGluNativeBlocker(a), cann::kAclnnSwiGlu);
  CannDevice device(call.ctx, kInX);
  auto on_host = [&]() {
    call.OnHostCopies(device.context(), [&](const Inputs& host, const auto& output) {
      RunSwiGlu(call.ctx, p, host[kInX].data, output(kOutY, y_shape, x.type));
    });
  };
  call.node.Run(blocker, [&]() { cann::LaunchSwiGlu(device.context(), a); }, on_host);
}

}  // namespace

const OrtCustomOp* SwiGluCannOp() { return CannKernelOp<swiglu::Def, CannOptions<>, RunSwiGluCann>(); }

}  // namespace ascend_moe
