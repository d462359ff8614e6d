// MoeInitRouting kernel for the CANN execution provider: validates on the host (row_idx and
// expert_idx are host inputs), then runs aclnnMoeInitRouting on the EP's stream, or the CPU
// computation on host copies where it cannot. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include "moe_init_routing_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_init_routing.h"

namespace ascend_moe {

namespace {

namespace ir = defs::moe_init_routing;

using MoeInitRoutingCannOptions = CannOptions<ir::kInRowIdx, ir::kInExpertIdx>;

void RunMoeInitRoutingCann(CannCall<ir::Def, MoeInitRoutingCannOptions>& call) {
  using namespace ir;
  const InitRoutingInputs& in = call.in;
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRouting(in, call.attrs);
  cann::MoeInitRoutingDeviceArgs a;
  AclTypeOf(in[kInX].type, &a.x_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.active_num = call.attrs.active_num;
  a.rows = p.num_out_rows;
  const std::string blocker =
      call.node.Blocker(cann::MoeInitRoutingNativeBlocker(a), cann::kAclnnMoeInitRouting);
  CannDevice device(call.ctx, kInX);
  auto native = [&]() {
    CheckMoeInitRoutingIndices(in, p);
    const int64_t pairs = p.num_tokens * p.top_k;
    a.row_idx_host = static_cast<const int32_t*>(in[kInRowIdx].data);
    a.expert_idx_host = static_cast<const int32_t*>(in[kInExpertIdx].data);
    a.x = in[kInX].data;
    a.expanded_x = call.Output(kOutExpandedX, {a.rows, a.hidden}, in[kInX].type);
    a.expanded_row_idx = call.Output(kOutExpandedRowIdx, {pairs}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    a.expanded_expert_idx = call.Output(kOutExpandedExpertIdx, {pairs}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
    cann::LaunchMoeInitRouting(device.context(), a);
  };
  // The host computation validates the ids and row_idx itself.
  auto on_host = [&]() {
    call.OnHostCopies(device.context(), [&](const InitRoutingInputs& host, const HostOutputFn& output) {
      ComputeMoeInitRouting(call.ctx, host, call.attrs, output);
    });
  };
  call.node.Run(blocker, native, on_host, p.num_tokens > 0);
}

}  // namespace

const OrtCustomOp* MoeInitRoutingCannOp() {
  return CannKernelOp<ir::Def, MoeInitRoutingCannOptions, RunMoeInitRoutingCann>();
}

}  // namespace ascend_moe
