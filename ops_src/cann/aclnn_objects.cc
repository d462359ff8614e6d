#include "ops_src/cann/aclnn_objects.h"

#include <cstdio>
#include <stdexcept>
#include <string>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

namespace {

// Destructors look their destroy function up without throwing: an object exists only if its
// create function, in the same library, was found.
template <typename Fn>
Fn Lookup(const char* symbol) {
  std::string why;
  return reinterpret_cast<Fn>(FindSymbol(symbol, &why));
}

}  // namespace

void ReleaseChecked(int status, const char* what) noexcept {
  if (status != 0) std::fprintf(stderr, "ascend_moe CANN kernels: %s failed with status %d\n", what, status);
}

Tensor::Tensor(AclDataType type, const std::vector<int64_t>& view, const std::vector<int64_t>& strides,
               const std::vector<int64_t>& storage, const void* data) {
  tensor_ = Runtime().create_tensor(view.data(), view.size(), type, strides.data(), 0, kAclFormatNd,
                                    storage.data(), storage.size(), const_cast<void*>(data));
  if (!tensor_) throw std::runtime_error("aclCreateTensor failed");
}

Tensor::Tensor(AclDataType type, std::vector<int64_t> dims, const void* data)
    : Tensor(
          type, dims,
          [&dims] {
            std::vector<int64_t> strides(dims.size(), 1);  // in elements
            for (size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
            return strides;
          }(),
          dims, data) {}

Tensor Tensor::TransposedWeight(AclDataType type, int64_t groups, int64_t n, int64_t k, const void* data) {
  return Tensor(type, {groups, k, n}, {n * k, 1, k}, {groups, n, k}, data);
}

Tensor::~Tensor() {
  if (tensor_) ReleaseChecked(Runtime().destroy_tensor(tensor_), "aclDestroyTensor");
}

TensorList::TensorList(Tensor tensor) {
  static const auto create = RequireSymbolAs<AclCreateTensorListFn>("aclCreateTensorList");
  const AclTensor* items[] = {tensor.get()};
  list_ = create(items, 1);
  if (!list_) throw std::runtime_error("aclCreateTensorList failed");  // `tensor` still owns its tensor
  tensor.tensor_ = nullptr;                                            // the list's now
}

TensorList::~TensorList() {
  static const auto destroy = Lookup<AclDestroyTensorListFn>("aclDestroyTensorList");
  if (list_) ReleaseChecked(destroy ? destroy(list_) : -1, "aclDestroyTensorList");
}

IntArray::IntArray(const std::vector<int64_t>& values) {
  static const auto create = RequireSymbolAs<AclCreateIntArrayFn>("aclCreateIntArray");
  array_ = create(values.data(), values.size());
  if (!array_) throw std::runtime_error("aclCreateIntArray failed");
}

IntArray::~IntArray() {
  static const auto destroy = Lookup<AclDestroyIntArrayFn>("aclDestroyIntArray");
  if (array_) ReleaseChecked(destroy ? destroy(array_) : -1, "aclDestroyIntArray");
}

}  // namespace ascend_moe::cann
