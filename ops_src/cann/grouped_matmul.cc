#include "ops_src/cann/grouped_matmul.h"

#include <memory>

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

namespace {

size_t TypeBytes(cpu::GmmType t) { return t == cpu::GmmType::kFloat32 ? 4 : 2; }

// The bias type aclnnGroupedMatmulV4 takes without quantisation: float for bfloat16 x, x's type
// otherwise (aclnn_grouped_matmul.cpp, CheckNonQuantMatmulDataType).
bool NativeBiasIsFloat(const cpu::GroupedMatmulParams& p) { return p.type == cpu::GmmType::kBFloat16; }

void RunNative(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  const size_t list_bytes = a.group_list.size() * sizeof(int64_t);
  // The values were read on the host (validation); the operator reads an int64 tensor on the device.
  DeviceBuffer group_list(ctx, list_bytes);
  Upload(ctx, group_list.get(), a.group_list.data(), list_bytes);
  // The operator writes the grouped rows only; the contract's rows past the last group are zero.
  const int64_t covered = a.ends.empty() ? 0 : a.ends.back();
  if (covered < p.rows) {
    const size_t row_bytes = static_cast<size_t>(p.cols) * TypeBytes(p.type);
    MemsetAsync(ctx, static_cast<char*>(a.y) + covered * row_bytes, (p.rows - covered) * row_bytes, 0);
  }
  RunGroupedMatmulV4(ctx, p, a.x, a.weight, a.has_bias ? a.bias : nullptr, group_list.get(),
                     a.group_list_type, a.y);
  Synchronize(ctx);  // the host group list must outlive its upload
}

void RunOnHost(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  const size_t bytes = TypeBytes(p.type);
  const std::vector<unsigned char> x = Download(ctx, a.x, static_cast<size_t>(p.rows * p.depth) * bytes);
  const std::vector<unsigned char> w =
      Download(ctx, a.weight, static_cast<size_t>(p.groups * p.depth * p.cols) * bytes);
  std::vector<unsigned char> bias;
  if (a.has_bias)
    bias = Download(ctx, a.bias, static_cast<size_t>(p.groups * p.cols) * (p.bias_float32 ? 4 : bytes));
  std::vector<unsigned char> y(static_cast<size_t>(p.rows * p.cols) * bytes);
  cpu::GroupedMatmulBuffers b;
  b.x = x.data();
  b.weight = w.data();
  b.bias = a.has_bias ? bias.data() : nullptr;
  b.y = y.data();
  cpu::GroupedMatmul(p, b, a.ends.data());
  Upload(ctx, a.y, y.data(), y.size());
  Synchronize(ctx);  // the host result must outlive its upload
}

}  // namespace

AclDataType GmmAclType(cpu::GmmType type) {
  switch (type) {
    case cpu::GmmType::kFloat16:
      return kAclFloat16;
    case cpu::GmmType::kBFloat16:
      return kAclBFloat16;
    case cpu::GmmType::kFloat32:
      break;
  }
  return kAclFloat;
}

std::string GroupedMatmulNativeBlocker(const GroupedMatmulDeviceArgs& a) {
  const cpu::GroupedMatmulParams& p = a.params;
  if (p.groups > kGmmMaxGroups) {
    return "aclnnGroupedMatmulV4 takes at most 1024 groups, got E = " + std::to_string(p.groups);
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

GroupedMatmulPath ChooseGroupedMatmulPath(const GroupedMatmulDeviceArgs& a) {
  GroupedMatmulPath path;
  path.reason = GroupedMatmulNativeBlocker(a);
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
                        int64_t group_list_type, void* y) {
  const AclnnOp op = RequireAclnnOp(kAclnnGroupedMatmulV4, "GroupedMatmul");
  const AclDataType type = GmmAclType(p.type);
  Tensor x_t(type, {p.rows, p.depth}, x);
  Tensor y_t(type, {p.rows, p.cols}, y);
  Tensor group_list(kAclInt64, {p.groups}, group_list_device);
  // A transposed weight is passed as the [E, K, N] view of its [E, N, K] storage (op-plugin's
  // npu_grouped_matmul passes torch's transposed view the same way).
  std::unique_ptr<Tensor> w_plain;
  std::unique_ptr<TransposedWeight> w_view;
  const AclTensor* w = nullptr;
  if (p.transpose_weight) {
    w_view = std::make_unique<TransposedWeight>(type, p.groups, p.cols, p.depth, weight);
    w = w_view->get();
  } else {
    w_plain = std::make_unique<Tensor>(type, std::vector<int64_t>{p.groups, p.depth, p.cols}, weight);
    w = w_plain->get();
  }
  std::unique_ptr<Tensor> bias_t;
  std::unique_ptr<TensorList> bias_list;
  if (bias) {
    bias_t = std::make_unique<Tensor>(p.bias_float32 ? kAclFloat : type,
                                      std::vector<int64_t>{p.groups, p.cols}, bias);
    bias_list = std::make_unique<TensorList>(bias_t->get());
  }
  TensorList x_list(x_t.get()), w_list(w), y_list(y_t.get());
  auto prepare = reinterpret_cast<AclnnGroupedMatmulV4GetWorkspaceSizeFn>(op.prepare);
  RunAclnn(
      ctx, kAclnnGroupedMatmulV4,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(x_list.get(), w_list.get(), bias_list ? bias_list->get() : nullptr, nullptr, nullptr,
                       nullptr, nullptr, nullptr, group_list.get(), nullptr, nullptr, nullptr,
                       kGmmSplitItemSingle, kGmmGroupTypeSplitM, group_list_type, kGmmActNone, y_list.get(),
                       nullptr, nullptr, workspace_size, executor);
      },
      op.run);
}

void LaunchGroupedMatmul(const DeviceContext& ctx, const GroupedMatmulDeviceArgs& a,
                         const GroupedMatmulPath& path) {
  const cpu::GroupedMatmulParams& p = a.params;
  if (p.rows == 0 || p.cols == 0) return;  // y is empty
  if (path.call)
    RunNative(ctx, a);
  else
    RunOnHost(ctx, a);
}

}  // namespace ascend_moe::cann
