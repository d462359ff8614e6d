// What the fake ACLNN operator libraries share: strict argument checks with CANN's error codes,
// and single-use executors that run on a live stream with a workspace of the size they asked for.
#pragma once

#include <functional>
#include <initializer_list>
#include <string>
#include <vector>

#include "fake_cann.h"

extern "C" int FakeAclnnIsTensor(const void* t);

namespace fake_cann {

// Checks the arguments of one ...GetWorkspaceSize call; the first failure wins and is reported
// (stderr + aclGetRecentErrMsg) as "<op>: <message>".
class ArgCheck {
 public:
  // Counts the call (FakeAclCallCount(op)); FAKE_ACLNN_REJECT="<operator>=<status>" makes every
  // phase 1 of that operator fail with that status, as a CANN whose limits differ would.
  explicit ArgCheck(const char* op);
  // A tensor argument: null is 161001 when required; otherwise it must be a live ND contiguous
  // tensor of one of `dtypes`, of exactly `dims` (-1 = any size), whose data lies in device memory.
  bool Check(const char* name, const void* t, bool required, std::initializer_list<int> dtypes,
             std::vector<int64_t> dims);
  void Fail(int status, const std::string& message);
  // Aborts the process when `t` is neither null nor a live aclTensor (a use after destroy).
  void RequireLive(const char* name, const void* t) const;
  // Each operator has kernels for some SoCs only (fake_cann::SocHasKernelsOf): a call on another
  // fails with `status` (561003 where the operator reports the missing kernel itself).
  void RequireKernels(int status = kFindKernelError);
  bool ok() const { return status_ == kOk; }
  int status() const { return status_; }

 private:
  const char* op_;
  int status_ = kOk;
};

// The fake's readable address of a tensor's data (checked by ArgCheck), and the tensor itself.
// While an executor runs, its tensors are the copies taken at launch: ACLNN lets the caller
// destroy its aclTensors once phase 2 has returned, before the stream ran the kernel.
void* Data(const void* t);
const Tensor* T(const void* t);

// Creates the executor of `op` with its workspace size; `run` computes on the fake's addresses
// and returns a status.
int MakeExecutor(const char* op, uint64_t workspace_size, std::vector<const void*> tensors,
                 std::function<int()> run, uint64_t* workspace_size_out, void** executor);
// The second phase: checks the executor, stream and workspace, then runs it once.
int RunExecutor(const char* op, void* workspace, uint64_t workspace_size, void* executor,
                void* stream);

}  // namespace fake_cann
