// GroupedMatmul on an Ascend NPU (docs/operators.md §4): aclnnGroupedMatmulV4 where its limits
// allow, otherwise the host fallback (inputs copied to the host, the CPU kernel, y copied back).
// Plain C++ over device pointers, the caller's stream and workspace callback; knows nothing of
// ONNX Runtime. Also the building block of MoeRoutedExperts' chain.
#pragma once

#include <string>
#include <vector>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnGroupedMatmulV4 = "aclnnGroupedMatmulV4";
// aclnnGroupedMatmulV4 takes a group-list tensor of at most 1024 entries
// (aclnn_grouped_matmul.cpp, MAX_GROUP_LIST_SIZE_TENSOR).
inline constexpr int64_t kGmmMaxGroups = 1024;

struct GroupedMatmulDeviceArgs {
  cpu::GroupedMatmulParams params;  // validated
  int64_t group_list_type = 0;      // 0 cumulative ends, 1 rows per group
  std::vector<int64_t> group_list;  // the E values as given (host), widened to int64
  std::vector<int64_t> ends;        // the E validated group ends (host)
  bool has_bias = false;
  // Device memory; null where a tensor is empty or absent.
  const void* x = nullptr;       // [M, K]
  const void* weight = nullptr;  // [E, K, N], or [E, N, K] with params.transpose_weight
  const void* bias = nullptr;    // [E, N]
  // The quantized forms' inputs (params.weight, params.type): null where absent.
  const void* scale = nullptr;             // W8A8: [E, N]
  const void* antiquant_scale = nullptr;   // W8A16 / W4A16: [E, G, N]
  const void* antiquant_offset = nullptr;  // W8A16 / W4A16: [E, G, N]; absent: zero
  const void* per_token_scale = nullptr;   // W8A8: float [M]
  void* y = nullptr;                       // [M, N] of params.out_type
};

AclDataType GmmAclType(cpu::GmmType type);

// Why aclnnGroupedMatmulV4 cannot run this call (its limits, from ops-transformer's
// aclnn_grouped_matmul.cpp); empty if it can.
std::string GroupedMatmulNativeBlocker(const GroupedMatmulDeviceArgs& args);
// Why aclnnGroupedMatmulV4 cannot run this call on SoC `soc` (this process's when empty) beyond
// GroupedMatmulNativeBlocker: its kernels for the chip (soc.h), and on Ascend310P float16 x,
// weight, bias and y only, without quantisation (aclnn_grouped_matmul.cpp
// Check310PlatformForFunction, CheckFunctionQuantParams; grouped_matmul_def.cpp's 310p config).
std::string GroupedMatmulSocBlocker(const cpu::GroupedMatmulParams& params, bool has_bias,
                                    const std::string& soc);
// Native when the limits hold and the operator library provides the call.
NativePath ChooseGroupedMatmulPath(const GroupedMatmulDeviceArgs& args);

// Queues the op on ctx.stream along `path`; returns once every host buffer it used is no
// longer needed. When phase 1 rejects the native call, runs the fallback and says so in `path`.
void LaunchGroupedMatmul(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& args, NativePath* path);

// Bytes of one element of a GroupedMatmul buffer of type t.
size_t GmmTypeBytes(cpu::GmmType t);

// The quantized forms' dequantisation inputs (device memory; null where absent).
struct GmmQuantArgs {
  const void* scale = nullptr;             // W8A8: [E, N] of params.scale_type
  const void* per_token_scale = nullptr;   // W8A8: float [M]
  const void* antiquant_scale = nullptr;   // W8A16 / W4A16: [E, N] or [E, G, N] of params.antiquant_type
  const void* antiquant_offset = nullptr;  // the same shape and type (the operator requires one)
};

// One native call over device memory: y[rows of group e] = x[rows] @ W[e] (+ bias), the group
// list already on the device (int64 [E], `group_list_type`); int8 x (W8A8) dequantised by
// `quant` into params.out_type, int8 / int4 weights (W8A16 / W4A16) by its antiquant scale and
// offset. Rows past the last group are left as they are. Also used by MoeRoutedExperts' chain.
void RunGroupedMatmulV4(const DeviceContext& ctx, const cpu::GroupedMatmulParams& params, const void* x,
                        const void* weight, const void* bias, const void* group_list_device,
                        int64_t group_list_type, void* y, const GmmQuantArgs* quant = nullptr);

}  // namespace ascend_moe::cann
