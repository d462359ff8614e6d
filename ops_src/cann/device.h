// What a launcher gets from its caller (the stream and device scratch memory) and the small RAII
// helpers every launch uses: device buffers, aclTensor descriptors, checked copies, ACLNN calls.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "ops_src/cann/acl.h"

namespace ascend_moe::cann {

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

// Queued on the stream.
void CopyAsync(const DeviceContext& ctx, void* dst, const void* src, size_t bytes, AclMemcpyKind kind);
void Synchronize(const DeviceContext& ctx);
// Synchronous, outside any stream (e.g. reading a constant once when a kernel is created).
void CopySync(void* dst, const void* src, size_t bytes, AclMemcpyKind kind);

// Runs an ACLNN operator's two phases: `prepare(&workspace_size, &executor)` (its
// ...GetWorkspaceSize call), then `run` with workspace from the context on the stream.
void RunAclnn(const DeviceContext& ctx, const char* name,
              const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run);

}  // namespace ascend_moe::cann
