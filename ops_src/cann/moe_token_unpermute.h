// MoeTokenUnpermute on an Ascend NPU (docs/operators.md §9): aclnnMoeTokenUnpermute where its
// limits allow (the caller takes the host fallback otherwise). Plain C++ over device pointers.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeTokenUnpermute = "aclnnMoeTokenUnpermute";
// moe_token_unpermute_tiling.cpp reserves room for at most 512 slots per token.
inline constexpr int64_t kUnpermuteMaxTopK = 512;

struct MoeTokenUnpermuteDeviceArgs {
  AclDataType token_type = kAclFloat;
  AclDataType probs_type = kAclFloat;
  int64_t tokens = 0, k = 1, hidden = 0;  // N, K, H
  int64_t rows = 0;                       // P: rows of permuted_tokens
  const int32_t* index_host = nullptr;    // [N*K], validated
  const void* probs_host = nullptr;       // [N, K] or null
  const void* permuted = nullptr;         // device [P, H]
  void* out = nullptr;                    // device [N, H]
};

// Why aclnnMoeTokenUnpermute cannot run this call; empty if it can.
std::string MoeTokenUnpermuteNativeBlocker(const MoeTokenUnpermuteDeviceArgs& args);
// Uploads the indices and probs and queues the operator; returns once they are no longer needed.
void LaunchMoeTokenUnpermute(const DeviceContext& ctx, const MoeTokenUnpermuteDeviceArgs& args);

}  // namespace ascend_moe::cann
