// MoeInitRoutingV3 on an Ascend NPU (docs/operators.md §5): aclnnMoeInitRoutingV3 where its
// documented limits allow, otherwise the host fallback (the CPU kernel). Plain C++ over device
// pointers; knows nothing of ONNX Runtime. Also the first step of MoeRoutedExperts' chain.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeInitRoutingV3 = "aclnnMoeInitRoutingV3";

// One native call, dropless, without quantisation: the arguments the operator takes.
struct InitRoutingV3Call {
  AclDataType x_type = kAclFloat;
  int64_t tokens = 0, k = 0, hidden = 0;  // N, K, H
  int64_t expert_num = 0, expert_start = 0, expert_end = 0;
  int64_t tokens_num_type = 1;       // 1 counts, 2 key/value
  int64_t row_idx_type = 0;          // 0 gather, 1 scatter
  const void* x = nullptr;           // [N, H]
  const void* expert_idx = nullptr;  // [N, K] int32
  const void* scale = nullptr;       // [N] float or null
  void* expanded_x = nullptr;        // [N*K, H]
  void* expanded_row_idx = nullptr;  // [N*K] int32
  void* counts = nullptr;            // int64 [end - start] (counts) or [expert_num, 2] (key/value)
  void* expanded_scale = nullptr;    // [N*K] float
};

// Why aclnnMoeInitRoutingV3 would refuse this call, or empty. The operator checks its tiling in
// phase 2 only (aclnn_moe_init_routing_v3.cpp ignores the status of its l0 launch), where a
// refusal can no longer fall back; so its limits are checked here, before any call
// (moe_init_routing_v3_tiling.cpp: expert_num > 0, 0 <= expert_start < expert_end <= expert_num,
// expert_end <= 10240, or 5120 with key/value counts; expert_tokens_num_type 1 or 2; row_idx_type
// 0 or 1; tokens > 0). The chip (ChipBlocker) is the caller's to check.
std::string InitRoutingV3Blocker(const InitRoutingV3Call& call);

// Queues aclnnMoeInitRoutingV3 (activeNum = N*K, dropless, quant_mode -1, the counts flag set);
// throws std::runtime_error where InitRoutingV3Blocker or the chip refuses the call.
void RunMoeInitRoutingV3(const DeviceContext& ctx, const InitRoutingV3Call& call);

// The op (docs/operators.md §5), dropless and unquantised, validated on the host.
struct MoeInitRoutingV3DeviceArgs {
  AclDataType x_type = kAclFloat;
  int64_t tokens = 0, k = 0, hidden = 0;
  int64_t expert_num = 0, expert_start = 0, expert_end = 0;
  int64_t rows = 0;             // R: rows of expanded_x / expanded_scale (<= N*K)
  int64_t tokens_num_type = 0;  // 0 cumsum, 1 counts, 2 key/value
  int64_t row_idx_type = 0;
  int64_t quant_mode = -1;
  int64_t drop_pad_mode = 0;
  const int32_t* expert_idx_host = nullptr;  // [N, K], validated ids
  const int64_t* counts_host = nullptr;      // the counts output as the CPU kernel computes it
  const void* x = nullptr;                   // device [N, H]
  const void* scale = nullptr;               // device [N] or null
  void* expanded_x = nullptr;                // device [R, H]
  void* expanded_row_idx = nullptr;          // device [N*K]
  void* counts = nullptr;                    // device, the counts output
  void* expanded_scale = nullptr;            // device [R]
};

// Why aclnnMoeInitRoutingV3 cannot run this call (aclnnMoeInitRoutingV3.md's 约束说明 and the
// quantisation this library does not send yet); empty if it can.
std::string MoeInitRoutingV3NativeBlocker(const MoeInitRoutingV3DeviceArgs& args);

// The native call plus what the operator leaves undefined, written as the contract defines it:
// expanded_x rows and expanded_scale entries past the kept pairs are 0, the scatter index past
// them -1, expanded_scale 0 without scale; rows cut by active_num are staged through scratch;
// the cumsum counts (which the operator does not produce) are the host's.
void LaunchMoeInitRoutingV3(const DeviceContext& ctx, const MoeInitRoutingV3DeviceArgs& args);

}  // namespace ascend_moe::cann
