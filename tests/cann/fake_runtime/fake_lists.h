// aclTensorList and aclIntArray as the fake libnnopbase.so builds them (fake_nnopbase_lists.cc),
// for the fake operators that take them.
#pragma once

#include <cstdint>
#include <vector>

extern "C" {
// Whether `p` is a live list / array from aclCreateTensorList / aclCreateIntArray.
int FakeAclnnIsTensorList(const void* p);
int FakeAclnnIsIntArray(const void* p);
}

namespace fake_cann {

struct TensorList {
  uint32_t magic;
  std::vector<const void*> tensors;
};
struct IntArray {
  uint32_t magic;
  std::vector<int64_t> values;
};
inline constexpr uint32_t kTensorListMagic = 0x7e451157;
inline constexpr uint32_t kIntArrayMagic = 0x7e45a44a;

}  // namespace fake_cann
