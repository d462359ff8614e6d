#include "ops_src/cann/device.h"

#include <stdexcept>
#include <utility>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

DeviceBuffer::DeviceBuffer(const DeviceContext& ctx, size_t bytes) : ctx_(ctx) {
  data_ = ctx_.allocate(bytes ? bytes : 1);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) ctx_.release(data_);
}

Tensor::Tensor(AclDataType type, std::vector<int64_t> dims, const void* data) {
  // Contiguous row-major strides, in elements.
  std::vector<int64_t> strides(dims.size(), 1);
  for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
  tensor_ = Runtime().create_tensor(dims.data(), dims.size(), type, strides.data(), 0, kAclFormatNd,
                                    dims.data(), dims.size(), const_cast<void*>(data));
  if (!tensor_) throw std::runtime_error("aclCreateTensor failed");
}

Tensor::~Tensor() {
  if (tensor_) Runtime().destroy_tensor(tensor_);
}

void CheckAcl(int status, const std::string& what) {
  if (status == 0) return;
  const AclRuntime& rt = Runtime();
  const char* msg = rt.recent_error ? rt.recent_error() : nullptr;
  throw std::runtime_error(what + " failed with ACL/ACLNN status " + std::to_string(status) +
                           (msg && *msg ? std::string(": ") + msg : std::string()));
}

void CopyAsync(const DeviceContext& ctx, void* dst, const void* src, size_t bytes, AclMemcpyKind kind) {
  if (bytes == 0) return;
  CheckAcl(Runtime().memcpy_async(dst, bytes, src, bytes, kind, ctx.stream), "aclrtMemcpyAsync");
}

void CopySync(void* dst, const void* src, size_t bytes, AclMemcpyKind kind) {
  if (bytes == 0) return;
  CheckAcl(Runtime().memcpy(dst, bytes, src, bytes, kind), "aclrtMemcpy");
}

void Synchronize(const DeviceContext& ctx) {
  CheckAcl(Runtime().synchronize_stream(ctx.stream), "aclrtSynchronizeStream");
}

void RunAclnn(const DeviceContext& ctx, const char* name,
              const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run) {
  uint64_t workspace_size = 0;
  AclOpExecutor* executor = nullptr;
  CheckAcl(prepare(&workspace_size, &executor), std::string(name) + "GetWorkspaceSize");
  if (workspace_size > 0) {
    DeviceBuffer workspace(ctx, workspace_size);
    CheckAcl(run(workspace.get(), workspace_size, executor, ctx.stream), name);
  } else {
    CheckAcl(run(nullptr, 0, executor, ctx.stream), name);
  }
}

}  // namespace ascend_moe::cann
