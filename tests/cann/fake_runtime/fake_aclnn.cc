#include "fake_aclnn.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <set>

namespace fake_cann {

namespace {

struct Executor {
  std::string op;
  uint64_t workspace;
  std::vector<const void*> tensors;
  std::function<int()> run;
};

// The tensors of the executor running on this thread (launch-time copies).
thread_local const std::map<const void*, Tensor>* t_launched = nullptr;

std::mutex g_mu;
std::set<Executor*>& Executors() {
  static auto* s = new std::set<Executor*>;
  return *s;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) {
    s += (i ? ", " : "") + (dims[i] < 0 ? std::string("*") : std::to_string(dims[i]));
  }
  return s + "]";
}

}  // namespace

const Tensor* T(const void* t) {
  if (t_launched) {
    const auto it = t_launched->find(t);
    if (it != t_launched->end()) return &it->second;
  }
  return static_cast<const Tensor*>(t);
}

ArgCheck::ArgCheck(const char* op) : op_(op) {
  FakeAclCountCall(op);
  const char* reject = std::getenv("FAKE_ACLNN_REJECT");
  const std::string self = std::string(op);
  if (reject && *reject) {
    const std::string r = reject;
    const size_t eq = r.find('=');
    if (eq != std::string::npos && r.substr(0, eq) + "GetWorkspaceSize" == self) {
      Fail(std::atoi(r.c_str() + eq + 1), "rejected by FAKE_ACLNN_REJECT (a CANN whose limits differ)");
    }
  }
}

void ArgCheck::RequireKernels(int status) {
  const std::string self = op_;
  const std::string op = self.substr(0, self.size() - std::string("GetWorkspaceSize").size());
  if (!SocHasKernelsOf(op.c_str())) Fail(status, std::string("no kernel for SoC ") + SocName());
}

void* Data(const void* t) {
  const Tensor* x = T(t);
  return FakeAclDeviceAccess(static_cast<const char*>(x->data) + DataBytes(x->dtype, x->offset),
                             DataBytes(x->dtype, Numel(x)));
}

void ArgCheck::RequireLive(const char* name, const void* t) const {
  if (t && !FakeAclnnIsTensor(t)) {
    FakeAclAbort((std::string(op_) + ": argument '" + name + "' is not a live aclTensor (used after destroy?)").c_str());
  }
}

void ArgCheck::Fail(int status, const std::string& message) {
  if (status_ != kOk) return;
  status_ = status;
  FakeAclError((std::string(op_) + ": " + message + " (status " + std::to_string(status) + ")").c_str());
}

bool ArgCheck::Check(const char* name, const void* t, bool required,
                     std::initializer_list<int> dtypes, std::vector<int64_t> dims) {
  if (!ok()) return false;
  const std::string arg = std::string("argument '") + name + "'";
  if (!t) {
    if (required) Fail(kParamNullptr, arg + " is null");
    return false;
  }
  if (!FakeAclnnIsTensor(t) || T(t)->magic != kTensorMagic) {
    FakeAclAbort((std::string(op_) + ": " + arg + " is not a live aclTensor (used after destroy?)").c_str());
  }
  const Tensor* x = T(t);
  if (std::find(dtypes.begin(), dtypes.end(), x->dtype) == dtypes.end()) {
    std::string allowed;
    for (int d : dtypes) allowed += (allowed.empty() ? "" : ", ") + TypeName(d);
    Fail(kParamInvalid, arg + " must be " + allowed + ", got " + TypeName(x->dtype));
    return false;
  }
  bool shape_ok = x->dims.size() == dims.size();
  for (size_t i = 0; shape_ok && i < dims.size(); ++i) shape_ok = dims[i] < 0 || dims[i] == x->dims[i];
  if (!shape_ok) {
    Fail(kParamInvalid, arg + " must have shape " + DimsText(dims) + ", got " + DimsStr(x));
    return false;
  }
  if (x->format != 2) {
    Fail(kParamInvalid, arg + " must be ACL_FORMAT_ND");
    return false;
  }
  int64_t expect = 1;
  for (size_t i = x->dims.size(); i-- > 0;) {
    if (x->strides[i] != expect) {
      Fail(kParamInvalid, arg + " must be contiguous (row-major strides)");
      return false;
    }
    expect *= x->dims[i];
  }
  if (x->offset != 0) {
    Fail(kParamInvalid, arg + " must have offset 0");
    return false;
  }
  if (Numel(x) > 0 && !Data(t)) {
    Fail(kParamInvalid, arg + " data " + std::to_string(reinterpret_cast<uintptr_t>(x->data)) +
                            " + " + std::to_string(DataBytes(x->dtype, Numel(x))) +
                            " bytes is not inside one device allocation (host pointer or wrong size)");
    return false;
  }
  return true;
}

int MakeExecutor(const char* op, uint64_t workspace_size, std::vector<const void*> tensors,
                 std::function<int()> run, uint64_t* workspace_size_out, void** executor) {
  auto* e = new Executor{op, workspace_size, std::move(tensors), std::move(run)};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Executors().insert(e);
  }
  *workspace_size_out = workspace_size;
  *executor = e;
  return kOk;
}

int RunExecutor(const char* op, void* workspace, uint64_t workspace_size, void* executor,
                void* stream) {
  FakeAclCountCall(op);
  auto* e = static_cast<Executor*>(executor);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!Executors().erase(e)) {
      FakeAclAbort((std::string(op) + ": not a live executor (phase 2 released it: run twice?)").c_str());
    }
  }
  std::unique_ptr<Executor> owned(e);
  auto fail = [&](const std::string& m) {
    FakeAclError((std::string(op) + ": " + m + " (status 161002)").c_str());
    return kParamInvalid;
  };
  if (e->op != op) return fail("executor of " + e->op);
  if (!stream || !FakeAclIsStream(stream)) return fail("stream is not a live aclrtStream");
  if (workspace_size != e->workspace) {
    return fail("workspace size " + std::to_string(workspace_size) + " != the " +
                std::to_string(e->workspace) + " bytes asked for");
  }
  if (e->workspace && !FakeAclDeviceAccess(workspace, e->workspace)) {
    return fail("workspace is not device memory of the size asked for");
  }
  auto launched = std::make_shared<std::map<const void*, Tensor>>();
  for (const void* t : e->tensors) {
    if (t && !FakeAclnnIsTensor(t)) {
      FakeAclAbort((std::string(op) + ": a tensor of the call was destroyed before phase 2 (use after destroy)").c_str());
    }
    if (t) launched->emplace(t, *T(t));
  }
  return Enqueue(stream, [launched, run = std::move(e->run)] {
    t_launched = launched.get();
    const int status = run();
    t_launched = nullptr;
    return status;
  });
}

}  // namespace fake_cann
