// Fake aclnnMoeInitRoutingV3 (libopapi.so): the checks of ops-transformer
// moe/moe_init_routing_v3/docs/aclnnMoeInitRoutingV3.md (parameter table and 约束说明: activeNum
// = N*K, dropless only, expertTokensNumType 1 or 2, the flag set, quantMode -1 or 1, the expert
// range inside [0, expertNum) with its end <= 10240 (5120 key/value)), with its status codes, the
// tiling's in phase 2 as the operator reports them;
// the computation is the project's CPU kernel (quantMode -1; dynamic quantisation is not
// modelled). What the doc leaves undefined is poisoned, so that a caller relying on it fails:
// expanded_x rows past the kept pairs, the scatter index past them (rowIdxType 1) and
// expandedScale without a scale input.
#include <cstring>
#include <string>

#include "fake_aclnn.h"
#include "fake_lists.h"
#include "fake_expert_sort.h"

using namespace fake_cann;
namespace cpu = ascend_moe::cpu;

extern "C" {

int aclnnMoeInitRoutingV3GetWorkspaceSize(const void* x, const void* expert_idx, const void* scale,
                                          const void* offset, int64_t active_num, int64_t expert_capacity,
                                          int64_t expert_num, int64_t drop_pad_mode, int64_t tokens_num_type,
                                          bool tokens_num_flag, int64_t quant_mode, const void* range,
                                          int64_t row_idx_type, const void* expanded_x, const void* row_idx,
                                          const void* counts, const void* expanded_scale,
                                          uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeInitRoutingV3GetWorkspaceSize");
  // Phase 1 ignores the status of the operator's launcher (aclnn_moe_init_routing_v3.cpp calls
  // l0op::MoeInitRoutingV3 and checks only its outputs): the tiling checks and the kernel lookup
  // fail in phase 2, as here (`deferred`, reported by the executor with 561002).
  std::string deferred;
  auto defer = [&deferred](const std::string& why) {
    if (deferred.empty()) deferred = why;
  };
  if (!SocHasKernelsOf("aclnnMoeInitRoutingV3")) defer(std::string("no kernel for SoC ") + SocName());
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  c.Check("x", x, true, {kFloat16, kBFloat16, kFloat, kInt8}, {-1, -1});
  c.Check("expertIdx", expert_idx, true, {kInt32}, {-1, -1});
  if (!c.ok()) return c.status();
  const int xt = T(x)->dtype;
  const int64_t n = T(x)->dims[0], h = T(x)->dims[1], k = T(expert_idx)->dims[1];
  if (T(expert_idx)->dims[0] != n)
    c.Fail(kParamInvalid, "expertIdx must be [NUM_ROWS, K] with NUM_ROWS = x.shape[0]");
  if (quant_mode != -1)
    c.Fail(kParamInvalid, "the fake models quantMode -1 only, got " + std::to_string(quant_mode));
  c.Check("scaleOptional", scale, false, {kFloat}, {n});
  if (offset) c.Fail(kParamInvalid, "offsetOptional must be absent without static quantisation");
  int64_t start = 0, end = expert_num;
  if (range) {
    if (!FakeAclnnIsIntArray(range)) {
      c.Fail(kParamInvalid, "activeExpertRangeOptional is not a live aclIntArray");
    } else if (static_cast<const IntArray*>(range)->values.size() != 2) {
      c.Fail(kParamInvalid, "activeExpertRangeOptional must have 2 values");
    } else {
      start = static_cast<const IntArray*>(range)->values[0];
      end = static_cast<const IntArray*>(range)->values[1];
    }
  }
  if (!c.ok()) return c.status();
  // 约束说明 and the tiling checks (moe_init_routing_v3_tiling.cpp): deferred to phase 2.
  const int64_t pairs = n * k;
  if (active_num != pairs) defer("activeNum must equal NUM_ROWS*K = " + std::to_string(pairs));
  if (expert_capacity < 0) defer("expertCapacity must be >= 0");
  if (drop_pad_mode != 0) defer("dropPadMode supports 0 (dropless) only");
  if (tokens_num_type != 1 && tokens_num_type != 2) defer("expertTokensNumType supports 1 and 2 only");
  if (!tokens_num_flag) defer("expertTokensNumFlag supports true only");
  // moe_init_routing_v3_tiling.cpp: expert_num > 0, expert_end <= 10240 (5120 key/value).
  const int64_t max_end = tokens_num_type == 2 ? 5120 : 10240;
  if (expert_num <= 0) defer("expert_num should be greater than 0");
  if (end > max_end) defer("expert_end should be less than or equal to " + std::to_string(max_end));
  if (!(start >= 0 && start < end && end <= expert_num))
    defer("activeExpertRange must be 0 <= start < end <= expertNum");
  if (row_idx_type != 0 && row_idx_type != 1) defer("rowIdxType must be 0 or 1");
  if (!deferred.empty()) {
    const std::string why = "aclnnMoeInitRoutingV3: " + deferred + " (status 561002, in phase 2)";
    return MakeExecutor(
        "aclnnMoeInitRoutingV3", 0, {x, expert_idx},
        [why] {
          FakeAclError(why.c_str());
          return static_cast<int>(kTilingError);
        },
        workspace_size, executor);
  }
  c.Check("expandedXOut", expanded_x, true, {xt}, {pairs, h});
  c.Check("expandedRowIdxOut", row_idx, true, {kInt32}, {pairs});
  if (tokens_num_type == 2)
    c.Check("expertTokensCountOrCumsumOut", counts, true, {kInt64}, {expert_num, 2});
  else
    c.Check("expertTokensCountOrCumsumOut", counts, true, {kInt64}, {end - start});
  c.Check("expandedScaleOut", expanded_scale, true, {kFloat}, {pairs});
  if (!c.ok()) return c.status();

  cpu::MoeInitRoutingParams p = ExpertSortParams(n, k, h, xt);
  p.idx_int64 = false;
  p.expert_num = expert_num;
  p.expert_start = start;
  p.expert_end = end;
  p.active_num = -1;
  p.drop_pad_mode = 0;
  p.tokens_num_type = tokens_num_type;
  p.quant_mode = -1;
  p.row_idx_type = row_idx_type;
  p.scale_rows = scale ? n : 0;
  auto run = [=]() {
    if (pairs == 0) return static_cast<int>(kOk);
    cpu::MoeInitRoutingPlan plan;
    const int64_t bad = plan.Build(p, Data(expert_idx));
    if (bad >= 0) {
      FakeAclError(("aclnnMoeInitRoutingV3: expert id at " + std::to_string(bad) +
                    " is outside [0, expertNum): the NPU would write out of bounds (status 561002)")
                       .c_str());
      return static_cast<int>(kTilingError);
    }
    int32_t* idx = static_cast<int32_t*>(Data(row_idx));
    plan.WriteRowIdx(idx);
    plan.WriteCounts(static_cast<int64_t*>(Data(counts)));
    cpu::MoeInitRoutingBuffers b;
    b.x = Data(x);
    b.scale = scale ? static_cast<const float*>(Data(scale)) : nullptr;
    b.expanded_x = Data(expanded_x);
    b.expanded_scale = static_cast<float*>(Data(expanded_scale));
    plan.ExpandRows(b, 0, plan.out_rows());
    // The kept pairs are those with an active expert; past them the doc defines nothing.
    int64_t kept = 0;
    const int32_t* ids = static_cast<const int32_t*>(Data(expert_idx));
    for (int64_t i = 0; i < pairs; ++i) kept += ids[i] >= start && ids[i] < end;
    const size_t row_bytes = static_cast<size_t>(h) * ElementBytes(xt);
    std::memset(static_cast<char*>(Data(expanded_x)) + kept * row_bytes, 0xFF, (pairs - kept) * row_bytes);
    if (row_idx_type == 1) std::memset(idx + kept, 0x5A, (pairs - kept) * sizeof(int32_t));
    if (!scale) std::memset(Data(expanded_scale), 0xFF, pairs * sizeof(float));
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeInitRoutingV3", 1024 + 16 * static_cast<uint64_t>(pairs),
                      {x, expert_idx, scale, expanded_x, row_idx, counts, expanded_scale}, run,
                      workspace_size, executor);
}

int aclnnMoeInitRoutingV3(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeInitRoutingV3", workspace, workspace_size, executor, stream);
}

}  // extern "C"
