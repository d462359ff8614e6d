// What a launcher gets from its caller (the stream and device scratch memory) and the small RAII
// helpers every launch uses: device buffers, aclTensor descriptors, checked copies, ACLNN calls.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_objects.h"

namespace ascend_moe::cann {

struct StagingBlock;  // device.cc
struct DeviceContext;

// Host memory for staging copies to and from the device, leased from a process-wide pool of
// page-locked blocks (aclrtMallocHost where the runtime provides it, else 64-byte aligned) that
// is reused across runs: no allocation, free or synchronisation per copy once the pool is warm.
// CANN's runtime documents pinned host memory for aclrtMemcpyAsync (pageable memory "may cause
// unpredictable errors" on older versions), so no asynchronous copy of the kernels touches other
// host memory. On destruction the block goes back to the pool: at once, or, after UploadTo, once
// the stream has run the copy (an event recorded after it; aclrtQueryEventStatus says when).
class HostBuffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer();
  HostBuffer(const HostBuffer&) = delete;
  HostBuffer& operator=(const HostBuffer&) = delete;
  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t size() const { return bytes_; }
  // Queues the copy of the buffer's first `bytes` bytes to device memory `device` on ctx.stream;
  // the caller need not synchronise before the buffer is destroyed.
  void UploadTo(const DeviceContext& ctx, void* device, size_t bytes);

 private:
  StagingBlock* block_ = nullptr;
  void* data_ = nullptr;
  size_t bytes_ = 0;
  AclStream queued_on_ = nullptr;  // the stream of the last UploadTo
  bool queued_ = false;
};

// The caller's device: the stream work is queued on, and the workspace callback that hands out
// device memory (e.g. ONNX Runtime's CANN arena). Memory handed back with `release` may be reused
// by later work on the same stream only (stream-ordered), so no synchronisation is needed.
struct DeviceContext {
  AclStream stream = nullptr;
  std::function<void*(size_t bytes)> allocate;  // bytes > 0; never returns null (throws instead)
  std::function<void(void* p)> release;
};

// Device scratch memory from the context, released on destruction.
class DeviceBuffer {
 public:
  DeviceBuffer(const DeviceContext& ctx, size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* get() const { return data_; }

 private:
  const DeviceContext& ctx_;
  void* data_ = nullptr;
};

// Throws std::runtime_error "<what> failed with ACL/ACLNN status N: <CANN's message>" unless ok.
void CheckAcl(int status, const std::string& what);

// Queued on the stream. Host memory must be a HostBuffer's (see there), alive until the copy ran.
void CopyAsync(const DeviceContext& ctx, void* dst, const void* src, size_t bytes, AclMemcpyKind kind);
void Synchronize(const DeviceContext& ctx);
// Queues an upload of `bytes` host bytes from any host memory: they are copied into a pooled
// HostBuffer first, so `host` may be reused at once and nothing waits for the stream.
void UploadStaged(const DeviceContext& ctx, void* device, const void* host, size_t bytes);
// Synchronous, outside any stream (e.g. reading a constant once when a kernel is created).
void CopySync(void* dst, const void* src, size_t bytes, AclMemcpyKind kind);

// Device-to-device copies are queued only between 64-byte aligned addresses: acl_rt.h
// (aclrtMemcpyAsync) requires it for on-chip copies.
inline constexpr uintptr_t kDeviceCopyAlign = 64;
inline bool DeviceCopyAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kDeviceCopyAlign == 0;
}

// Whether a phase-1 status says the operator rejects these arguments, the way limits that differ
// between CANN versions show; the kernels then take their fallback instead of failing. The set
// every operator of the family can return from phase 1 for arguments it does not take, read from
// their sources (opbase include/nnopbase/opdev/op_errno.h for the values):
//   161002 ACLNN_ERR_PARAM_INVALID, the parameter checks of every aclnn_<op>.cpp;
//   5610xx / 5611xx ACLNN_ERR_INNER_*: 561001 infer shape, 561002 tiling, 561003 no kernel,
//     561112 no kernel package (the l0 launch), 561101 no executor, 561103 a null l0 result
//     (aclnn_grouped_matmul.cpp and aclnn_moe_init_routing_v3.cpp turn any l0 failure, tiling
//     included, into 561103), 561000 (aclnn_moe_token_(un)permute.cpp).
// Not a rejection: 161001 (a null required argument: this library's bug) and 361001 (runtime).
// aclnnMoeInitRoutingV3 checks its tiling only in phase 2 (moe_init_routing_v3.h checks its
// limits before the call).
bool IsAclnnRejection(AclnnStatus status);

// Phase 1 of an ACLNN operator: `prepare(&workspace_size, &executor)` (its ...GetWorkspaceSize
// call). A rejection (IsAclnnRejection) is returned in `rejected` ("<name>GetWorkspaceSize failed
// with ACLNN status N: <CANN's message>"); any other failure throws.
struct AclnnPrepared {
  uint64_t workspace_size = 0;
  AclOpExecutor* executor = nullptr;
  std::string rejected;  // empty when accepted
};
AclnnPrepared PrepareAclnn(const char* name,
                           const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare);
// Phase 2 of an accepted call: `run` with workspace from the context, on the stream; throws on
// failure.
void LaunchAclnn(const DeviceContext& ctx, const char* name, const AclnnPrepared& prepared, AclnnRunFn run);
// Both phases, for a call without a fallback: a phase-1 rejection throws like any failure.
void RunAclnn(const DeviceContext& ctx, const char* name,
              const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run);

}  // namespace ascend_moe::cann
