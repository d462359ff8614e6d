// What the CANN execution-provider kernels share: the device context of one Compute call (the
// EP's aclrtStream and its device arena) and a log that says once per node why a call falls back.
#pragma once

#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "op_utils.h"
#include "ops_src/cann/acl.h"
#include "ops_src/cann/aclnn_args.h"
#include "ops_src/cann/device.h"

namespace ascend_moe {

// The CANN EP's stream (KernelContext_GetGPUComputeStream) and device arena for one call. The
// arena is found through the OrtMemoryInfo of a device input: ORT 1.24 rejects a "Cann"
// OrtMemoryInfo made by CreateMemoryInfo.
class CannDevice {
 public:
  CannDevice(Ort::KernelContext& ctx, size_t device_input);
  ~CannDevice();
  CannDevice(const CannDevice&) = delete;
  CannDevice& operator=(const CannDevice&) = delete;
  const cann::DeviceContext& context() const { return context_; }

 private:
  OrtAllocator* allocator_ = nullptr;
  cann::DeviceContext context_;
};

// ACL's name for an element type, when ACL has one (float, float16, bfloat16, int8, uint8, ...).
bool AclTypeOf(ONNXTensorElementDataType type, cann::AclDataType* out);

// The values of an int32 or int64 host input as int32 (the ACLNN operators' index type).
std::vector<int32_t> Int32Values(const InputView& v);

// Logs a warning through the session's logger the first time each distinct message is given for
// this node (kernel instance).
class NodeLog {
 public:
  explicit NodeLog(const OrtKernelInfo* info);
  void WarnOnce(const std::string& message);

 private:
  std::string node_;
  Ort::Logger logger_;
  std::mutex mu_;
  std::set<std::string> said_;
};

// A node's memory of its ACLNN operator rejecting a call in phase 1 (cann::IsAclnnRejection: the
// operator's limits differ from the ones the kernels know): later calls of the node go straight
// to the fallback. A node's attributes and its expert / hidden sizes do not change between calls.
class NativeRejection {
 public:
  // Whether a rejection is remembered; its reason then.
  bool Get(std::string* reason) const;
  void Remember(const std::string& reason);

 private:
  mutable std::mutex mu_;
  std::string reason_;
};

// One node's choice between its ACLNN operator(s) and its fallback, the same in every CANN kernel:
// the reasons for the fallback in the one order the kernels take them, a phase-1 rejection
// remembered (NativeRejection), and each distinct reason logged once as "<op> runs on the
// <fallback>: <reason>".
class NativeOrHost {
 public:
  // `fallback` names what runs instead ("host fallback", "CANN copy fallback", ...).
  NativeOrHost(const OrtKernelInfo* info, const char* op, const char* fallback = "host fallback");

  // Why this call takes the fallback, "" for native: `blocker` (the operator's limits, from the
  // kernel), else `aclnn_call` missing from the operator library, the chip, a remembered rejection.
  std::string Blocker(std::string blocker, const char* aclnn_call) const;
  // Whether a phase-1 rejection is remembered; its reason then.
  bool Rejected(std::string* reason) const { return rejection_.Get(reason); }
  // Logs (once per reason) that the call takes the fallback.
  void Fallback(const std::string& reason);
  // A phase-1 rejection: remembered for the node's later calls, and logged.
  void Reject(const std::string& reason);
  // Runs `native`; when its operator rejects the call in phase 1 (cann::AclnnRejected), Reject and
  // run `host` instead.
  void Launch(const std::function<void()>& native, const std::function<void()>& host);
  // The one skeleton of every CANN kernel: `host` when `blocker` is set (logged by Fallback when
  // `log`), else Launch(native, host).
  void Run(const std::string& blocker, const std::function<void()>& native, const std::function<void()>& host,
           bool log = true);
  // The skeleton of the kernels whose launcher chooses among ACLNN operators (cann::NativePath):
  // a remembered rejection sends the call to the fallback, which is logged, then `launch` runs
  // the path, and a phase-1 rejection it met (path.rejected) is remembered.
  void RunPath(cann::NativePath& path, const std::function<void()>& launch);
  // Any other message, once.
  void WarnOnce(const std::string& message) { log_.WarnOnce(message); }

 private:
  std::string op_;
  std::string fallback_;
  NodeLog log_;
  NativeRejection rejection_;
};

}  // namespace ascend_moe
