// SwiGlu on an Ascend NPU (docs/operators.md §11): aclnnSwiGlu (ops-nn
// activation/swi_glu/docs/aclnnSwiGlu.md: x float16 / bfloat16 / float32, ND, rank >= 1, an even
// size along dim in [-rank, rank), out of x's type). Plain C++ over device pointers.
#pragma once

#include <string>
#include <vector>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnSwiGlu = "aclnnSwiGlu";
inline constexpr const char* kAclnnPermute = "aclnnPermute";
// aclTensor descriptors hold at most 8 dims (aclCreateTensor).
inline constexpr size_t kSwiGluMaxRank = 8;

struct SwiGluDeviceArgs {
  AclDataType type = kAclFloat;
  std::vector<int64_t> x_dims;  // validated: dims[dim] is even
  int64_t dim = -1;
  const void* x = nullptr;  // device
  void* out = nullptr;      // device, x_dims with dims[dim] halved
};

// Why aclnnSwiGlu cannot run this call; empty if it can.
std::string SwiGluNativeBlocker(const SwiGluDeviceArgs& args);
// Queues aclnnSwiGlu on the stream (asynchronous: no host buffer is involved).
void LaunchSwiGlu(const DeviceContext& ctx, const SwiGluDeviceArgs& args, const char* what = "SwiGlu");

// SwiGLU of interleaved (gate, up) pairs: x [rows, 2 * inter] with gate i in column 2i and up i in
// column 2i + 1 (the experts' gate/up layout), out [rows, inter]. aclnnPermute first splits x into
// [rows, 2, inter] (gates, then ups; device scratch from the arena), so that aclnnSwiGlu halves
// whole rows (its aligned tiling) rather than reading x as [rows * inter, 2] (8-byte rows).
void LaunchSwiGluOfPairs(const DeviceContext& ctx, AclDataType type, int64_t rows, int64_t inter,
                         const void* x, void* out, const char* what);

}  // namespace ascend_moe::cann
