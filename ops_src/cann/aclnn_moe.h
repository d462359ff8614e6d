// The ACLNN entry points of the MoE op family (grouped matmul, init / finalize routing, token
// permute / unpermute, SwiGLU) and the nnopbase list types they take. Declared here from the
// operators' published headers and docs (docs/ascend.md lists each prototype with its source); no
// CANN header is vendored. Resolved at run time like the rest (loader.h).
#pragma once

#include <cstdint>

#include "ops_src/cann/acl.h"

namespace ascend_moe::cann {

struct AclTensorList;  // aclTensorList (opaque)
struct AclIntArray;    // aclIntArray (opaque)

// nnopbase (aclnn/acl_meta.h).
using AclCreateTensorListFn = AclTensorList* (*)(const AclTensor* const* value, uint64_t size);
using AclDestroyTensorListFn = AclnnStatus (*)(const AclTensorList* list);
using AclCreateIntArrayFn = AclIntArray* (*)(const int64_t* value, uint64_t size);
using AclDestroyIntArrayFn = AclnnStatus (*)(const AclIntArray* array);
// acl_rt.h: aclrtMemsetAsync(devPtr, maxCount, value, count, stream).
using AclrtMemsetAsyncFn = AclError (*)(void* dst, size_t dst_max, int32_t value, size_t count,
                                        AclStream stream);

// aclnnGroupedMatmulV4 (ops-transformer gmm/grouped_matmul/op_host/op_api/aclnn_grouped_matmul_v4.h).
using AclnnGroupedMatmulV4GetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensorList* x, const AclTensorList* weight, const AclTensorList* bias_optional,
    const AclTensorList* scale_optional, const AclTensorList* offset_optional,
    const AclTensorList* antiquant_scale_optional, const AclTensorList* antiquant_offset_optional,
    const AclTensorList* per_token_scale_optional, const AclTensor* group_list_optional,
    const AclTensorList* activation_input_optional, const AclTensorList* activation_quant_scale_optional,
    const AclTensorList* activation_quant_offset_optional, int64_t split_item, int64_t group_type,
    int64_t group_list_type, int64_t act_type, AclTensorList* out,
    AclTensorList* activation_feature_out_optional, AclTensorList* dyn_quant_scale_out_optional,
    uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnSwiGlu (ops-nn activation/swi_glu/docs/aclnnSwiGlu.md).
using AclnnSwiGluGetWorkspaceSizeFn = AclnnStatus (*)(const AclTensor* x, int64_t dim, const AclTensor* out,
                                                      uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnPermute (ops-math conversion/transpose/op_api/aclnn_permute.h).
using AclnnPermuteGetWorkspaceSizeFn = AclnnStatus (*)(const AclTensor* self, const AclIntArray* dims,
                                                       AclTensor* out, uint64_t* workspace_size,
                                                       AclOpExecutor** executor);

// aclnnMoeInitRoutingV3 (ops-transformer moe/moe_init_routing_v3/op_host/op_api/aclnn_moe_init_routing_v3.h).
using AclnnMoeInitRoutingV3GetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* x, const AclTensor* expert_idx, const AclTensor* scale_optional,
    const AclTensor* offset_optional, int64_t active_num, int64_t expert_capacity, int64_t expert_num,
    int64_t drop_pad_mode, int64_t expert_tokens_num_type, bool expert_tokens_num_flag, int64_t quant_mode,
    const AclIntArray* active_expert_range_optional, int64_t row_idx_type, const AclTensor* expanded_x_out,
    const AclTensor* expanded_row_idx_out, const AclTensor* expert_tokens_count_or_cumsum_out,
    const AclTensor* expanded_scale_out, uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnMoeFinalizeRoutingV2 (ops-transformer
// moe/moe_finalize_routing_v2/op_host/op_api/aclnn_moe_finalize_routing_v2.h).
using AclnnMoeFinalizeRoutingV2GetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* expanded_x, const AclTensor* expanded_row_idx, const AclTensor* x1_optional,
    const AclTensor* x2_optional, const AclTensor* bias_optional, const AclTensor* scales_optional,
    const AclTensor* expert_idx_optional, int64_t drop_pad_mode, const AclTensor* out,
    uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnMoeTokenPermute (ops-transformer moe/moe_token_permute/op_host/op_api/aclnn_moe_token_permute.h).
using AclnnMoeTokenPermuteGetWorkspaceSizeFn =
    AclnnStatus (*)(const AclTensor* tokens, const AclTensor* indices, int64_t num_out_tokens,
                    bool padded_mode, const AclTensor* permute_tokens_out,
                    const AclTensor* sorted_indices_out, uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnMoeTokenUnpermute (ops-transformer
// moe/moe_token_unpermute/op_host/op_api/aclnn_moe_token_unpermute.h).
using AclnnMoeTokenUnpermuteGetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* permuted_tokens, const AclTensor* sorted_indices, const AclTensor* probs_optional,
    bool padded_mode, const AclIntArray* restore_shape_optional, AclTensor* out, uint64_t* workspace_size,
    AclOpExecutor** executor);

// aclnnMoeInitRouting: ops-transformer publishes no op_api header for it; the order is op-plugin's
// call (op_plugin/ops/opapi/MoeInitRoutingKernelNpuOpApi.cpp: x, row_idx, expert_idx, active_num,
// expanded_x, expanded_row_idx, expanded_expert_idx) with the two-phase tail every aclnn op has.
using AclnnMoeInitRoutingGetWorkspaceSizeFn = AclnnStatus (*)(
    const AclTensor* x, const AclTensor* row_idx, const AclTensor* expert_idx, int64_t active_num,
    const AclTensor* expanded_x_out, const AclTensor* expanded_row_idx_out,
    const AclTensor* expanded_expert_idx_out, uint64_t* workspace_size, AclOpExecutor** executor);

// aclnnGroupedMatmulV4's enum values this library passes (aclnn_grouped_matmul_v4.h; op-plugin's
// npu_grouped_matmul): one x / weight / y tensor (split_item 3), groups along M (group_type 0).
inline constexpr int64_t kGmmSplitItemSingle = 3;
inline constexpr int64_t kGmmGroupTypeSplitM = 0;
inline constexpr int64_t kGmmActNone = 0;

}  // namespace ascend_moe::cann
