#include "fake_gating.h"

#include <string>

#include "fake_aclnn.h"
#include "ops_src/cpu/moe_gating_top_k_hash.h"

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
  c.Check("tid2eidOptional", g.tid2eid, false, {kInt32}, {-1, g.k});
  c.Check("yOut", g.y, true, {xt}, {R, g.k});
  c.Check("expertIdxOut", g.expert_idx, true, {kInt32}, {R, g.k});
  c.Check("outOut", g.out, true, {kFloat}, {R, E});
  if (!c.ok()) return c.status();
  if (g.group_count < 1 || E % g.group_count != 0) {
    c.Fail(kParamInvalid, "groupCount must divide E");
    return c.status();
  }
  const int64_t per_group = E / g.group_count;
  if (g.k_group < 1 || g.k_group > g.group_count) c.Fail(kParamInvalid, "kGroup out of [1, groupCount]");
  if (g.k < 1 || g.k > per_group * g.k_group) c.Fail(kParamInvalid, "k out of [1, E / groupCount * kGroup]");
  if (g.group_select_mode != 0 && g.group_select_mode != 1) c.Fail(kParamInvalid, "groupSelectMode must be 0 or 1");
  if (g.renorm != 0) c.Fail(kParamInvalid, "renorm must be 0");
  if (!(g.norm_type == 0 || g.norm_type == 1 || (hash_op && g.norm_type == 2))) {
    c.Fail(kParamInvalid, "normType " + std::to_string(g.norm_type) + " is not supported");
  }
  if (g.tid2eid && g.group_count > 1 && g.k_group < g.group_count) {
    c.Fail(kParamInvalid, "hash routing with group selection");
  }
  if (E > 2048) c.Fail(kTilingError, "E must be <= 2048");
  if (per_group <= 2) c.Fail(kTilingError, "E / groupCount must be > 2");
  if ((per_group + 31) / 32 * 32 * g.group_count > 2048) {
    c.Fail(kTilingError, "align32(E / groupCount) * groupCount must be <= 2048");
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
      in.table_type = GatingIntType::kInt32;
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
