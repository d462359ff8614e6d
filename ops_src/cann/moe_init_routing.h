// MoeInitRouting on an Ascend NPU (docs/operators.md §10): aclnnMoeInitRouting (the caller takes
// the host fallback where it cannot run). Plain C++ over device pointers.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeInitRouting = "aclnnMoeInitRouting";

struct MoeInitRoutingDeviceArgs {
  AclDataType x_type = kAclFloat;
  int64_t tokens = 0, k = 1, hidden = 0;
  int64_t active_num = 0;
  int64_t rows = 0;                          // min(N, active_num) * K
  const int32_t* row_idx_host = nullptr;     // [N, K], validated
  const int32_t* expert_idx_host = nullptr;  // [N, K], validated
  const void* x = nullptr;                   // device [N, H]
  void* expanded_x = nullptr;                // device [rows, H]
  void* expanded_row_idx = nullptr;          // device [N*K]
  void* expanded_expert_idx = nullptr;       // device [N*K]
};

// Why aclnnMoeInitRouting cannot run this call; empty if it can.
std::string MoeInitRoutingNativeBlocker(const MoeInitRoutingDeviceArgs& args);
// Uploads row_idx and expert_idx and queues the operator; returns once the host data is no
// longer needed.
void LaunchMoeInitRouting(const DeviceContext& ctx, const MoeInitRoutingDeviceArgs& args);

}  // namespace ascend_moe::cann
