// MoeGatingTopKHash on an Ascend NPU (docs/operators.md §1): CANN's built-in aclnnMoeGatingTopK (no hash
// input, within its documented limits), the cann-recipes-infer custom operator aclnnMoeGatingTopKHash
// (libcust_opapi.so: hash routing and sqrt-softplus), or a fallback that copies the inputs to the
// host, runs the CPU kernel (ops_src/cpu) and copies the results back. Plain C++ over device
// pointers, the caller's stream and workspace callback; knows nothing of ONNX Runtime.
#pragma once

#include <string>

#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

namespace ascend_moe::cann {

inline constexpr const char* kAclnnMoeGatingTopK = "aclnnMoeGatingTopK";
inline constexpr const char* kAclnnMoeGatingTopKHash = "aclnnMoeGatingTopKHash";

// The CPU kernel's inputs and outputs (ops_src/cpu), in device memory but for input_ids (host
// memory); what decides the path.
struct MoeGatingDeviceArgs {
  cpu::MoeGatingTopKHashParams params;  // validated
  bool additional = false;              // additional_bias and the mask given
  // The SoC to decide for (aclrtGetSocName's spelling); empty: this process's (SocName()).
  std::string soc;
  cpu::MoeGatingTopKHashInputs in;  // element types, hash routing; null pointers for absent inputs
  cpu::MoeGatingTopKHashOutputs out;
};

// Why neither ACLNN operator can run this call, or empty: the SoC (SocBlocker), then the
// operators' inputs and tiling rules. `call` gets the operator that fits (aclnnMoeGatingTopK or
// aclnnMoeGatingTopKHash). The one statement of these rules: the kernels, `moe-onnx info` and the
// tests all ask it (through AscendMoeCannPath).
std::string MoeGatingNativeBlocker(const MoeGatingDeviceArgs& args, const char** call);

// Chooses the path: native when the limits hold and the operator library provides the call.
NativePath ChooseMoeGatingPath(const MoeGatingDeviceArgs& args);

// Host check of the hash rows of a native call (every row is a hash row there): a token id out of
// [0, table_rows) anywhere first, else the lowest row whose table entry is out of [0, E) — the
// order the CPU kernel reports them in. `table_row_bad(id, &column, &value)` says whether table
// row `id` has an entry out of range (the first one).
template <typename RowBad>
cpu::MoeGatingTopKHashError CheckHashRows(const MoeGatingDeviceArgs& args, RowBad&& table_row_bad);

// Runs the op along `path`. A data error found by the fallback's CPU kernel is returned (nothing
// else is written then); native calls return ok() (their ids were checked by the caller). When
// the operator rejects the call in phase 1 (IsAclnnRejection), the fallback runs instead and
// `path` says so (call null, rejected, reason = the operator's status and message).
cpu::MoeGatingTopKHashError LaunchMoeGating(const DeviceContext& ctx, const MoeGatingDeviceArgs& args,
                                            NativePath* path);

// Token id of a row of input_ids (host memory).
inline int64_t TokenIdAt(const MoeGatingDeviceArgs& a, int64_t row) {
  return a.in.ids_type == cpu::GatingIntType::kInt32 ? static_cast<const int32_t*>(a.in.input_ids)[row]
                                                     : static_cast<const int64_t*>(a.in.input_ids)[row];
}

template <typename RowBad>
cpu::MoeGatingTopKHashError CheckHashRows(const MoeGatingDeviceArgs& a, RowBad&& table_row_bad) {
  cpu::MoeGatingTopKHashError e;
  for (int64_t r = 0; r < a.params.rows; ++r) {
    const int64_t id = TokenIdAt(a, r);
    if (id < 0 || id >= a.in.table_rows) {
      e.kind = cpu::MoeGatingTopKHashError::kTokenIdOutOfRange;
      e.row = r;
      e.token_id = id;
      e.value = id;
      return e;
    }
  }
  for (int64_t r = 0; r < a.params.rows; ++r) {
    const int64_t id = TokenIdAt(a, r);
    int64_t column = 0, value = 0;
    if (table_row_bad(id, &column, &value)) {
      e.kind = cpu::MoeGatingTopKHashError::kTableEntryOutOfRange;
      e.row = r;
      e.token_id = id;
      e.column = column;
      e.value = value;
      return e;
    }
  }
  return e;
}

}  // namespace ascend_moe::cann
