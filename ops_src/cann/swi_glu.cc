#include "ops_src/cann/swi_glu.h"

#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/aclnn_moe.h"
#include "ops_src/cann/soc.h"

namespace ascend_moe::cann {

std::string SwiGluNativeBlocker(const SwiGluDeviceArgs& a) {
  if (a.x_dims.size() > kSwiGluMaxRank) {
    return "aclnnSwiGlu takes x of at most 8 dims, got " + std::to_string(a.x_dims.size());
  }
  // ops-nn activation/swi_glu/op_host/swi_glu_def.cpp: the 310p config has no bfloat16.
  if (a.type == kAclBFloat16 && SocIs310P(std::string())) {
    return "on Ascend310P aclnnSwiGlu takes float16 or float x only, got bfloat16";
  }
  return {};
}

void LaunchSwiGlu(const DeviceContext& ctx, const SwiGluDeviceArgs& a, const char* what) {
  const AclnnOp op = RequireAclnnOp(kAclnnSwiGlu, what);
  const int64_t rank = static_cast<int64_t>(a.x_dims.size());
  std::vector<int64_t> out_dims = a.x_dims;
  out_dims[a.dim < 0 ? a.dim + rank : a.dim] /= 2;
  Tensor x(a.type, a.x_dims, a.x);
  Tensor out(a.type, out_dims, a.out);
  auto prepare = reinterpret_cast<AclnnSwiGluGetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnSwiGlu,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(x.get(), a.dim, out.get(), workspace_size, executor);
      },
      op.run);
}

void LaunchSwiGluOfPairs(const DeviceContext& ctx, AclDataType type, int64_t rows, int64_t inter,
                         const void* x, void* out, const char* what) {
  const AclnnOp op = RequireAclnnOp(kAclnnPermute, what);
  DeviceBuffer split(ctx, static_cast<size_t>(rows * 2 * inter) * AclElementBytes(type));
  Tensor pairs(type, {rows, inter, 2}, x);
  Tensor halves(type, {rows, 2, inter}, split.get());
  IntArray dims({0, 2, 1});
  auto prepare = reinterpret_cast<AclnnPermuteGetWorkspaceSizeFn>(op.prepare);
  RunAclnnOp(
      ctx, kAclnnPermute,
      [&](uint64_t* workspace_size, AclOpExecutor** executor) {
        return prepare(pairs.get(), dims.get(), halves.get(), workspace_size, executor);
      },
      op.run);
  SwiGluDeviceArgs swiglu;
  swiglu.type = type;
  swiglu.x_dims = {rows, 2 * inter};  // gates in the first half of each row, ups in the second
  swiglu.x = split.get();
  swiglu.out = out;
  LaunchSwiGlu(ctx, swiglu, what);
}

}  // namespace ascend_moe::cann
