// The ACLNN argument objects a launch creates, each destroyed exactly once as CANN's nnopbase
// defines it (opbase src/nnopbase/common/api/acl_op_api.cpp; docs/.../aclDestroyTensorList.md):
//   aclTensor      aclCreateTensor -> aclDestroyTensor, unless it was put into an aclTensorList;
//   aclTensorList  aclCreateTensorList -> aclDestroyTensorList, which destroys the list's tensors
//                  as well ("the aclTensor in the aclTensorList does not need to be destroyed
//                  again"): a tensor put into a list belongs to the list from then on;
//   aclIntArray    aclCreateIntArray -> aclDestroyIntArray;
//   aclOpExecutor  made by phase 1 (aclnnXGetWorkspaceSize) and released by phase 2 (aclnnX):
//                  never destroyed by the caller (device.h, LaunchAclnn).
// Any of them may be destroyed once phase 2 has returned. Every destroy's status is checked
// (ReleaseChecked): a failure says an object was not the caller's to destroy.
#pragma once

#include <cstdint>
#include <vector>

#include "ops_src/cann/aclnn_moe.h"

namespace ascend_moe::cann {

// Reports a failed destroy / free (status != 0) of `what` on stderr. Destructors cannot throw:
// a failed release is a bug of this library's ownership, never of the caller's data.
void ReleaseChecked(int status, const char* what) noexcept;

// An ND aclTensor over device memory, destroyed on destruction unless a TensorList took it.
class Tensor {
 public:
  // Contiguous row-major strides, offset 0.
  Tensor(AclDataType type, std::vector<int64_t> dims, const void* data);
  // The [E, K, N] view of a weight stored [E, N, K] (strides [N*K, 1, K], storage dims
  // [E, N, K]): how torch_npu passes a transposed weight, which aclnnGroupedMatmul recognises
  // by its strides.
  static Tensor TransposedWeight(AclDataType type, int64_t groups, int64_t n, int64_t k, const void* data);
  Tensor(Tensor&& other) noexcept : tensor_(other.tensor_) { other.tensor_ = nullptr; }
  Tensor& operator=(Tensor&&) = delete;
  Tensor(const Tensor&) = delete;
  Tensor& operator=(const Tensor&) = delete;
  ~Tensor();
  AclTensor* get() const { return tensor_; }

 private:
  friend class TensorList;
  Tensor(AclDataType type, const std::vector<int64_t>& view, const std::vector<int64_t>& strides,
         const std::vector<int64_t>& storage, const void* data);
  AclTensor* tensor_ = nullptr;
};

// An aclTensorList that owns its tensors (taken from the Tensors given), destroyed with them on
// destruction by aclDestroyTensorList.
class TensorList {
 public:
  // A one-tensor list (grouped matmul's x / weight / bias / y with split_item 3).
  explicit TensorList(Tensor tensor);
  ~TensorList();
  TensorList(const TensorList&) = delete;
  TensorList& operator=(const TensorList&) = delete;
  AclTensorList* get() const { return list_; }

 private:
  AclTensorList* list_ = nullptr;
};

// An aclIntArray, destroyed on destruction.
class IntArray {
 public:
  explicit IntArray(const std::vector<int64_t>& values);
  ~IntArray();
  IntArray(const IntArray&) = delete;
  IntArray& operator=(const IntArray&) = delete;
  AclIntArray* get() const { return array_; }

 private:
  AclIntArray* array_ = nullptr;
};

}  // namespace ascend_moe::cann
