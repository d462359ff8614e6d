// What the MoE op family's launchers add to device.h: aclTensorList / aclIntArray arguments, a
// weight tensor given as the transposed view of its [E, N, K] storage, device memset, the lookup
// of an operator's two entry points, and the host staging of the fallbacks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ops_src/cann/aclnn_moe.h"
#include "ops_src/cann/device.h"

namespace ascend_moe::cann {

// A one-tensor aclTensorList (grouped matmul's x / weight / bias / y with split_item 3),
// destroyed on destruction (the list does not own the tensor).
class TensorList {
 public:
  explicit TensorList(const AclTensor* tensor);
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

// The [E, K, N] view of a weight stored [E, N, K] (strides [N*K, 1, K], storage dims [E, N, K]):
// how torch_npu passes a transposed weight, which aclnnGroupedMatmul recognises by its strides.
class TransposedWeight {
 public:
  TransposedWeight(AclDataType type, int64_t groups, int64_t n, int64_t k, const void* data);
  ~TransposedWeight();
  TransposedWeight(const TransposedWeight&) = delete;
  TransposedWeight& operator=(const TransposedWeight&) = delete;
  AclTensor* get() const { return tensor_; }

 private:
  AclTensor* tensor_ = nullptr;
};

// Sets `bytes` bytes at device address `dst` to `value` (0 or 0xFF), queued on the stream.
void MemsetAsync(const DeviceContext& ctx, void* dst, size_t bytes, int value);

// An operator's two phases, found by name ("aclnnX" and "aclnnXGetWorkspaceSize").
struct AclnnOp {
  void* prepare = nullptr;
  AclnnRunFn run = nullptr;
};
// Both entry points, or false with `why` naming what is missing and the libraries tried.
bool FindAclnnOp(const char* name, AclnnOp* op, std::string* why);
// "" when the operator library provides both entry points, else "the CANN operator library has
// no <name>: <the libraries tried>".
std::string MissingAclnnOp(const char* name);
// Both entry points; throws std::runtime_error "<what>: ..." when one is missing.
AclnnOp RequireAclnnOp(const char* name, const char* what);

// Host staging of the fallbacks, through page-locked memory (HostBuffer): device bytes copied to a
// new host buffer (the stream is synchronised before returning), and host bytes copied to the
// device (UploadStaged: the caller's buffer may die at once; the caller synchronises before the
// context ends).
std::vector<unsigned char> Download(const DeviceContext& ctx, const void* device, size_t bytes);
void Upload(const DeviceContext& ctx, void* device, const void* host, size_t bytes);

}  // namespace ascend_moe::cann
