#include "ops_src/cann/aclnn_args.h"

#include <cstring>
#include <stdexcept>

#include "ops_src/cann/loader.h"
#include "ops_src/cann/soc.h"

namespace ascend_moe::cann {

namespace {

template <typename Fn>
Fn Require(const char* symbol) {
  std::string why;
  void* p = FindSymbol(symbol, &why);
  if (!p) throw std::runtime_error("CANN runtime unavailable: " + why);
  return reinterpret_cast<Fn>(p);
}

// Destructors look their release function up without throwing: a handle exists only if its
// create function was found, so a missing release function cannot happen in practice.
template <typename Fn>
Fn Lookup(const char* symbol) {
  std::string why;
  return reinterpret_cast<Fn>(FindSymbol(symbol, &why));
}

}  // namespace

TensorList::TensorList(const AclTensor* tensor) {
  static const auto create = Require<AclCreateTensorListFn>("aclCreateTensorList");
  const AclTensor* items[] = {tensor};
  list_ = create(items, 1);
  if (!list_) throw std::runtime_error("aclCreateTensorList failed");
}

TensorList::~TensorList() {
  static const auto destroy = Lookup<AclDestroyTensorListFn>("aclDestroyTensorList");
  if (list_ && destroy) destroy(list_);
}

IntArray::IntArray(const std::vector<int64_t>& values) {
  static const auto create = Require<AclCreateIntArrayFn>("aclCreateIntArray");
  array_ = create(values.data(), values.size());
  if (!array_) throw std::runtime_error("aclCreateIntArray failed");
}

IntArray::~IntArray() {
  static const auto destroy = Lookup<AclDestroyIntArrayFn>("aclDestroyIntArray");
  if (array_ && destroy) destroy(array_);
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

std::string ChipBlocker() { return SocBlocker(SocName()); }

AclnnOp RequireAclnnOp(const char* name, const char* what) {
  AclnnOp op;
  std::string why;
  if (!FindAclnnOp(name, &op, &why)) throw std::runtime_error(std::string(what) + ": " + why);
  return op;
}

void RunAclnnOp(const DeviceContext& ctx, const char* name,
                const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run) {
  const AclnnPrepared prepared = PrepareAclnn(name, prepare);
  if (!prepared.rejected.empty()) throw AclnnRejected(prepared.rejected);
  LaunchAclnn(ctx, name, prepared, run);
}

std::unique_ptr<HostBuffer> Download(const DeviceContext& ctx, const void* device, size_t bytes) {
  auto host = std::make_unique<HostBuffer>(bytes);
  CopyAsync(ctx, host->get(), device, bytes, kDeviceToHost);
  Synchronize(ctx);
  return host;
}

HostUploads::~HostUploads() {
  if (held_.empty()) return;
  try {
    Synchronize(ctx_);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a destructor must not throw; the failed
                   // stream is reported by the call that queued the work
  }
}

void HostUploads::Upload(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  held_.push_back(std::make_unique<HostBuffer>(bytes));
  std::memcpy(held_.back()->get(), host, bytes);
  CopyAsync(ctx_, device, held_.back()->get(), bytes, kHostToDevice);
}

}  // namespace ascend_moe::cann
