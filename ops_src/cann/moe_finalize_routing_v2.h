// MoeFinalizeRoutingV2 on an Ascend NPU (docs/operators.md §8): aclnnMoeFinalizeRoutingV2 where
// its limits allow, otherwise the host fallback (the CPU kernel). Plain C++ over device pointers;
// knows nothing of ONNX Runtime. Also the last step of MoeRoutedExperts' chain.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeFinalizeRoutingV2 = "aclnnMoeFinalizeRoutingV2";

// One native call: the arguments the operator takes.
struct FinalizeRoutingV2Call {
  AclDataType type = kAclFloat;           // expanded_x, x1, x2, bias and y
  int64_t rows = 0;                       // dropless: rows of expanded_x (N*K); drop-pad: E
  int64_t capacity = 0;                   // drop-pad: C (expanded_x [E, C, H])
  int64_t tokens = 0, k = 1, hidden = 0;  // N, K, H
  int64_t drop_pad_mode = 0;
  int64_t experts = 0;  // bias rows E
  const void* expanded_x = nullptr;
  const void* index = nullptr;  // expanded_row_idx [N*K] int32
  const void* x1 = nullptr;     // [N, H] or null
  const void* x2 = nullptr;
  const void* bias = nullptr;    // [E, H] or null
  const void* scales = nullptr;  // [N, K] or null
  AclDataType scales_type = kAclFloat;
  const void* expert_idx = nullptr;  // [N, K] int32 or null
  void* y = nullptr;                 // [N, H]
};

void RunMoeFinalizeRoutingV2(const DeviceContext& ctx, const FinalizeRoutingV2Call& call);

// Why aclnnMoeFinalizeRoutingV2 cannot run this call (the dtype combinations of
// moe_finalize_routing_v2_def.cpp for ascend910b / ascend910_93, the tiling's E >= K with bias);
// empty if it can. `call` needs type, scales_type, k and experts. Whether the installed CANN
// provides the operator is not asked (MissingAclnnOp).
std::string MoeFinalizeRoutingV2NativeBlocker(const FinalizeRoutingV2Call& call, bool has_scales);

// The op with the indices validated on the host (int32 copies): uploaded, then the native call.
// `call.index` / `call.expert_idx` are ignored; returns once the host indices are no longer needed.
void LaunchMoeFinalizeRoutingV2(const DeviceContext& ctx, FinalizeRoutingV2Call call,
                                const int32_t* index_host, const int32_t* expert_idx_host);

}  // namespace ascend_moe::cann
