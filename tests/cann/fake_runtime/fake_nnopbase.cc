// Fake libnnopbase.so: aclCreateTensor / aclDestroyTensor, with CANN's ownership (opbase
// src/nnopbase/common/api/acl_op_api.cpp): a tensor put into an aclTensorList belongs to the list,
// whose aclDestroyTensorList destroys it. Tensors are tracked: destroying one twice, destroying
// one a list owns, destroying a pointer that was never a tensor, or passing a destroyed one to an
// operator aborts the process (FakeAclAbort); a null tensor is destroyed as a no-op, as by CANN.
#include <cstdio>
#include <mutex>
#include <map>
#include <string>

#include "fake_cann.h"

namespace {
std::mutex g_mu;
// Live tensors -> the list that owns them (null: their creator).
std::map<const void*, const void*>& Live() {
  static auto* s = new std::map<const void*, const void*>;
  return *s;
}
// Whether `t` views `storage` (row-major) with its axes permuted: each view axis is a storage
// axis of the same size, strided as that axis.
bool IsPermutedView(const fake_cann::Tensor& t, const std::vector<int64_t>& storage) {
  std::vector<int64_t> storage_strides(storage.size(), 1);
  for (size_t i = storage.size(); i-- > 1;) storage_strides[i - 1] = storage_strides[i] * storage[i];
  std::vector<bool> used(storage.size(), false);
  for (size_t v = 0; v < t.dims.size(); ++v) {
    bool found = false;
    for (size_t s = 0; s < storage.size() && !found; ++s) {
      if (!used[s] && storage[s] == t.dims[v] && storage_strides[s] == t.strides[v]) used[s] = found = true;
    }
    if (!found) return false;
  }
  return true;
}

}  // namespace

extern "C" {

// Whether `t` is a live tensor from aclCreateTensor.
int FakeAclnnIsTensor(const void* t) {
  std::lock_guard<std::mutex> lock(g_mu);
  return Live().count(t) ? 1 : 0;
}
int FakeAclnnLiveTensors() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(Live().size());
}

void* aclCreateTensor(const int64_t* view_dims, uint64_t view_dims_num, int data_type,
                      const int64_t* stride, int64_t offset, int format,
                      const int64_t* storage_dims, uint64_t storage_dims_num, void* data) {
  using fake_cann::Tensor;
  if ((view_dims_num && !view_dims) || (view_dims_num && !stride) || view_dims_num > 8) {
    FakeAclError("aclCreateTensor: dims or strides missing, or rank > 8");
    return nullptr;
  }
  // opbase docs/.../aclCreateTensor.md: "The address must be 32-byte aligned. Otherwise, an
  // undefined error may occur." Always enforced.
  if (reinterpret_cast<uintptr_t>(data) % 32 != 0) {
    FakeAclError(("aclCreateTensor: tensorData " + std::to_string(reinterpret_cast<uintptr_t>(data)) +
                  " is not 32-byte aligned")
                     .c_str());
    return nullptr;
  }
  if (fake_cann::DataBytes(data_type, 1) == 0) {
    FakeAclError(("aclCreateTensor: unknown data type " + std::to_string(data_type)).c_str());
    return nullptr;
  }
  auto* t = new Tensor{fake_cann::kTensorMagic,
                       std::vector<int64_t>(view_dims, view_dims + view_dims_num),
                       std::vector<int64_t>(stride, stride + view_dims_num),
                       data_type,
                       format,
                       offset,
                       data};
  for (int64_t d : t->dims) {
    if (d < 0) {
      FakeAclError("aclCreateTensor: negative dimension");
      delete t;
      return nullptr;
    }
  }
  // A view differs from its storage only as a permutation of it with matching strides (e.g. a
  // transposed weight: view [E, K, N], strides [N*K, 1, K] over storage [E, N, K]); its elements
  // then span exactly the storage.
  const std::vector<int64_t> storage(storage_dims, storage_dims + storage_dims_num);
  if (storage_dims_num != view_dims_num ||
      (storage_dims_num && storage != t->dims && !IsPermutedView(*t, storage))) {
    FakeAclError(
        "aclCreateTensor: storage dims differ from the view dims and the view is no permutation of them");
    delete t;
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(g_mu);
  Live()[t] = nullptr;
  return t;
}

// Hands live tensor `t` to `list` (aclCreateTensorList); aborts if it is not a live tensor of its
// creator's (destroyed, or already in a list, which would destroy it a second time).
void FakeAclnnGiveTensorToList(const void* t, const void* list) {
  std::lock_guard<std::mutex> lock(g_mu);
  const auto it = Live().find(t);
  if (it == Live().end()) FakeAclAbort("aclCreateTensorList: an item is not a live aclTensor (used after destroy?)");
  if (it->second) FakeAclAbort("aclCreateTensorList: an item already belongs to another aclTensorList");
  it->second = list;
}

// Destroys tensor `t` on behalf of `owner` (null: its creator, aclDestroyTensor; else the list).
void FakeAclnnDestroyTensorAs(const void* t, const void* owner, const char* who) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    const auto it = Live().find(t);
    if (it == Live().end()) {
      FakeAclAbort((std::string(who) + ": not a live aclTensor (destroyed twice, or never created)").c_str());
    }
    if (it->second != owner) {
      FakeAclAbort((std::string(who) +
                    ": the tensor belongs to an aclTensorList, whose aclDestroyTensorList destroys it "
                    "(acl_op_api.cpp; aclDestroyTensorList.md: not to be destroyed again)")
                       .c_str());
    }
    Live().erase(it);
  }
  delete static_cast<const fake_cann::Tensor*>(t);
}

int aclDestroyTensor(const void* t) {
  if (!t) return fake_cann::kOk;
  FakeAclnnDestroyTensorAs(t, nullptr, "aclDestroyTensor");
  return fake_cann::kOk;
}

}  // extern "C"
