#include "ops_src/cann/moe_routed_experts.h"

#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"
#include "ops_src/cann/grouped_matmul.h"
#include "ops_src/cann/moe_finalize_routing_v2.h"
#include "ops_src/cann/moe_init_routing_v3.h"
#include "ops_src/cann/swi_glu.h"

namespace ascend_moe::cann {

namespace {

void RunNative(const DeviceContext& ctx, const MoeRoutedExpertsDeviceArgs& a) {
  const cpu::MoeRoutedExpertsParams& p = a.params;
  const int64_t pairs = p.tokens * p.k;
  // The ids were read on the host (validation); the chain reads int32 ids on the device.
  std::vector<int32_t> ids(static_cast<size_t>(pairs));
  for (int64_t i = 0; i < pairs; ++i) {
    ids[i] = p.index64 ? static_cast<int32_t>(static_cast<const int64_t*>(a.expert_idx_host)[i])
                       : static_cast<const int32_t*>(a.expert_idx_host)[i];
  }
  const size_t f = sizeof(float);
  DeviceBuffer ids_d(ctx, ids.size() * sizeof(int32_t));
  DeviceBuffer expanded_x(ctx, pairs * p.hidden * f), row_idx(ctx, pairs * sizeof(int32_t));
  DeviceBuffer counts(ctx, p.experts * sizeof(int64_t)), scale(ctx, pairs * f);
  DeviceBuffer gate_up(ctx, pairs * 2 * p.inter * f), act(ctx, pairs * p.inter * f);
  DeviceBuffer down(ctx, pairs * p.hidden * f);
  UploadStaged(ctx, ids_d.get(), ids.data(), ids.size() * sizeof(int32_t));

  InitRoutingV3Call init;
  init.x_type = kAclFloat;
  init.tokens = p.tokens;
  init.k = p.k;
  init.hidden = p.hidden;
  init.expert_num = p.experts;
  init.expert_start = 0;
  init.expert_end = p.experts;
  init.tokens_num_type = 1;  // counts: the grouped matmuls' group list (group_list_type 1)
  init.row_idx_type = 0;     // gather index: finalize's token-major expanded_row_idx
  init.x = a.x;
  init.expert_idx = ids_d.get();
  init.expanded_x = expanded_x.get();
  init.expanded_row_idx = row_idx.get();
  init.counts = counts.get();
  init.expanded_scale = scale.get();
  RunMoeInitRoutingV3(ctx, init);

  cpu::GroupedMatmulParams up;
  up.rows = pairs;
  up.depth = p.hidden;
  up.cols = 2 * p.inter;
  up.groups = p.experts;
  up.type = cpu::GmmType::kFloat32;
  up.transpose_weight = true;  // gate_up_weights [E, 2I, H] = [E, N, K]
  RunGroupedMatmulV4(ctx, up, expanded_x.get(), a.gate_up, nullptr, counts.get(), 1, gate_up.get());
  LaunchSwiGluOfPairs(ctx, kAclFloat, pairs, p.inter, gate_up.get(), act.get(), "MoeRoutedExperts");
  cpu::GroupedMatmulParams dn = up;
  dn.depth = p.inter;
  dn.cols = p.hidden;  // down_weights [E, H, I] = [E, N, K]
  RunGroupedMatmulV4(ctx, dn, act.get(), a.down, nullptr, counts.get(), 1, down.get());

  FinalizeRoutingV2Call fin;
  fin.type = kAclFloat;
  fin.rows = pairs;
  fin.tokens = p.tokens;
  fin.k = p.k;
  fin.hidden = p.hidden;
  fin.drop_pad_mode = 2;  // token-major index, as init routing V3's gather index
  fin.index = row_idx.get();
  fin.expanded_x = down.get();
  fin.scales = a.routing_weights;
  fin.scales_type = kAclFloat;
  fin.y = a.y;
  RunMoeFinalizeRoutingV2(ctx, fin);
}

void RunOnHost(const DeviceContext& ctx, const MoeRoutedExpertsDeviceArgs& a) {
  const cpu::MoeRoutedExpertsParams& p = a.params;
  const size_t f = sizeof(float);
  const bool q = p.quant_bits != 0;
  const auto x = Download(ctx, a.x, p.tokens * p.hidden * f);
  const auto w = Download(ctx, a.routing_weights, p.tokens * p.k * f);
  const auto gu = q ? Download(ctx, a.gate_up_q, a.gate_up_q_bytes)
                    : Download(ctx, a.gate_up, p.experts * 2 * p.inter * p.hidden * f);
  const auto dn =
      q ? Download(ctx, a.down_q, a.down_q_bytes) : Download(ctx, a.down, p.experts * p.hidden * p.inter * f);
  const auto gus = q ? Download(ctx, a.gate_up_scales, a.gate_up_scales_bytes) : nullptr;
  const auto dns = q ? Download(ctx, a.down_scales, a.down_scales_bytes) : nullptr;
  const auto gub = p.gate_up_bias ? Download(ctx, a.gate_up_bias, p.experts * 2 * p.inter * f) : nullptr;
  const auto dnb = p.down_bias ? Download(ctx, a.down_bias, p.experts * p.hidden * f) : nullptr;
  HostBuffer y(static_cast<size_t>(p.tokens * p.hidden) * f);
  cpu::MoeRoutedExpertsPlan plan;
  int64_t bad_pair = -1;
  plan.Build(p, a.expert_idx_host, &bad_pair);  // validated by the caller
  cpu::MoeRoutedExpertsBuffers b;
  b.x = x->as<const float>();
  b.expert_idx = a.expert_idx_host;
  b.routing_weights = w->as<const float>();
  if (q) {
    b.gate_up_q = gu->as<const int8_t>();
    b.down_q = dn->as<const int8_t>();
    b.gate_up_scales = gus->as<const float>();
    b.down_scales = dns->as<const float>();
  } else {
    b.gate_up = gu->as<const float>();
    b.down = dn->as<const float>();
  }
  if (gub) b.gate_up_bias = gub->as<const float>();
  if (dnb) b.down_bias = dnb->as<const float>();
  b.y = y.as<float>();
  plan.PrepareInputs(b);  // 4-bit weights: x reordered to the nibble order
  plan.UpItems(b, 0, plan.num_up_items());
  plan.DownColumns(b, 0, p.hidden);
  y.UploadTo(ctx, a.y, y.size());  // no wait: the pool keeps y until the copy ran
}

}  // namespace

std::string MoeRoutedExpertsNativeBlocker(const cpu::MoeRoutedExpertsParams& p) {
  if (p.quant_bits != 0) {
    // aclnnGroupedMatmulV4 dequantizes int8 / int4 weights (its antiquant) with float16 /
    // bfloat16 x only; the op's activations are float32 (docs/quantization.md).
    return "quantized expert weights (weight_bits " + std::to_string(p.quant_bits) +
           ") run on the host: aclnnGroupedMatmulV4 takes int8 / int4 weights with float16 or bfloat16 "
           "activations only, and MoeRoutedExperts' x is float32";
  }
  if (p.swiglu_limit > 0.f) {
    return "swiglu_limit > 0 (the clamp) has no CANN operator (aclnnSwiGlu does not clamp)";
  }
  if (p.gate_up_bias || p.down_bias) {
    return "expert biases (gate_up_bias / down_bias) run on the host: the chain's aclnnGroupedMatmulV4 calls "
           "take no per-group bias here";
  }
  if (p.activation_alpha != attr_defaults::moe_routed_experts::kActivationAlpha ||
      p.activation_beta != attr_defaults::moe_routed_experts::kActivationBeta) {
    return "activation_alpha / activation_beta other than SiLU's (1, 0) have no CANN operator (aclnnSwiGlu "
           "computes silu(g) * u)";
  }
  if (p.experts > kGmmMaxGroups) {
    return "aclnnGroupedMatmulV4 takes at most 1024 groups, got E = " + std::to_string(p.experts);
  }
  InitRoutingV3Call init;  // the chain's first call, whose limits are checked only in phase 2
  init.tokens = p.tokens > 0 ? p.tokens : 1;
  init.expert_num = p.experts;
  init.expert_end = p.experts;
  return InitRoutingV3Blocker(init);
}

NativePath ChooseMoeRoutedExpertsPath(const cpu::MoeRoutedExpertsParams& p) {
  NativePath path;
  path.reason = MoeRoutedExpertsNativeBlocker(p);
  if (!path.reason.empty()) return path;
  for (const char* name : {kAclnnMoeInitRoutingV3, kAclnnGroupedMatmulV4, kAclnnPermute, kAclnnSwiGlu,
                           kAclnnMoeFinalizeRoutingV2}) {
    path.reason = ChipBlocker(name);
    if (!path.reason.empty()) return path;
    AclnnOp op;
    std::string why;
    if (!FindAclnnOp(name, &op, &why)) {
      path.reason = std::string("the CANN operator library has no ") + name + ": " + why;
      return path;
    }
  }
  path.call = kAclnnMoeInitRoutingV3;  // the chain's first operator
  return path;
}

void LaunchMoeRoutedExperts(const DeviceContext& ctx, const MoeRoutedExpertsDeviceArgs& a, NativePath* path) {
  const cpu::MoeRoutedExpertsParams& p = a.params;
  if (p.tokens == 0 || p.hidden == 0) return;  // y is empty
  if (p.k == 0) {                              // no slot: y is zero
    MemsetAsync(ctx, a.y, static_cast<size_t>(p.tokens * p.hidden) * sizeof(float), 0);
    return;
  }
  if (RunNativePath(path, [&]() { RunNative(ctx, a); })) return;
  RunOnHost(ctx, a);
}

}  // namespace ascend_moe::cann
