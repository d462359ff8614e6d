// Test double of the CANN runtime for CPU-only machines: what the fake libraries share.
// "Device" memory is host memory mapped twice: the address handed out by aclrtMalloc has no
// access rights (a host read or write of it crashes at once), and the fake itself reaches the
// data through a second, readable mapping. Every call checks its arguments against CANN's
// documented signatures and limits and fails loudly (stderr + CANN's error codes).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

extern "C" {
// The fake's own address of device range [p, p + bytes), or null unless it lies inside one live
// aclrtMalloc block (bytes == 0 is allowed anywhere inside a block).
void* FakeAclDeviceAccess(const void* p, size_t bytes);
// Whether `stream` is a live stream from aclrtCreateStream.
int FakeAclIsStream(const void* stream);
// Records the message returned by aclGetRecentErrMsg and prints it to stderr.
void FakeAclError(const char* message);
// A misuse the real CANN answers with undefined behaviour (a double destroy or free, a destroy of a
// handle it never made, a use after destroy): prints "[fake-cann] ABORT: <message>" and aborts the
// process, always, so that no test can pass over it.
[[noreturn]] void FakeAclAbort(const char* message);
// Counters for tests: live device blocks, calls of a name (e.g. "aclnnMoeReRouting").
int FakeAclLiveBlocks();
int FakeAclCallCount(const char* name);
void FakeAclCountCall(const char* name);
// Tasks queued and not yet run on `stream` (all streams when null); see fake_cann::Enqueue.
int FakeAclPendingTasks(const void* stream);
}

namespace fake_cann {

// The handles a fake library made and has not destroyed yet, safe across threads: its checks for
// a use after destroy and a double destroy. Each library keeps one, never destroyed (handles may
// be released during exit).
class LiveHandles {
 public:
  void Track(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    live_.insert(p);
  }
  // False when `p` is not live.
  bool Untrack(const void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.erase(p) == 1;
  }
  bool IsLive(const void* p) const {
    std::lock_guard<std::mutex> lock(mu_);
    return live_.count(p) == 1;
  }

 private:
  mutable std::mutex mu_;
  std::set<const void*> live_;
};

// aclTensor as the fake's aclCreateTensor builds it.
struct Tensor {
  uint32_t magic;
  std::vector<int64_t> dims;
  std::vector<int64_t> strides;
  int dtype;
  int format;
  int64_t offset;
  void* data;
};
inline constexpr uint32_t kTensorMagic = 0x7e450a11;

// ACLNN status codes (opbase include/nnopbase/opdev/op_errno.h).
enum Status : int {
  kOk = 0,
  kParamNullptr = 161001,
  kParamInvalid = 161002,
  kTilingError = 561002,
  kFindKernelError = 561003,
  kInnerNullptr = 561103,
};
enum DataType : int {
  kFloat = 0,
  kFloat16 = 1,
  kInt8 = 2,
  kInt32 = 3,
  kUint8 = 4,
  kInt64 = 9,
  kBool = 12,
  kBFloat16 = 27,
  kInt4 = 29
};

// Puts work (a kernel or an asynchronous copy) on `stream`; returns its status, or kOk when it
// runs later. Every operator and async copy of the fake goes through here, so the stream's
// ordering rules live in one place (fake_stream.cc). With FAKE_ACL_ASYNC=1 work is queued and
// runs, in order, at aclrtSynchronizeStream / aclrtSynchronizeEvent of an event recorded after it
// / aclrtSynchronizeDevice / aclrtStreamWaitEvent on it / aclrtDestroyStream, or at a synchronous
// aclrtMemcpy (all streams); the first error of a queued task is returned by that call.
// Otherwise work runs at once. `host` (may be empty) is the host memory the work reads or writes
// (aclrtFreeHost of it while queued fails the stream: a freed staging buffer).
struct HostRange {
  const void* begin = nullptr;
  size_t bytes = 0;
};
int Enqueue(const void* stream, std::function<int()> work, HostRange host = {});
// Tasks of `stream` put on it so far / run so far (in order): an event recorded after task n is
// complete once n tasks have run (aclrtQueryEventStatus).
uint64_t TasksEnqueued(const void* stream);
uint64_t TasksRun(const void* stream);
// Runs the queued work of `stream`; of every stream when `all`.
int Drain(const void* stream, bool all = false);
// Fails the queued tasks that use host memory [p, p + bytes) (it is being freed); returns how many.
int FailTasksUsing(const void* p, size_t bytes, const char* why);

// A strict switch of the environment, read at each use (tests set them in-process): its value as
// an integer, 0 when unset.
long Switch(const char* name);
// The SoC name aclrtGetSocName reports: $FAKE_ACL_SOC_NAME, default "Ascend910B1".
const char* SocName();
// Whether CANN's MoE operators have kernels for that SoC (ascend910b*, ascend910_93*, the 950).
bool SocHasMoeKernels();
// Whether ACLNN operator `op` (e.g. "aclnnGroupedMatmulV4") registers kernels for that SoC: each
// operator's AddConfig list in its public op definition (ops-transformer, ops-nn,
// cann-recipes-infer), as the real libopapi.so has them.
bool SocHasKernelsOf(const char* op);
// Whether the SoC is an Atlas 300I (short SoC version ascend310p), whose kernel configs take fewer
// types (no bfloat16: swi_glu_def.cpp, moe_token_unpermute_def.cpp; float16 only: grouped_matmul_def.cpp).
bool SocIs310P();

size_t ElementBytes(int dtype);  // 0 for int4 (half a byte) and unknown types
// Bytes of `numel` elements of dtype (int4: two per byte); 0 for an unknown dtype.
size_t DataBytes(int dtype, int64_t numel);
std::string TypeName(int dtype);
int64_t Numel(const Tensor* t);
std::string DimsStr(const Tensor* t);

}  // namespace fake_cann
