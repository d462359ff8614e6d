#include "ops_src/cann/device.h"

#include <cstdlib>
#include <cstring>
#include <new>
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

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  const size_t n = bytes ? bytes : 1;
  const AclRuntime& rt = Runtime();
  if (rt.malloc_host) {
    CheckAcl(rt.malloc_host(&data_, n), "aclrtMallocHost");
    pinned_ = true;
    return;
  }
  data_ =
      std::aligned_alloc(kDeviceCopyAlign, (n + kDeviceCopyAlign - 1) / kDeviceCopyAlign * kDeviceCopyAlign);
  if (!data_) throw std::bad_alloc();
}

HostBuffer::~HostBuffer() {
  if (pinned_)
    Runtime().free_host(data_);
  else
    std::free(data_);
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
  if (ctx.staged) ctx.staged->clear();
}

void UploadStaged(const DeviceContext& ctx, void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  auto staging = std::make_unique<HostBuffer>(bytes);
  std::memcpy(staging->get(), host, bytes);
  CopyAsync(ctx, device, staging->get(), bytes, kHostToDevice);
  ctx.staged->push_back(std::move(staging));
}

bool IsAclnnRejection(AclnnStatus status) {
  return status == kAclnnParamInvalid || status == kAclnnTilingError || status == kAclnnFindKernelError ||
         status == kAclnnKernelPackageNotFound;
}

AclnnPrepared PrepareAclnn(const char* name,
                           const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare) {
  AclnnPrepared prepared;
  const AclnnStatus status = prepare(&prepared.workspace_size, &prepared.executor);
  const std::string what = std::string(name) + "GetWorkspaceSize";
  if (status != 0 && IsAclnnRejection(status)) {
    try {
      CheckAcl(status, what);
    } catch (const std::runtime_error& e) {
      prepared.rejected = e.what();
    }
    return prepared;
  }
  CheckAcl(status, what);
  return prepared;
}

void LaunchAclnn(const DeviceContext& ctx, const char* name, const AclnnPrepared& prepared, AclnnRunFn run) {
  if (prepared.workspace_size > 0) {
    DeviceBuffer workspace(ctx, prepared.workspace_size);
    CheckAcl(run(workspace.get(), prepared.workspace_size, prepared.executor, ctx.stream), name);
  } else {
    CheckAcl(run(nullptr, 0, prepared.executor, ctx.stream), name);
  }
}

void RunAclnn(const DeviceContext& ctx, const char* name,
              const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run) {
  const AclnnPrepared prepared = PrepareAclnn(name, prepare);
  if (!prepared.rejected.empty()) throw std::runtime_error(prepared.rejected);
  LaunchAclnn(ctx, name, prepared, run);
}

}  // namespace ascend_moe::cann
