#include "ops_src/cann/grouped_matmul.h"

#include <memory>
#include <vector>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/loader.h"
#include "ops_src/cann/soc.h"
#include "ops_src/cpu/enum_names.h"

namespace ascend_moe::cann {

namespace {

// The antiquant scale's and offset's dims: [E, N] per channel, [E, G, N] per group.
std::vector<int64_t> AntiquantDims(const cpu::GroupedMatmulParams& p) {
  if (p.antiquant_groups > 1) return {p.groups, p.antiquant_groups, p.cols};
  return {p.groups, p.cols};
}

// The bias type aclnnGroupedMatmulV4 takes without quantisation: float for bfloat16 x, x's type
// otherwise (aclnn_grouped_matmul.cpp, CheckNonQuantMatmulDataType).
bool NativeBiasIsFloat(const cpu::GroupedMatmulParams& p) { return p.type == cpu::GmmType::kBFloat16; }

void RunNative(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  const size_t list_bytes = a.group_list.size() * sizeof(int64_t);
  // The values were read on the host (validation); the operator reads an int64 tensor on the device.
  DeviceBuffer group_list(ctx, list_bytes);
  UploadStaged(ctx, group_list.get(), a.group_list.data(), list_bytes);
  // The operator writes the grouped rows only; the contract's rows past the last group are zero.
  const int64_t covered = a.ends.empty() ? 0 : a.ends.back();
  if (covered < p.rows) {
    const size_t row_bytes = static_cast<size_t>(p.cols) * GmmTypeBytes(p.out_type);
    MemsetAsync(ctx, static_cast<char*>(a.y) + covered * row_bytes, (p.rows - covered) * row_bytes, 0);
  }
  GmmQuantArgs quant{a.scale, a.per_token_scale, a.antiquant_scale, a.antiquant_offset};
  // The operator requires an antiquant offset; the contract's absent one is zero.
  std::unique_ptr<DeviceBuffer> zero_offset;
  if (a.antiquant_scale && !a.antiquant_offset) {
    size_t bytes = GmmTypeBytes(p.antiquant_type);
    for (int64_t d : AntiquantDims(p)) bytes *= static_cast<size_t>(d);
    zero_offset = std::make_unique<DeviceBuffer>(ctx, bytes);
    MemsetAsync(ctx, zero_offset->get(), bytes, 0);
    quant.antiquant_offset = zero_offset->get();
  }
  RunGroupedMatmulV4(ctx, p, a.x, a.weight, a.has_bias ? a.bias : nullptr, group_list.get(),
                     a.group_list_type, a.y, &quant);
}

// Weight bytes: x's float type, int8, or int4 (two per byte).
size_t WeightBytes(const cpu::GroupedMatmulParams& p) {
  const size_t count = static_cast<size_t>(p.groups * p.depth * p.cols);
  switch (p.weight) {
    case cpu::GmmWeight::kInt8:
      return count;
    case cpu::GmmWeight::kInt4:
      return count / 2;
    case cpu::GmmWeight::kSame:
      break;
  }
  return count * GmmTypeBytes(p.type);
}

// Bias element bytes: float, int32 for int8 x, else x's type.
size_t BiasBytes(const cpu::GroupedMatmulParams& p) {
  if (p.bias_float32 || p.type == cpu::GmmType::kInt8) return 4;
  return GmmTypeBytes(p.type);
}

// An optional input downloaded (null when absent).
std::unique_ptr<HostBuffer> DownloadIf(const DeviceContext& ctx, const void* device, size_t bytes) {
  return device ? Download(ctx, device, bytes) : nullptr;
}

const void* HostOf(const std::unique_ptr<HostBuffer>& b) { return b ? b->get() : nullptr; }

void RunOnHost(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  const size_t e_n = static_cast<size_t>(p.groups * p.cols);
  const size_t scales = e_n * static_cast<size_t>(p.antiquant_groups) * GmmTypeBytes(p.antiquant_type);
  const auto x = Download(ctx, a.x, static_cast<size_t>(p.rows * p.depth) * GmmTypeBytes(p.type));
  const auto w = Download(ctx, a.weight, WeightBytes(p));
  const auto bias = DownloadIf(ctx, a.has_bias ? a.bias : nullptr, e_n * BiasBytes(p));
  const auto scale = DownloadIf(ctx, a.scale, e_n * GmmTypeBytes(p.scale_type));
  const auto antiquant_scale = DownloadIf(ctx, a.antiquant_scale, scales);
  const auto antiquant_offset = DownloadIf(ctx, a.antiquant_offset, scales);
  const auto per_token_scale =
      DownloadIf(ctx, a.per_token_scale, static_cast<size_t>(p.rows) * sizeof(float));
  HostBuffer y(static_cast<size_t>(p.rows * p.cols) * GmmTypeBytes(p.out_type));
  cpu::GroupedMatmulBuffers b;
  b.x = x->get();
  b.weight = w->get();
  b.bias = HostOf(bias);
  b.scale = HostOf(scale);
  b.antiquant_scale = HostOf(antiquant_scale);
  b.antiquant_offset = HostOf(antiquant_offset);
  b.per_token_scale = static_cast<const float*>(HostOf(per_token_scale));
  b.y = y.get();
  cpu::GroupedMatmul(p, b, a.ends.data());
  y.UploadTo(ctx, a.y, y.size());  // no wait: the pool keeps y until the copy ran
}

// aclnnGroupedMatmulV4's W8A8 (int8 x and weight, aclnn_grouped_matmul.cpp CheckFunctionQuantParams
// and CheckQuantParamsDtype, per-token and per-channel alike): y bfloat16 with a bfloat16 scale or
// float16 with a float scale; bias int32 (the contract's only W8A8 bias type), per_token_scale
// float [M] (the contract's too). int32 y (the raw sums) runs on the host: how the operator adds a
// bias to int32 sums is not documented.
std::string W8A8Blocker(const cpu::GroupedMatmulParams& p) {
  using cpu::GmmType;
  if (p.out_type == GmmType::kInt32) return "W8A8 with int32 y (output_dtype 6) runs on the host";
  const bool bf16 = p.out_type == GmmType::kBFloat16 && p.scale_type == GmmType::kBFloat16;
  const bool fp16 = p.out_type == GmmType::kFloat16 && p.scale_type == GmmType::kFloat32;
  if (!bf16 && !fp16) {
    return std::string("aclnnGroupedMatmulV4 dequantizes int8 x to bfloat16 y with a bfloat16 scale or to ") +
           "float16 y with a float scale, got " + AclTypeName(GmmAclType(p.out_type)) + " y with a " +
           AclTypeName(GmmAclType(p.scale_type)) + " scale";
  }
  return {};
}

// aclnnGroupedMatmulV4's antiquant forms (aclnn_grouped_matmul.cpp, CheckFunctionParams,
// CheckOptionalTensorList and CheckGroupedMatmulAntiQuant): float16 / bfloat16 x; int8 weights
// with per-channel scales [E, N] only, int4 weights (ACL_INT4) per channel or per group
// [E, G, N] with G dividing K (the operator's K / G even with a transposed int4 weight holds by
// the contract). The operator requires antiquantOffset: without antiquant_offset a zero one is
// passed (RunNative).
std::string AntiquantBlocker(const cpu::GroupedMatmulParams& p) {
  const bool int4 = p.weight == cpu::GmmWeight::kInt4;
  if (p.type != cpu::GmmType::kFloat16 && p.type != cpu::GmmType::kBFloat16) {
    return std::string("aclnnGroupedMatmulV4 takes ") + (int4 ? "int4" : "int8") +
           " weights with float16 or bfloat16 x, got " + AclTypeName(GmmAclType(p.type)) + " x";
  }
  if (!int4 && p.antiquant_groups > 1) {
    return "aclnnGroupedMatmulV4 takes int8 weights with per-channel antiquant scales [E, N] only; per-group "
           "scales [E, G, N] (G = " +
           std::to_string(p.antiquant_groups) + ") run on the host";
  }
  return {};
}

}  // namespace

size_t GmmTypeBytes(cpu::GmmType t) {
  switch (t) {
    case cpu::GmmType::kFloat16:
    case cpu::GmmType::kBFloat16:
      return 2;
    case cpu::GmmType::kInt8:
      return 1;
    case cpu::GmmType::kFloat32:
    case cpu::GmmType::kInt32:
      break;
  }
  return 4;
}

AclDataType GmmAclType(cpu::GmmType type) {
  static constexpr EnumValue<cpu::GmmType, AclDataType> kTypes[] = {{cpu::GmmType::kFloat16, kAclFloat16},
                                                                    {cpu::GmmType::kBFloat16, kAclBFloat16},
                                                                    {cpu::GmmType::kInt8, kAclInt8},
                                                                    {cpu::GmmType::kInt32, kAclInt32}};
  return ValueOf(kTypes, type, kAclFloat);
}

std::string GroupedMatmulNativeBlocker(const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  if (p.groups > kGmmMaxGroups) {
    return "aclnnGroupedMatmulV4 takes at most 1024 groups, got E = " + std::to_string(p.groups);
  }
  if (p.type == cpu::GmmType::kInt8) {
    const std::string w8a8 = W8A8Blocker(p);
    if (!w8a8.empty()) return w8a8;
    return p.depth == 0 ? "K = 0 (empty matrices) runs on the host" : "";
  }
  if (p.weight != cpu::GmmWeight::kSame) {
    const std::string antiquant = AntiquantBlocker(p);
    if (!antiquant.empty()) return antiquant;
  }
  const AclDataType x_type = GmmAclType(p.type);
  const AclDataType native_bias = NativeBiasIsFloat(p) ? kAclFloat : x_type;
  const AclDataType bias = p.bias_float32 ? kAclFloat : x_type;
  if (a.has_bias && bias != native_bias) {
    return std::string("aclnnGroupedMatmulV4 takes a ") + AclTypeName(native_bias) + " bias with " +
           AclTypeName(x_type) + " x, got " + AclTypeName(bias);
  }
  if (p.depth == 0) return "K = 0 (empty matrices) runs on the host";
  return {};
}

std::string GroupedMatmulSocBlocker(const cpu::GroupedMatmulParams& p, bool has_bias,
                                    const std::string& soc) {
  std::string chip = SocBlocker(soc, kAclnnGroupedMatmulV4);
  if (!chip.empty() || !SocIs310P(soc)) return chip;
  const bool fp16 =
      p.type == cpu::GmmType::kFloat16 && p.weight == cpu::GmmWeight::kSame && (!has_bias || !p.bias_float32);
  if (fp16) return {};
  return "on Ascend310P aclnnGroupedMatmulV4 takes float16 x, weight and bias only, without quantisation, "
         "got " +
         std::string(AclTypeName(GmmAclType(p.type))) + " x" +
         (p.weight != cpu::GmmWeight::kSame ? " with quantized weights" : "") +
         (has_bias && p.bias_float32 ? " and a float bias" : "");
}

NativePath ChooseGroupedMatmulPath(const GroupedMatmulDeviceArgs& a) {
  NativePath path;
  path.reason = GroupedMatmulNativeBlocker(a);
  if (path.reason.empty()) path.reason = GroupedMatmulSocBlocker(a.params, a.has_bias, std::string());
  if (!path.reason.empty()) return path;
  AclnnOp op;
  std::string why;
  if (!FindAclnnOp(kAclnnGroupedMatmulV4, &op, &why)) {
    path.reason = "the CANN operator library has no aclnnGroupedMatmulV4: " + why;
    return path;
  }
  path.call = kAclnnGroupedMatmulV4;
  return path;
}

void RunGroupedMatmulV4(const DeviceContext& ctx, const cpu::GroupedMatmulParams& p, const void* x,
                        const void* weight, const void* bias, const void* group_list_device,
                        int64_t group_list_type, void* y, const GmmQuantArgs* quant) {
  const AclnnOp op = RequireAclnnOp(kAclnnGroupedMatmulV4, "GroupedMatmul");
  const AclDataType type = GmmAclType(p.type);  // x's and the weight's (int8 for W8A8)
  const bool w8a8 = p.type == cpu::GmmType::kInt8;
  // int4 words (torch_npu's int32 layout) are ACL_INT4 elements in the same memory order: the
  // weight is described by its element dims, no copy.
  const AclDataType w_type = p.weight == cpu::GmmWeight::kInt8   ? kAclInt8
                             : p.weight == cpu::GmmWeight::kInt4 ? kAclInt4
                                                                 : type;
  // Every tensor goes into a one-tensor list, which owns it from then on (aclnn_objects.h).
  auto list = [](Tensor t) { return std::make_unique<TensorList>(std::move(t)); };
  auto optional_list = [&](const void* data, AclDataType t, std::vector<int64_t> dims) {
    return data ? list(Tensor(t, std::move(dims), data)) : nullptr;
  };
  const auto x_list = list(Tensor(type, {p.rows, p.depth}, x));
  const auto y_list = list(Tensor(GmmAclType(w8a8 ? p.out_type : p.type), {p.rows, p.cols}, y));
  Tensor group_list(kAclInt64, {p.groups}, group_list_device);
  // A transposed weight is passed as the [E, K, N] view of its [E, N, K] storage (op-plugin's
  // npu_grouped_matmul passes torch's transposed view the same way).
  const auto w_list =
      list(p.transpose_weight ? Tensor::TransposedWeight(w_type, p.groups, p.cols, p.depth, weight)
                              : Tensor(w_type, {p.groups, p.depth, p.cols}, weight));
  const auto bias_list = optional_list(bias,
                                       w8a8             ? kAclInt32
                                       : p.bias_float32 ? kAclFloat
                                                        : type,
                                       {p.groups, p.cols});
  // W8A8: scale [E, N], per_token_scale float [M]; W8A16 / W4A16: antiquant_scale /
  // antiquant_offset [E, N] or [E, G, N].
  const std::vector<int64_t> aq_dims = AntiquantDims(p);
  const auto scale_list =
      optional_list(quant ? quant->scale : nullptr, GmmAclType(p.scale_type), {p.groups, p.cols});
  const auto aq_scale_list =
      optional_list(quant ? quant->antiquant_scale : nullptr, GmmAclType(p.antiquant_type), aq_dims);
  const auto aq_offset_list =
      optional_list(quant ? quant->antiquant_offset : nullptr, GmmAclType(p.antiquant_type), aq_dims);
  const auto per_token_list = optional_list(quant ? quant->per_token_scale : nullptr, kAclFloat, {p.rows});
  auto prepare = reinterpret_cast<AclnnGroupedMatmulV4GetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnGroupedMatmulV4,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        auto get = [](const std::unique_ptr<TensorList>& l) { return l ? l->get() : nullptr; };
        return prepare(x_list->get(), w_list->get(), get(bias_list), get(scale_list), nullptr,
                       get(aq_scale_list), get(aq_offset_list), get(per_token_list), group_list.get(),
                       nullptr, nullptr, nullptr, kGmmSplitItemSingle, kGmmGroupTypeSplitM, group_list_type,
                       kGmmActNone, y_list->get(), nullptr, nullptr, workspace_size, executor);
      },
      op.run);
}

void LaunchGroupedMatmul(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a, NativePath* path) {
  const cpu::GroupedMatmulParams& p = a.params;
  if (p.rows == 0 || p.cols == 0) return;  // y is empty
  if (RunNativePath(path, [&]() { RunNative(ctx, a); })) return;
  RunOnHost(ctx, a);
}

}  // namespace ascend_moe::cann
