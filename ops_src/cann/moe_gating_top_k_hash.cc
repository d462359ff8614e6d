#include "ops_src/cann/moe_gating_top_k_hash.h"

#include <cstring>
#include <memory>
#include <stdexcept>
#include <vector>

#include "ops_src/cann/loader.h"
#include "ops_src/cann/soc.h"
#include "ops_src/cpu/enum_names.h"

namespace ascend_moe::cann {

namespace {

// Documented limits of the Ascend gating kernels (aclnnMoeGatingTopK; the custom hash operator
// shares its tiling).
constexpr int64_t kMaxExperts = 2048;

AclDataType FloatAclType(cpu::GatingFloatType t) {
  static constexpr EnumValue<cpu::GatingFloatType, AclDataType> kTypes[] = {
      {cpu::GatingFloatType::kFloat16, kAclFloat16}, {cpu::GatingFloatType::kBFloat16, kAclBFloat16}};
  return ValueOf(kTypes, t, kAclFloat);
}
size_t FloatBytes(cpu::GatingFloatType t) { return t == cpu::GatingFloatType::kFloat32 ? 4 : 2; }
AclDataType IntAclType(cpu::GatingIntType t) {
  return t == cpu::GatingIntType::kInt32 ? kAclInt32 : kAclInt64;
}
size_t IntBytes(cpu::GatingIntType t) { return t == cpu::GatingIntType::kInt32 ? 4 : 8; }

// False, with `rejected` set, when phase 1 rejects the call (nothing queued then).
bool RunNative(const DeviceContext& ctx, const MoeGatingDeviceArgs& a, const char* call,
               std::string* rejected) {
  const cpu::MoeGatingTopKHashParams& p = a.params;
  const bool hash_op = std::string(call) == kAclnnMoeGatingTopKHash;
  const std::string prepare_name = std::string(call) + "GetWorkspaceSize";
  std::string why;
  void* prepare = FindSymbol(prepare_name.c_str(), &why);
  auto run_fn = reinterpret_cast<AclnnRunFn>(FindSymbol(call, &why));
  if (!prepare || !run_fn) throw std::runtime_error("MoeGatingTopKHash: " + why);

  const int64_t R = p.rows, E = p.experts, K = p.k;
  const AclDataType xt = FloatAclType(a.in.x_type);
  // The operators always write the float scores [R, E]; without out_flag they go to scratch.
  DeviceBuffer out_scratch(ctx, p.out_flag ? 1 : static_cast<size_t>(R * E) * 4);
  Tensor x(xt, {R, E}, a.in.x);
  Tensor y(xt, {R, K}, a.out.y);
  Tensor expert_idx(kAclInt32, {R, K}, a.out.expert_idx);
  Tensor out(kAclFloat, {R, E}, p.out_flag ? static_cast<void*>(a.out.out) : out_scratch.get());
  std::unique_ptr<Tensor> bias;
  if (a.in.bias) bias = std::make_unique<Tensor>(xt, std::vector<int64_t>{E}, a.in.bias);

  std::unique_ptr<DeviceBuffer> ids_device;
  std::unique_ptr<Tensor> ids, table;
  const size_t ids_bytes = static_cast<size_t>(R) * IntBytes(a.in.ids_type);
  if (a.in.hash) {
    ids_device = std::make_unique<DeviceBuffer>(ctx, ids_bytes);
    ids = std::make_unique<Tensor>(IntAclType(a.in.ids_type), std::vector<int64_t>{R}, ids_device->get());
    table = std::make_unique<Tensor>(IntAclType(a.in.table_type), std::vector<int64_t>{a.in.table_rows, K},
                                     a.in.tid2eid);
  }
  const double rsf = p.routed_scaling_factor, eps = p.eps;
  const bool out_flag = p.out_flag != 0;
  const AclnnPrepared prepared = PrepareAclnn(call, [&](uint64_t* workspace_size, AclOpExecutor** executor) {
    if (hash_op) {
      return reinterpret_cast<AclnnMoeGatingTopKHashGetWorkspaceSizeFn>(prepare)(
          x.get(), bias ? bias->get() : nullptr, ids ? ids->get() : nullptr, table ? table->get() : nullptr,
          K, p.k_group, p.group_count, p.group_select_mode, p.renorm, p.norm_type, out_flag, rsf, eps,
          y.get(), expert_idx.get(), out.get(), workspace_size, executor);
    }
    return reinterpret_cast<AclnnMoeGatingTopKGetWorkspaceSizeFn>(prepare)(
        x.get(), bias ? bias->get() : nullptr, K, p.k_group, p.group_count, p.group_select_mode, p.renorm,
        p.norm_type, out_flag, rsf, eps, y.get(), expert_idx.get(), out.get(), workspace_size, executor);
  });
  if (!prepared.rejected.empty()) {
    *rejected = prepared.rejected;
    return false;
  }
  // input_ids were read on the host (validation); the operator reads them on the device.
  if (a.in.hash) UploadStaged(ctx, ids_device->get(), a.in.input_ids, ids_bytes);
  LaunchAclnn(ctx, call, prepared, run_fn);
  return true;
}

// Copies the inputs to the host, runs the CPU kernel, copies the results back.
cpu::MoeGatingTopKHashError RunOnHost(const DeviceContext& ctx, const MoeGatingDeviceArgs& a) {
  const cpu::MoeGatingTopKHashParams& p = a.params;
  const int64_t R = p.rows, E = p.experts, K = p.k;
  const size_t fb = FloatBytes(a.in.x_type);
  std::vector<std::unique_ptr<HostBuffer>> staging;
  auto download = [&](const void* device, size_t bytes) {
    staging.push_back(std::make_unique<HostBuffer>(bytes));
    CopyAsync(ctx, staging.back()->get(), device, bytes, kDeviceToHost);
    return static_cast<const void*>(staging.back()->get());
  };
  cpu::MoeGatingTopKHashInputs in = a.in;  // input_ids is already host memory
  in.x = download(a.in.x, R * E * fb);
  if (a.in.bias) in.bias = download(a.in.bias, E * fb);
  if (a.in.hash) in.tid2eid = download(a.in.tid2eid, a.in.table_rows * K * IntBytes(a.in.table_type));
  if (a.additional) {
    in.additional_bias = download(a.in.additional_bias, E * fb);
    in.additional_token_mask = static_cast<const uint8_t*>(download(a.in.additional_token_mask, R));
  }
  Synchronize(ctx);  // the downloads (and the work that produced the inputs) are complete
  HostBuffer y(R * K * fb), idx(R * K * sizeof(int32_t)), out(p.out_flag ? R * E * sizeof(float) : 0);
  cpu::MoeGatingTopKHashOutputs o;
  o.y = y.get();
  o.expert_idx = idx.as<int32_t>();
  o.out = p.out_flag ? out.as<float>() : nullptr;
  const cpu::MoeGatingTopKHashError error = cpu::MoeGatingTopKHashRows(p, in, o, 0, R);
  if (!error.ok()) return error;
  y.UploadTo(ctx, a.out.y, y.size());  // no wait: the pool keeps the results until their copies ran
  idx.UploadTo(ctx, a.out.expert_idx, idx.size());
  if (p.out_flag) out.UploadTo(ctx, a.out.out, out.size());
  return error;
}

}  // namespace

std::string MoeGatingNativeBlocker(const MoeGatingDeviceArgs& a, const char** call) {
  const cpu::MoeGatingTopKHashParams& p = a.params;
  *call = (a.in.hash || p.norm_type == 2) ? kAclnnMoeGatingTopKHash : kAclnnMoeGatingTopK;
  std::string soc = SocBlocker(a.soc, *call);
  if (!soc.empty()) return soc;
  if (p.renorm != 0) return "renorm=1 is an extension of this project; the Ascend kernels reject it";
  if (a.additional) {
    return "additional_bias with additional_token_mask has no Ascend kernel input";
  }
  // The rules below are the operators' tiling checks (CheckAttr in ops-transformer
  // moe/moe_gating_top_k/op_host/moe_gating_top_k_tiling.cpp and cann-recipes-infer
  // ops/ascendc/src/moe_gating_top_k_hash/op_host/moe_gating_top_k_hash_tiling.cpp); a failing
  // one makes phase 1 return 561002. aclnnMoeGatingTopK.md states stricter limits
  // (E / group_count > 2, the align32 rule always) than its tiling enforces.
  if (p.norm_type == 2 && p.group_count != 1) {
    return "aclnnMoeGatingTopKHash supports norm_type=2 (sqrt-softplus) only with group_count=1, got "
           "group_count=" +
           std::to_string(p.group_count);
  }
  const int64_t E = p.experts;
  if (E < 1) return {};  // not known: AscendMoeCannPath's predictions (a validated call has E >= 1)
  if (E > kMaxExperts) return "the Ascend gating kernels need E <= 2048, got " + std::to_string(E);
  const int64_t per_group = E / p.group_count;
  if (p.group_select_mode == 1 && per_group < 2) {
    return "the Ascend gating kernels need E / group_count >= 2 with group_select_mode=1, got " +
           std::to_string(per_group);
  }
  // Only where groups are selected (not one group, not one expert per group, not all groups).
  const bool grouped = p.group_count != 1 && p.group_count != E && p.k_group != p.group_count;
  const int64_t aligned = (per_group + 31) / 32 * 32;
  if (grouped && aligned * p.group_count > kMaxExperts) {
    return "the Ascend gating kernels need align32(E / group_count) * group_count <= 2048 when groups are "
           "selected, got " +
           std::to_string(aligned * p.group_count);
  }
  return {};
}

NativePath ChooseMoeGatingPath(const MoeGatingDeviceArgs& a) {
  NativePath path;
  const char* call = nullptr;
  path.reason = MoeGatingNativeBlocker(a, &call);
  if (!path.reason.empty()) return path;
  std::string why;
  const std::string prepare = std::string(call) + "GetWorkspaceSize";
  if (!FindSymbol(prepare.c_str(), &why) || !FindSymbol(call, &why)) {
    path.reason = std::string("no ") + call + " in the CANN operator libraries (" +
                  (call == kAclnnMoeGatingTopKHash ? "install the cann-recipes-infer custom operator package"
                                                   : "CANN too old") +
                  "): " + why;
    return path;
  }
  path.call = call;
  return path;
}

cpu::MoeGatingTopKHashError LaunchMoeGating(const DeviceContext& ctx, const MoeGatingDeviceArgs& a,
                                            NativePath* path) {
  if (a.params.rows == 0) return {};
  if (path->call) {
    std::string rejected;
    if (RunNative(ctx, a, path->call, &rejected)) return {};
    path->call = nullptr;
    path->reason = rejected;
    path->rejected = true;
  }
  return RunOnHost(ctx, a);
}

}  // namespace ascend_moe::cann
