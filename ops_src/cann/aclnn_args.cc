#include "ops_src/cann/aclnn_args.h"

#include <cstring>
#include <stdexcept>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

namespace {

template <typename Fn>
Fn Require(const char* symbol) {
  std::string why;
  void* p = FindSymbol(symbol, &why);
  if (!p) throw std::runtime_error("CANN runtime unavailable: " + why);
  return reinterpret_cast<Fn>(p);
}

}  // namespace

TensorList::TensorList(const AclTensor* tensor) {
  static const auto create = Require<AclCreateTensorListFn>("aclCreateTensorList");
  const AclTensor* items[] = {tensor};
  list_ = create(items, 1);
  if (!list_) throw std::runtime_error("aclCreateTensorList failed");
}

TensorList::~TensorList() {
  static const auto destroy = Require<AclDestroyTensorListFn>("aclDestroyTensorList");
  if (list_) destroy(list_);
}

IntArray::IntArray(const std::vector<int64_t>& values) {
  static const auto create = Require<AclCreateIntArrayFn>("aclCreateIntArray");
  array_ = create(values.data(), values.size());
  if (!array_) throw std::runtime_error("aclCreateIntArray failed");
}

IntArray::~IntArray() {
  static const auto destroy = Require<AclDestroyIntArrayFn>("aclDestroyIntArray");
  if (array_) destroy(array_);
}

TransposedWeight::TransposedWeight(AclDataType type, int64_t groups, int64_t n, int64_t k, const void* data) {
  const int64_t view[] = {groups, k, n};
  const int64_t strides[] = {n * k, 1, k};
  const int64_t storage[] = {groups, n, k};
  tensor_ =
      Runtime().create_tensor(view, 3, type, strides, 0, kAclFormatNd, storage, 3, const_cast<void*>(data));
  if (!tensor_) throw std::runtime_error("aclCreateTensor failed (transposed weight view)");
}

TransposedWeight::~TransposedWeight() {
  if (tensor_) Runtime().destroy_tensor(tensor_);
}

void MemsetAsync(const DeviceContext& ctx, void* dst, size_t bytes, int value) {
  static const auto memset_async = Require<AclrtMemsetAsyncFn>("aclrtMemsetAsync");
  if (bytes == 0) return;
  CheckAcl(memset_async(dst, bytes, value, bytes, ctx.stream), "aclrtMemsetAsync");
}

bool FindAclnnOp(const char* name, AclnnOp* op, std::string* why) {
  const std::string prepare = std::string(name) + "GetWorkspaceSize";
  op->prepare = FindSymbol(prepare.c_str(), why);
  op->run = reinterpret_cast<AclnnRunFn>(op->prepare ? FindSymbol(name, why) : nullptr);
  return op->prepare && op->run;
}

std::string MissingAclnnOp(const char* name) {
  AclnnOp op;
  std::string why;
  return FindAclnnOp(name, &op, &why) ? std::string()
                                      : std::string("the CANN operator library has no ") + name + ": " + why;
}

AclnnOp RequireAclnnOp(const char* name, const char* what) {
  AclnnOp op;
  std::string why;
  if (!FindAclnnOp(name, &op, &why)) throw std::runtime_error(std::string(what) + ": " + why);
  return op;
}

std::vector<unsigned char> Download(const DeviceContext& ctx, const void* device, size_t bytes) {
  HostBuffer staging(bytes);  // asynchronous copies go through page-locked memory (device.h)
  CopyAsync(ctx, staging.get(), device, bytes, kDeviceToHost);
  Synchronize(ctx);
  std::vector<unsigned char> host(bytes);
  if (bytes) std::memcpy(host.data(), staging.get(), bytes);
  return host;
}

void Upload(const DeviceContext& ctx, void* device, const void* host, size_t bytes) {
  UploadStaged(ctx, device, host, bytes);
}

}  // namespace ascend_moe::cann
