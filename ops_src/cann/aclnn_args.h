// What the MoE op family's launchers add to device.h: device memset, the lookup of an operator's
// two entry points, and the host staging of the fallbacks. Their ACLNN arguments (tensors,
// tensor lists, int arrays) are aclnn_objects.h's.
#pragma once

#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ops_src/cann/aclnn_moe.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

// Sets `bytes` bytes at device address `dst` to `value` (0 or 0xFF), queued on the stream.
void MemsetAsync(const DeviceContext& ctx, void* dst, size_t bytes, int value);

// An operator's two phases, found by name ("aclnnX" and "aclnnXGetWorkspaceSize").
struct AclnnOp {
  void* prepare = nullptr;
  AclnnRunFn run = nullptr;
};
// Both entry points, or false with `why` naming what is missing and the libraries tried.
bool FindAclnnOp(const char* name, AclnnOp* op, std::string* why);
// "" when the operator library provides both entry points, else "the CANN operator library has
// no <name>: <the libraries tried>".
std::string MissingAclnnOp(const char* name);
// Why `aclnn_call` has no kernel for this process's chip (soc.h), or "".
std::string ChipBlocker(const char* aclnn_call);
// Both entry points; throws std::runtime_error "<what>: ..." when one is missing.
AclnnOp RequireAclnnOp(const char* name, const char* what);

// Phase 1 rejected the call (a parameter or tiling code, IsAclnnRejection): the kernels take
// their fallback for the node from then on. what(): "<name>GetWorkspaceSize failed with ...".
class AclnnRejected : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The way one call of a kernel that chooses among ACLNN operators runs: through `call` (the
// operator, or the first of its chain) or, when `call` is null, through the fallback for `reason`.
struct NativePath {
  const char* call = nullptr;
  std::string reason;
  bool rejected = false;  // the operator rejected the call in phase 1 (RunNativePath)
};

// Runs `native` when path->call is set and returns true; false when the path is the fallback or
// when phase 1 rejects the call (AclnnRejected), which *path then records (call null, rejected).
template <typename Native>
bool RunNativePath(NativePath* path, Native&& native) {
  if (!path->call) return false;
  try {
    native();
    return true;
  } catch (const AclnnRejected& e) {
    *path = NativePath{nullptr, e.what(), true};
    return false;
  }
}

// Both phases of an ACLNN operator (PrepareAclnn, LaunchAclnn); throws AclnnRejected when phase 1
// rejects the call (nothing is queued then), std::runtime_error on any other failure.
void RunAclnnOp(const DeviceContext& ctx, const char* name,
                const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run);

// Device bytes copied to a new staging buffer (HostBuffer); the stream is synchronised before
// returning.
std::unique_ptr<HostBuffer> Download(const DeviceContext& ctx, const void* device, size_t bytes);

}  // namespace ascend_moe::cann
