// The few CANN (ACL / ACLNN) types, enum values and entry points the Ascend kernels use. CANN's
// headers may not be vendored, so they are declared here; values follow CANN's acl_base.h,
// acl_rt.h and the generated aclnn_*.h headers. Every entry point is resolved at run time
// (loader.h): the library has no link-time dependency on CANN.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ascend_moe::cann {

using AclError = int;     // aclError
using AclnnStatus = int;  // aclnnStatus
struct AclTensor;         // aclTensor (opaque)
struct AclOpExecutor;     // aclOpExecutor (opaque)
using AclStream = void*;  // aclrtStream

// aclDataType
enum AclDataType : int {
  kAclFloat = 0,
  kAclFloat16 = 1,
  kAclInt8 = 2,
  kAclInt32 = 3,
  kAclUint8 = 4,
  kAclInt64 = 9,
  kAclBool = 12,
  kAclBFloat16 = 27,
  kAclInt4 = 29,  // two per byte, element 2j in the low nibble; shapes and strides count elements
};
inline constexpr int kAclFormatNd = 2;  // aclFormat ACL_FORMAT_ND

// aclrtMemcpyKind
enum AclMemcpyKind : int {
  kHostToHost = 0,
  kHostToDevice = 1,
  kDeviceToHost = 2,
  kDeviceToDevice = 3,
};

// ACLNN status codes the kernels report by name (opbase opdev/op_errno.h).
inline constexpr AclnnStatus kAclnnParamNullptr = 161001;
inline constexpr AclnnStatus kAclnnParamInvalid = 161002;
inline constexpr AclnnStatus kAclnnTilingError = 561002;
inline constexpr AclnnStatus kAclnnFindKernelError = 561003;
inline constexpr AclnnStatus kAclnnKernelPackageNotFound = 561112;
inline constexpr AclnnStatus kAclnnInnerNullptr = 561103;
// ACLNN_ERR_INNER and its refinements (561000 .. 561999): the operator's own machinery (infer
// shape, tiling, executor, kernel lookup) could not serve the call.
inline constexpr AclnnStatus kAclnnInnerFirst = 561000;
inline constexpr AclnnStatus kAclnnInnerLast = 561999;

// Entry point signatures.
using AclrtMemcpyAsyncFn = AclError (*)(void* dst, size_t dst_max, const void* src, size_t count,
                                        AclMemcpyKind kind, AclStream stream);
using AclrtMemcpyFn = AclError (*)(void* dst, size_t dst_max, const void* src, size_t count,
                                   AclMemcpyKind kind);
using AclrtSynchronizeStreamFn = AclError (*)(AclStream stream);
using AclrtGetSocNameFn = const char* (*)();  // acl_base_rt.h; null when it cannot tell
using AclInitFn = AclError (*)(const char* config_path);
using AclFinalizeFn = AclError (*)();
// aclInit's answer when ACL is initialised already (acl_base_rt.h ACL_ERROR_REPEAT_INITIALIZE).
inline constexpr AclError kAclRepeatInitialize = 100002;
using AclEvent = void*;  // aclrtEvent
using AclrtCreateEventFn = AclError (*)(AclEvent* event);
using AclrtRecordEventFn = AclError (*)(AclEvent event, AclStream stream);
using AclrtDestroyEventFn = AclError (*)(AclEvent event);
// aclrtQueryEventStatus(event, aclrtEventRecordedStatus*): 0 not ready, 1 complete (acl_rt.h).
using AclrtQueryEventStatusFn = AclError (*)(AclEvent event, int* recorded_status);
inline constexpr int kAclEventRecordedComplete = 1;
using AclrtMallocHostFn = AclError (*)(void** host_ptr, size_t size);
using AclrtFreeHostFn = AclError (*)(void* host_ptr);
using AclGetRecentErrMsgFn = const char* (*)();
using AclCreateTensorFn = AclTensor* (*)(const int64_t* view_dims, uint64_t view_dims_num,
                                         AclDataType data_type, const int64_t* stride, int64_t offset,
                                         int format, const int64_t* storage_dims, uint64_t storage_dims_num,
                                         void* tensor_data);
using AclDestroyTensorFn = AclnnStatus (*)(const AclTensor* tensor);
using AclnnRunFn = AclnnStatus (*)(void* workspace, uint64_t workspace_size, AclOpExecutor* executor,
                                   AclStream stream);
using AclnnMoeReRoutingGetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* tokens, const AclTensor* expert_token_num_per_rank,
    const AclTensor* per_token_scales_optional, int64_t expert_token_num_type, int64_t idx_type,
    const AclTensor* permute_tokens_out, const AclTensor* permute_per_token_scales_out,
    const AclTensor* permute_token_idx_out, const AclTensor* expert_token_num_out, uint64_t* workspace_size,
    AclOpExecutor** executor);
using AclnnMoeGatingTopKGetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* x, const AclTensor* bias_optional, int64_t k, int64_t k_group, int64_t group_count,
    int64_t group_select_mode, int64_t renorm, int64_t norm_type, bool out_flag, double routed_scaling_factor,
    double eps, const AclTensor* y_out, const AclTensor* expert_idx_out, const AclTensor* out_out,
    uint64_t* workspace_size, AclOpExecutor** executor);
using AclnnMoeGatingTopKHashGetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* x, const AclTensor* bias_optional, const AclTensor* input_ids_optional,
    const AclTensor* tid2eid_optional, int64_t k, int64_t k_group, int64_t group_count,
    int64_t group_select_mode, int64_t renorm, int64_t norm_type, bool out_flag, double routed_scaling_factor,
    double eps, const AclTensor* y_out, const AclTensor* expert_idx_out, const AclTensor* out_out,
    uint64_t* workspace_size, AclOpExecutor** executor);

// Bytes of one element; 0 for types the kernels never pass.
size_t AclElementBytes(AclDataType type);
const char* AclTypeName(AclDataType type);

}  // namespace ascend_moe::cann
