#include "ops_src/cann/aclnn_args.h"

#include <cstring>
#include <stdexcept>

#include "ops_src/cann/loader.h"
#include "ops_src/cann/soc.h"

namespace ascend_moe::cann {

void MemsetAsync(const DeviceContext& ctx, void* dst, size_t bytes, int value) {
  static const auto memset_async = RequireSymbolAs<AclrtMemsetAsyncFn>("aclrtMemsetAsync");
  if (bytes == 0) return;
  CheckAcl(memset_async(dst, bytes, value, bytes, ctx.stream), "aclrtMemsetAsync");
}

bool FindAclnnOp(const char* name, AclnnOp* op, std::string* why) {
  const std::string prepare = std::string(name) + "GetWorkspaceSize";
  op->prepare = FindSymbol(prepare.c_str(), why);
  op->run = reinterpret_cast<AclnnRunFn>(op->prepare ? FindSymbol(name, why) : nullptr);
  return op->prepare && op->run;
}

std::string MissingAclnnOp(const char* name) {
  AclnnOp op;
  std::string why;
  return FindAclnnOp(name, &op, &why) ? std::string()
                                      : std::string("the CANN operator library has no ") + name + ": " + why;
}

std::string ChipBlocker(const char* aclnn_call) { return SocBlocker(std::string(), aclnn_call); }

AclnnOp RequireAclnnOp(const char* name, const char* what) {
  AclnnOp op;
  std::string why;
  if (!FindAclnnOp(name, &op, &why)) throw std::runtime_error(std::string(what) + ": " + why);
  return op;
}

void RunAclnnOp(const DeviceContext& ctx, const char* name,
                const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run) {
  const AclnnPrepared prepared = PrepareAclnn(name, prepare);
  if (!prepared.rejected.empty()) throw AclnnRejected(prepared.rejected);
  LaunchAclnn(ctx, name, prepared, run);
}

std::unique_ptr<HostBuffer> Download(const DeviceContext& ctx, const void* device, size_t bytes) {
  auto host = std::make_unique<HostBuffer>(bytes);
  CopyAsync(ctx, host->get(), device, bytes, kDeviceToHost);
  Synchronize(ctx);
  return host;
}

}  // namespace ascend_moe::cann
