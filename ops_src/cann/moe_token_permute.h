// MoeTokenPermute on an Ascend NPU (docs/operators.md §6): aclnnMoeTokenPermute where its limits
// allow (the caller takes the host fallback otherwise). Plain C++ over device pointers.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeTokenPermute = "aclnnMoeTokenPermute";
// moe_token_permute_tiling.cpp: MAX_INDICES_NUM (K) and SORT_LIMIT_LENGTH (N*K must be below).
inline constexpr int64_t kPermuteMaxTopK = 512;
inline constexpr int64_t kPermuteSortLimit = 16777215;

struct MoeTokenPermuteDeviceArgs {
  AclDataType token_type = kAclFloat;
  int64_t tokens = 0, k = 1, hidden = 0;
  int64_t rows = 0;  // R, resolved from num_out_tokens
  int indices_rank = 2;
  bool indices_int64 = false;
  const void* indices_host = nullptr;  // validated ids, [N] or [N, K]
  const void* x = nullptr;             // device [N, H]
  void* permuted = nullptr;            // device [R, H]
  void* sorted_indices = nullptr;      // device [N*K] int32
};

// Why aclnnMoeTokenPermute cannot run this call; empty if it can.
std::string MoeTokenPermuteNativeBlocker(const MoeTokenPermuteDeviceArgs& args);
// Uploads the ids and queues the operator; returns once the host ids are no longer needed.
void LaunchMoeTokenPermute(const DeviceContext& ctx, const MoeTokenPermuteDeviceArgs& args);

}  // namespace ascend_moe::cann
