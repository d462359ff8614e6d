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

namespace ascend_moe::cann {

// Host memory for staging copies to and from the device: page-locked (aclrtMallocHost) where the
// runtime provides it, else 64-byte aligned; freed on destruction. CANN's runtime documents
// pinned host memory for aclrtMemcpyAsync (pageable memory "may cause unpredictable errors" on
// older versions), so no asynchronous copy of the kernels touches other host memory.
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

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
  bool pinned_ = false;
};

// The caller's device: the stream work is queued on, and the workspace callback that hands out
// device memory (e.g. ONNX Runtime's CANN arena). Memory handed back with `release` may be reused
// by later work on the same stream only (stream-ordered), so no synchronisation is needed.
struct DeviceContext {
  AclStream stream = nullptr;
  std::function<void*(size_t bytes)> allocate;  // bytes > 0; never returns null (throws instead)
  std::function<void(void* p)> release;
  // Host staging of the uploads queued since the last Synchronize(ctx) (UploadStaged), freed by it.
  std::shared_ptr<std::vector<std::unique_ptr<HostBuffer>>> staged =
      std::make_shared<std::vector<std::unique_ptr<HostBuffer>>>();
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

// A contiguous ND aclTensor over device memory (row-major strides, offset 0), destroyed on
// destruction.
class Tensor {
 public:
  Tensor(AclDataType type, std::vector<int64_t> dims, const void* data);
  ~Tensor();
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  AclTensor* get() const { return tensor_; }

 private:
  AclTensor* tensor_ = nullptr;
};

// Throws std::runtime_error "<what> failed with ACL/ACLNN status N: <CANN's message>" unless ok.
void CheckAcl(int status, const std::string& what);

// Queued on the stream. Host memory must be a HostBuffer's (see there).
void CopyAsync(const DeviceContext& ctx, void* dst, const void* src, size_t bytes, AclMemcpyKind kind);
void Synchronize(const DeviceContext& ctx);
// Queues an upload of `bytes` host bytes from any host memory: they are copied into a HostBuffer
// of the context, which lives until the next Synchronize(ctx).
void UploadStaged(const DeviceContext& ctx, void* device, const void* host, size_t bytes);
// Synchronous, outside any stream (e.g. reading a constant once when a kernel is created).
void CopySync(void* dst, const void* src, size_t bytes, AclMemcpyKind kind);

// Device-to-device copies are queued only between 64-byte aligned addresses: acl_rt.h
// (aclrtMemcpyAsync) requires it for on-chip copies.
inline constexpr uintptr_t kDeviceCopyAlign = 64;
inline bool DeviceCopyAligned(const void* p) {
  return reinterpret_cast<uintptr_t>(p) % kDeviceCopyAlign == 0;
}

// Whether a phase-1 status says the operator rejects these arguments (its parameter or tiling
// checks, or no kernel for them: 161002, 561002, 561003, 561112), the way limits that differ
// between CANN versions show; the kernels then take their fallback instead of failing.
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
