// MoeInitRoutingV3 kernel for the CANN execution provider: validates on the host (expert_idx is a
// host input), then runs aclnnMoeInitRoutingV3 on the EP's stream where its limits allow, or the
// CPU computation on host copies. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "op_defs.gen.h"

#include <vector>

#include "moe_init_routing_v3_host.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/moe_init_routing_v3.h"

namespace ascend_moe {

namespace {

namespace v3 = defs::moe_init_routing_v3;

[[noreturn]] void FailBadId(const cpu::MoeInitRoutingParams& p, const void* idx, int64_t bad) {
  const int64_t v =
      p.idx_int64 ? static_cast<const int64_t*>(idx)[bad] : static_cast<const int32_t*>(idx)[bad];
  Fail(Str(v3::kName, ": input 'expert_idx' must hold expert ids in [0, expert_num) = [0, ", p.expert_num,
           "), got ", v, " at [", bad / p.top_k, ", ", bad % p.top_k, "]"));
}

// The expert ids are checked on the host (the NPU operator would write out of bounds).
using MoeInitRoutingV3CannOptions = CannOptions<v3::kInExpertIdx>;

void RunMoeInitRoutingV3Cann(CannCall<MoeInitRoutingV3Def, MoeInitRoutingV3CannOptions>& call) {
  using namespace v3;
  const InitRoutingV3Inputs& in = call.in;
  const InputView &x = in[kInX], &idx = in[kInExpertIdx], &scale = in[kInScale];
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRoutingV3(x, idx, scale, in[kInOffset], call.attrs);
  cann::MoeInitRoutingV3DeviceArgs a;
  a.x_type = cann::kAclFloat;
  AclTypeOf(x.type, &a.x_type);
  a.tokens = p.num_tokens;
  a.k = p.top_k;
  a.hidden = p.cols;
  a.expert_num = p.expert_num;
  a.expert_start = p.expert_start;
  a.expert_end = p.expert_end;
  a.tokens_num_type = p.tokens_num_type;
  a.row_idx_type = p.row_idx_type;
  a.quant_mode = p.quant_mode;
  a.drop_pad_mode = p.drop_pad_mode;
  const std::string blocker =
      call.node.Blocker(cann::MoeInitRoutingV3NativeBlocker(a), cann::kAclnnMoeInitRoutingV3);
  CannDevice device(call.ctx, kInX);
  auto on_host = [&]() {
    call.OnHostCopies(device.context(), [&](const InitRoutingV3Inputs& host, const HostOutputFn& output) {
      ComputeMoeInitRoutingV3(call.ctx, host, call.attrs, output);
    });
  };
  call.node.Run(
      blocker,
      [&]() {
        // The ids are checked and the counts computed on the host, as the CPU kernel does.
        cpu::MoeInitRoutingPlan plan;
        const int64_t bad = plan.Build(p, idx.data);
        if (bad >= 0) FailBadId(p, idx.data, bad);
        const int64_t pairs = p.num_tokens * p.top_k;
        const std::vector<int32_t> ids = Int32Values(idx);  // [tokens, k]: `pairs` ids
        const std::vector<int64_t> counts_shape = MoeInitRoutingV3CountsShape(call.attrs);
        std::vector<int64_t> counts(static_cast<size_t>(NumElements(counts_shape)));
        plan.WriteCounts(counts.data());
        a.rows = plan.out_rows();
        a.expert_idx_host = ids.data();
        a.counts_host = counts.data();
        a.x = x.data;
        a.scale = scale.present ? scale.data : nullptr;
        a.expanded_x = call.Output(kOutExpandedX, {a.rows, p.cols}, x.type);
        a.expanded_row_idx = call.Output(kOutExpandedRowIdx, {pairs}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32);
        a.counts =
            call.Output(kOutExpertTokensCountOrCumsum, counts_shape, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64);
        a.expanded_scale = call.Output(kOutExpandedScale, {a.rows}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
        cann::LaunchMoeInitRoutingV3(device.context(), a);
      },
      on_host, p.num_tokens > 0);
}

}  // namespace

const OrtCustomOp* MoeInitRoutingV3CannOp() {
  return CannKernelOp<MoeInitRoutingV3Def, MoeInitRoutingV3CannOptions, RunMoeInitRoutingV3Cann>();
}

}  // namespace ascend_moe
