#include "fake_gating.h"

#include <string>

#include "fake_aclnn.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

namespace fake_cann {

int PrepareGating(const GatingCall& g, bool hash_op, uint64_t* workspace_size, void** executor) {
  const std::string prepare = std::string(g.op) + "GetWorkspaceSize";
  ArgCheck c(prepare.c_str());
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  c.Check("x", g.x, true, {kFloat, kFloat16, kBFloat16}, {-1, -1});
  if (!c.ok()) return c.status();
  const int xt = T(g.x)->dtype;
  const int64_t R = T(g.x)->dims[0], E = T(g.x)->dims[1];
  c.Check("biasOptional", g.bias, false, {xt}, {E});
  if (!hash_op && (g.input_ids || g.tid2eid)) c.Fail(kParamInvalid, "no hash inputs here");
  if ((g.input_ids == nullptr) != (g.tid2eid == nullptr)) {
    c.Fail(kParamInvalid, "inputIdsOptional and tid2eidOptional go together");
  }
  c.Check("inputIdsOptional", g.input_ids, false, {kInt32, kInt64}, {R});
  // The hash operator's tiling takes an int32 or int64 table (GetShapeAttrsInfo, tiling keys 3-6).
  c.Check("tid2eidOptional", g.tid2eid, false, {kInt32, kInt64}, {-1, g.k});
  c.Check("yOut", g.y, true, {xt}, {R, g.k});
  c.Check("expertIdxOut", g.expert_idx, true, {kInt32}, {R, g.k});
  c.Check("outOut", g.out, true, {kFloat}, {R, E});
  c.RequireKernels();
  if (!c.ok()) return c.status();
  // The tiling's checks, in its order, each a 561002 with its message: CheckInputShape and
  // CheckAttr of ops-transformer moe/moe_gating_top_k/op_host/moe_gating_top_k_tiling.cpp and of
  // cann-recipes-infer ops/ascendc/src/moe_gating_top_k_hash/op_host/moe_gating_top_k_hash_tiling.cpp
  // (aclnnMoeGatingTopK.md lists k / kGroup range errors as ACLNN_ERR_INNER_TILING_ERROR).
  const std::string gc = std::to_string(g.group_count), kg = std::to_string(g.k_group);
  auto tiling = [&](bool bad, const std::string& message) {
    if (bad) c.Fail(kTilingError, message);
  };
  tiling(g.k > E, "k is: " + std::to_string(g.k) + ", expert num is: " + std::to_string(E) +
                      ", k cannot be greater than expert num.");
  tiling(E > 2048, "expert count is: " + std::to_string(E) + ", but should not greater than 2048.");
  tiling(g.k <= 0, "k is: " + std::to_string(g.k) + ", but should be greater than 0.");
  tiling(g.k_group <= 0, "k_group is: " + kg + ", but should be greater than 0.");
  tiling(g.k_group > g.group_count, "k_group is: " + kg + ", but should not greater than " + gc + ".");
  tiling(g.group_count <= 0, "group_count is: " + gc + ", but should be greater than 0.");
  const bool norm_ok = g.norm_type == 0 || g.norm_type == 1 || (hash_op && g.norm_type == 2);
  tiling(!norm_ok, "norm type is: " + std::to_string(g.norm_type) + ", but currently only support 0, 1" +
                       (hash_op ? " and 2." : "."));
  tiling(hash_op && g.norm_type == 2 && g.group_count != 1,
         "norm type softplus only supported when groupCount equals 1, but got " + gc + ".");
  tiling(g.group_select_mode != 0 && g.group_select_mode != 1,
         "group select mode is: " + std::to_string(g.group_select_mode) + ", but currently only support 1 and 0.");
  tiling(g.renorm != 0, "renorm is: " + std::to_string(g.renorm) + ", but currently only support 0.");
  if (!c.ok()) return c.status();
  tiling(E % g.group_count != 0,
         "Expert count : " + std::to_string(E) + " is not divisible by k_group: " + gc);
  if (!c.ok()) return c.status();
  const int64_t per_group = E / g.group_count;
  tiling(per_group < 1, "group expert count is: " + std::to_string(per_group) + ", but should be greater than 1.");
  tiling(g.group_select_mode == 1 && per_group < 2,
         "group expert count is: " + std::to_string(per_group) +
             ", if group select mode is: 1, group expert count should be greater than 1.");
  tiling(g.k > g.k_group * per_group,
         "k is: " + std::to_string(g.k) + ", but should be smaller than " + std::to_string(g.k_group * per_group) + ".");
  const int64_t aligned = (per_group + 31) / 32 * 32 * g.group_count;
  tiling(g.group_count != 1 && g.group_count != E && g.k_group != g.group_count && aligned > 2048,
         "group count * group expert count align is: " + std::to_string(aligned) + ", but should not greater than 2048.");
  if (g.tid2eid && g.group_count > 1 && g.k_group < g.group_count) {
    c.Fail(kParamInvalid, "hash routing with group selection");
  }
  if (!c.ok()) return c.status();

  ascend_moe::cpu::MoeGatingTopKHashParams p;
  p.rows = R;
  p.experts = E;
  p.k = g.k;
  p.k_group = g.k_group;
  p.group_count = g.group_count;
  p.group_select_mode = g.group_select_mode;
  p.renorm = g.renorm;
  p.norm_type = g.norm_type;
  p.out_flag = g.out_flag ? 1 : 0;
  p.routed_scaling_factor = static_cast<float>(g.routed_scaling_factor);
  p.eps = static_cast<float>(g.eps);
  const GatingCall call = g;
  auto run = [p, call, xt]() {
    using namespace ascend_moe::cpu;
    MoeGatingTopKHashInputs in;
    in.x_type = xt == kFloat ? GatingFloatType::kFloat32
              : xt == kFloat16 ? GatingFloatType::kFloat16 : GatingFloatType::kBFloat16;
    in.x = Data(call.x);
    in.bias = call.bias ? Data(call.bias) : nullptr;
    if (call.tid2eid) {
      in.hash = true;
      in.ids_type = T(call.input_ids)->dtype == kInt32 ? GatingIntType::kInt32 : GatingIntType::kInt64;
      in.input_ids = Data(call.input_ids);
      in.table_type = T(call.tid2eid)->dtype == kInt32 ? GatingIntType::kInt32 : GatingIntType::kInt64;
      in.tid2eid = Data(call.tid2eid);
      in.table_rows = T(call.tid2eid)->dims[0];
    }
    MoeGatingTopKHashOutputs o;
    o.y = Data(call.y);
    o.expert_idx = static_cast<int32_t*>(Data(call.expert_idx));
    o.out = p.out_flag ? static_cast<float*>(Data(call.out)) : nullptr;
    const MoeGatingTopKHashError e = MoeGatingTopKHashRows(p, in, o, 0, p.rows);
    if (!e.ok()) {  // the NPU checks neither: it would read out of bounds
      FakeAclError((std::string(call.op) + ": unchecked hash input reached the NPU: " +
                    DescribeMoeGatingTopKHashError(e, p, in.table_rows) + " (status 561002)").c_str());
      return static_cast<int>(kTilingError);
    }
    return static_cast<int>(kOk);
  };
  return MakeExecutor(g.op, 8192 + 4 * static_cast<uint64_t>(R), {g.x, g.bias, g.input_ids, g.tid2eid, g.y, g.expert_idx, g.out},
                      run, workspace_size, executor);
}

}  // namespace fake_cann
