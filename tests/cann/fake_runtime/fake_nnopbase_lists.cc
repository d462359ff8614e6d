// Fake libnnopbase.so, continued: aclCreateTensorList / aclDestroyTensorList and
// aclCreateIntArray / aclDestroyIntArray (aclnn/acl_meta.h). Lists and arrays are tracked like
// tensors: destroying one twice or one never made, or passing a destroyed one to an operator,
// aborts the process. A list owns its tensors: aclDestroyTensorList destroys them (opbase
// acl_op_api.cpp), and a tensor of a live list must not be destroyed on its own.
#include <mutex>
#include <set>
#include <string>

#include "fake_cann.h"
#include "fake_lists.h"

extern "C" int FakeAclnnIsTensor(const void* t);
extern "C" void FakeAclnnGiveTensorToList(const void* t, const void* list);
extern "C" void FakeAclnnDestroyTensorAs(const void* t, const void* owner, const char* who);

namespace {
fake_cann::LiveHandles& Handles() {
  static auto* handles = new fake_cann::LiveHandles;
  return *handles;
}
void Track(const void* p) { Handles().Track(p); }
bool Untrack(const void* p) { return Handles().Untrack(p); }
bool IsLive(const void* p) { return Handles().IsLive(p); }
}  // namespace

extern "C" {

int FakeAclnnIsTensorList(const void* p) {
  return p && IsLive(p) && static_cast<const fake_cann::TensorList*>(p)->magic == fake_cann::kTensorListMagic;
}
int FakeAclnnIsIntArray(const void* p) {
  return p && IsLive(p) && static_cast<const fake_cann::IntArray*>(p)->magic == fake_cann::kIntArrayMagic;
}

void* aclCreateTensorList(const void* const* value, uint64_t size) {
  if (size && !value) {
    FakeAclError("aclCreateTensorList: value is null");
    return nullptr;
  }
  auto* list = new fake_cann::TensorList{fake_cann::kTensorListMagic, {}};
  for (uint64_t i = 0; i < size; ++i) {
    FakeAclnnGiveTensorToList(value[i], list);  // aborts unless a live tensor of no list
    list->tensors.push_back(value[i]);
  }
  Track(list);
  return list;
}

int aclDestroyTensorList(const void* list) {
  if (!list) return fake_cann::kOk;
  if (!Untrack(list))
    FakeAclAbort("aclDestroyTensorList: not a live tensor list (destroyed twice, or never created)");
  const auto* l = static_cast<const fake_cann::TensorList*>(list);
  for (const void* t : l->tensors) FakeAclnnDestroyTensorAs(t, list, "aclDestroyTensorList");
  delete l;
  return fake_cann::kOk;
}

void* aclCreateIntArray(const int64_t* value, uint64_t size) {
  if (size && !value) {
    FakeAclError("aclCreateIntArray: value is null");
    return nullptr;
  }
  auto* array = new fake_cann::IntArray{fake_cann::kIntArrayMagic, std::vector<int64_t>(value, value + size)};
  Track(array);
  return array;
}

int aclDestroyIntArray(const void* array) {
  if (!array) return fake_cann::kOk;
  if (!Untrack(array))
    FakeAclAbort("aclDestroyIntArray: not a live int array (destroyed twice, or never created)");
  delete static_cast<const fake_cann::IntArray*>(array);
  return fake_cann::kOk;
}

}  // extern "C"
