// MoeReRouting on an Ascend NPU (docs/operators.md §2): aclnnMoeReRouting where its documented limits allow,
// otherwise device-to-device row copies planned on the host from the counts. Plain C++ over device
// pointers, the caller's stream and workspace callback; knows nothing of ONNX Runtime.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeReRouting = "aclnnMoeReRouting";
// What aclnnMoeReRouting accepts (its documented Atlas A2/A3 limits): token types, the scale type
// (per_token_scales [A] only) and H < kNativeHiddenLimit.
inline constexpr AclDataType kNativeTokenTypes[] = {kAclFloat16, kAclBFloat16, kAclInt8};
inline constexpr AclDataType kNativeScaleType = kAclFloat;
inline constexpr int64_t kNativeHiddenLimit = 16384;

struct MoeReRoutingDeviceArgs {
  cpu::MoeReRoutingParams params;  // validated; counts already checked
  bool token_type_known = false;   // token_type is one ACL knows (float, f16, bf16, int8, uint8)
  AclDataType token_type = kAclFloat16;
  int64_t hidden = 0;                  // H (< 0: not known, AscendMoeCannPath's predictions)
  AclDataType scale_type = kAclFloat;  // when params.has_scales
  int scale_rank = 1;                  // 1: [A], 2: [A, S]
  const void* counts_host = nullptr;   // [N, E], host memory
  // The SoC to decide for (aclrtGetSocName's spelling); empty: this process's (SocName()).
  std::string soc;
  // Device memory; null where a tensor is empty or absent.
  const void* tokens = nullptr;
  const void* scales = nullptr;
  void* permute_tokens = nullptr;
  void* permute_scales = nullptr;
  int32_t* permute_idx = nullptr;
  void* expert_token_num = nullptr;
};

// Why aclnnMoeReRouting cannot run this call (the SoC, its documented Atlas A2/A3 limits); empty
// if it can. The one statement of these rules (AscendMoeCannPath asks it too).
std::string MoeReRoutingNativeBlocker(const MoeReRoutingDeviceArgs& args);

// Chooses the path: native when the limits hold and the operator library provides the call.
NativePath ChooseMoeReRoutingPath(const MoeReRoutingDeviceArgs& args);

// Queues the op on ctx.stream along `path`. Returns after every host buffer it used is no longer
// needed (fallback and count upload synchronise the stream). When aclnnMoeReRouting rejects the
// call in phase 1 (IsAclnnRejection), the copy fallback runs instead and `path` says so.
void LaunchMoeReRouting(const DeviceContext& ctx, const MoeReRoutingDeviceArgs& args, NativePath* path);

}  // namespace ascend_moe::cann
