// Fake aclnnMoeFinalizeRoutingV2 (libopapi.so): the checks of ops-transformer
// moe/moe_finalize_routing_v2 (op_host/moe_finalize_routing_v2_def.cpp: the dtype combinations of
// ascend910b / ascend910_93; op_host/moe_finalize_routing_v2_tiling_membase.cpp: ranks, dims,
// drop_pad_mode in [0, 3], bias with expert_idx and E >= K), with their status codes; the
// computation is the project's CPU kernel. The row indices, which the NPU reads unchecked, must
// lie inside expanded_x or be -1 (a slot without a row, in every mode: its row counts as zeros)
// or the run fails.
#include <string>

#include "fake_aclnn.h"
#include "fake_weighted_gather.h"

using namespace fake_cann;
namespace cpu = ascend_moe::cpu;

extern "C" {

int aclnnMoeFinalizeRoutingV2GetWorkspaceSize(const void* expanded_x, const void* row_idx, const void* x1,
                                              const void* x2, const void* bias, const void* scales,
                                              const void* expert_idx, int64_t drop_pad_mode, const void* out,
                                              uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnMoeFinalizeRoutingV2GetWorkspaceSize");
  c.RequireKernels();
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  if (drop_pad_mode < 0 || drop_pad_mode > 3)
    c.Fail(kTilingError, "the value of drop_pad_mode should be [0,3].");
  if (!c.ok()) return c.status();
  const bool drop_pad = drop_pad_mode == 1 || drop_pad_mode == 3;
  c.Check("expandedX", expanded_x, true, {kFloat16, kFloat, kBFloat16},
          drop_pad ? std::vector<int64_t>{-1, -1, -1} : std::vector<int64_t>{-1, -1});
  c.Check("expandedRowIdx", row_idx, true, {kInt32}, {-1});
  if (!c.ok()) return c.status();
  const int xt = T(expanded_x)->dtype;
  const int64_t nk = T(row_idx)->dims[0];
  const int64_t h = T(expanded_x)->dims.back();
  // moe_finalize_routing_v2_def.cpp: scales share expanded_x's type, or are float with bfloat16.
  c.Check("scalesOptional", scales, false,
          xt == kBFloat16 ? std::initializer_list<int>{kBFloat16, kFloat} : std::initializer_list<int>{xt},
          {-1, -1});
  if (!c.ok()) return c.status();
  const int64_t k = scales ? T(scales)->dims[1] : 1;
  if (k == 0) {
    c.Fail(kTilingError, "K can not be 0.");
    return c.status();
  }
  const int64_t n = nk / k;
  if (scales && T(scales)->dims[0] != n)
    c.Fail(kTilingError, "the dim 0 of scales should be " + std::to_string(n));
  c.Check("x1Optional", x1, false, {xt}, {n, h});
  c.Check("x2Optional", x2, false, {xt}, {n, h});
  if (bias && !expert_idx) c.Fail(kTilingError, "the expert_idx must exist when bias exist.");
  c.Check("biasOptional", bias, false, {xt}, {-1, h});
  c.Check("expertIdxOptional", expert_idx, false, {kInt32}, {n, k});
  if (!c.ok()) return c.status();
  const int64_t e = bias ? T(bias)->dims[0] : 0;
  if (bias && e < k) c.Fail(kTilingError, "E should be larger than or equal to K.");
  if (bias && e == 0) c.Fail(kTilingError, "E can not be 0.");
  c.Check("out", out, true, {xt}, {n, h});
  if (!c.ok()) return c.status();
  const int64_t rows = drop_pad ? T(expanded_x)->dims[0] * T(expanded_x)->dims[1] : T(expanded_x)->dims[0];

  cpu::WeightedGatherParams p = WeightedGatherParamsOf(n, k, h, rows, xt);
  p.token_major = drop_pad_mode >= 2;
  p.has_weights = scales != nullptr;
  p.weight_type = scales ? WeightedGatherRowType(T(scales)->dtype) : cpu::RowType::kFloat32;
  p.num_base = x2 ? 2 : x1 ? 1 : 0;
  p.has_bias = bias != nullptr;
  p.expert_type = cpu::IndexType::kInt32;
  p.drop_pad_mode = drop_pad_mode;
  auto run = [=]() {
    if (n == 0 || h == 0) return static_cast<int>(kOk);
    const int32_t* idx = static_cast<const int32_t*>(Data(row_idx));
    for (int64_t i = 0; i < n * k; ++i) {
      if (idx[i] < -1 || idx[i] >= rows) {
        FakeAclError(("aclnnMoeFinalizeRoutingV2: expandedRowIdx[" + std::to_string(i) +
                      "] = " + std::to_string(idx[i]) +
                      " is outside expandedX: the NPU would read out of bounds (status 561002)")
                         .c_str());
        return static_cast<int>(kTilingError);
      }
    }
    if (expert_idx) {
      const int32_t* ids = static_cast<const int32_t*>(Data(expert_idx));
      for (int64_t i = 0; i < n * k; ++i) {
        if (ids[i] < 0 || ids[i] >= e) {
          FakeAclError(
              "aclnnMoeFinalizeRoutingV2: an expert id is outside bias: out of bounds (status 561002)");
          return static_cast<int>(kTilingError);
        }
      }
    }
    cpu::WeightedGatherBuffers b;
    b.rows = Data(expanded_x);
    b.row_index = idx;
    b.weights = scales ? Data(scales) : nullptr;
    b.base[0] = x1 ? Data(x1) : nullptr;
    b.base[1] = x2 ? Data(x2) : nullptr;
    b.bias = bias ? Data(bias) : nullptr;
    b.expert_index = expert_idx ? Data(expert_idx) : nullptr;
    b.out = Data(out);
    cpu::WeightedGatherRows(p, b, 0, n);
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnMoeFinalizeRoutingV2", 0,
                      {expanded_x, row_idx, x1, x2, bias, scales, expert_idx, out}, run, workspace_size,
                      executor);
}

int aclnnMoeFinalizeRoutingV2(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnMoeFinalizeRoutingV2", workspace, workspace_size, executor, stream);
}

}  // extern "C"
