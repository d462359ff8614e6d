// MoeRoutedExperts on an Ascend NPU (docs/operators.md §3) as a chain of CANN operators over
// device scratch from the caller's workspace callback:
//   aclnnMoeInitRoutingV3 (pairs sorted by expert, rows gathered, rows per expert)
//   -> aclnnGroupedMatmulV4 (gate/up: [P, H] x W[e]^T -> [P, 2I], interleaved g, u)
//   -> aclnnPermute ([P, I, 2] -> [P, 2, I]: each row's gates, then its ups)
//   -> aclnnSwiGlu (dim -1 halves each row of [P, 2I])
//   -> aclnnGroupedMatmulV4 (down: [P, I] -> [P, H])
//   -> aclnnMoeFinalizeRoutingV2 (drop_pad_mode 2: token-major index, routing weights as scales).
// Otherwise (swiglu_limit > 0, biases, activation_alpha / activation_beta other than SiLU's, E > 1024,
// quantized weights, an operator missing) the host fallback: inputs
// copied to the host, the CPU kernel, y copied back. Knows nothing of ONNX Runtime.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts.h"

namespace ascend_moe::cann {

struct MoeRoutedExpertsDeviceArgs {
  cpu::MoeRoutedExpertsParams params;     // validated
  const void* expert_idx_host = nullptr;  // [T, k] int32 / int64, validated (every id in [0, E))
  // Device memory; null where a tensor is empty.
  const float* x = nullptr;                // [T, H]
  const float* routing_weights = nullptr;  // [T, k]
  const float* gate_up = nullptr;          // [E, 2I, H]
  const float* down = nullptr;             // [E, H, I]
  // Quantized weights (params.quant_bits 8 / 4) instead of gate_up / down, as the CPU kernel
  // takes them (cpu::MoeRoutedExpertsBuffers); byte sizes for the host fallback's download.
  const int8_t* gate_up_q = nullptr;
  const int8_t* down_q = nullptr;
  const float* gate_up_scales = nullptr;
  const float* down_scales = nullptr;
  size_t gate_up_q_bytes = 0, down_q_bytes = 0, gate_up_scales_bytes = 0, down_scales_bytes = 0;
  // Optional biases (params.gate_up_bias / down_bias): [E, 2I] / [E, H].
  const float* gate_up_bias = nullptr;
  const float* down_bias = nullptr;
  float* y = nullptr;  // [T, H]
};

// Why the operator chain cannot run this call; empty if it can.
std::string MoeRoutedExpertsNativeBlocker(const cpu::MoeRoutedExpertsParams& params);
// Native when the limits hold and the operator libraries provide all four operators.
NativePath ChooseMoeRoutedExpertsPath(const cpu::MoeRoutedExpertsParams& params);

// Queues the op on ctx.stream along `path`; returns once every host buffer it used is no
// longer needed.
// When an operator of the chain rejects its call in phase 1, runs the fallback (which computes y
// from the inputs again) and says so in `path`.
void LaunchMoeRoutedExperts(const DeviceContext& ctx, const MoeRoutedExpertsDeviceArgs& args,
                            NativePath* path);

}  // namespace ascend_moe::cann
