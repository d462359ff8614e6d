// Fake libascendcl.so: the 59 ACL C functions and 8 GE C++ functions libonnxruntime_providers_cann
// (onnxruntime-cann 1.24.4) imports, plus the entry points the ascend.moe kernels use. Memory,
// streams, events and copies have checked behaviour; CANN's single operators are served by
// fake_aclop.cc; offline models (graph mode) are refused.
#include <dlfcn.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_cann.h"

namespace {

using aclError = int;
constexpr aclError kSuccess = 0;
constexpr aclError kInvalidParam = 100000;  // ACL_ERROR_INVALID_PARAM
constexpr aclError kBadAlloc = 207001;      // ACL_ERROR_RT_MEMORY_ALLOCATION
constexpr aclError kNotSupported = 100024;  // refused: no CANN operators in the fake
constexpr aclError kAddrUnaligned = 107008;  // ACL_ERROR_RT_ADDR_UNALIGNED (rt_error_codes.h)
constexpr aclError kInvalidMemoryType = 107016;  // ACL_ERROR_RT_INVALID_MEMORY_TYPE

bool Tracing() {
  static const bool on = [] {
    const char* v = std::getenv("FAKE_ACL_TRACE");
    return v && std::strcmp(v, "0") != 0;
  }();
  return on;
}
void Trace(const char* fmt, ...) {
  if (!Tracing()) return;
  va_list ap;
  va_start(ap, fmt);
  std::fprintf(stderr, "[fake-acl] ");
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
}

struct Block {
  size_t size;        // bytes asked for (the bound every access is checked against)
  size_t mapped;      // page-rounded
  char* shadow;       // the fake's readable mapping
};

std::mutex g_mu;
std::map<uintptr_t, Block>& Blocks() {
  static auto* m = new std::map<uintptr_t, Block>;
  return *m;
}
std::set<const void*>& Streams() {
  static auto* s = new std::set<const void*>;
  return *s;
}
// aclrtMallocHost blocks: base -> size.
std::map<uintptr_t, size_t>& PinnedBlocks() {
  static auto* m = new std::map<uintptr_t, size_t>;
  return *m;
}
bool Pinned(const void* p, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = PinnedBlocks();
  auto it = m.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == m.begin()) return false;
  --it;
  const uintptr_t q = reinterpret_cast<uintptr_t>(p);
  return q >= it->first && q + n <= it->first + it->second;
}
std::map<std::string, int>& Calls() {
  static auto* c = new std::map<std::string, int>;
  return *c;
}
thread_local std::string t_error;

bool HostVisible() {  // FAKE_ACL_HOST_VISIBLE=1: one readable mapping (debugging aid)
  static const bool on = [] {
    const char* v = std::getenv("FAKE_ACL_HOST_VISIBLE");
    return v && std::strcmp(v, "0") != 0;
  }();
  return on;
}

void* Access(const void* p, size_t n) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto& m = Blocks();
  auto it = m.upper_bound(reinterpret_cast<uintptr_t>(p));
  if (it == m.begin()) return nullptr;
  --it;
  const uintptr_t base = it->first, q = reinterpret_cast<uintptr_t>(p);
  if (q < base || q + n > base + it->second.size || (n == 0 && q > base + it->second.size)) {
    return nullptr;
  }
  return it->second.shadow + (q - base);
}

const char* KindName(int kind) {
  static const char* names[] = {"host-to-host", "host-to-device", "device-to-host",
                                "device-to-device"};
  return kind >= 0 && kind < 4 ? names[kind] : "unknown kind";
}

// Whether `code` (a return address) lies in ONNX Runtime's CANN provider library: its data
// transfer copies graph inputs asynchronously from pageable memory (measured), which
// FAKE_ACL_PINNED_ONLY leaves to it; every other caller (the kernels under test) is checked.
bool CalledFromOrtCannProvider(const void* code) {
  Dl_info info{};
  return dladdr(code, &info) && info.dli_fname && std::strstr(info.dli_fname, "onnxruntime_providers_cann");
}

aclError Copy(const char* who, void* dst, size_t dst_max, const void* src, size_t n, int kind,
              const void* stream, bool async, bool pageable_allowed = false) {
  FakeAclCountCall(who);
  Trace("%s(dst=%p, src=%p, %zu bytes, %s, stream=%p)", who, dst, src, n, KindName(kind), stream);
  char msg[256];
  if (kind < 0 || kind > 3) {
    std::snprintf(msg, sizeof msg, "%s: unknown copy kind %d", who, kind);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (async && stream && !FakeAclIsStream(stream)) {
    std::snprintf(msg, sizeof msg, "%s: %p is not a live stream", who, stream);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (n > dst_max) {
    std::snprintf(msg, sizeof msg, "%s: count %zu exceeds destMax %zu", who, n, dst_max);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (n == 0) return kSuccess;  // ORT issues zero-byte copies with null pointers for empty tensors
  const bool dst_dev = kind == 1 || kind == 3, src_dev = kind == 2 || kind == 3;
  void* d = dst;
  const void* s = src;
  if (dst_dev && !(d = Access(dst, n))) {
    std::snprintf(msg, sizeof msg, "%s (%s): destination %p + %zu bytes is not device memory",
                  who, KindName(kind), dst, n);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (src_dev && !(s = Access(src, n))) {
    std::snprintf(msg, sizeof msg, "%s (%s): source %p + %zu bytes is not device memory", who,
                  KindName(kind), src, n);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (!dst_dev && Access(dst, 1)) {
    std::snprintf(msg, sizeof msg, "%s (%s): destination %p is device memory", who,
                  KindName(kind), dst);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (!src_dev && Access(src, 1)) {
    std::snprintf(msg, sizeof msg, "%s (%s): source %p is device memory", who, KindName(kind),
                  src);
    FakeAclError(msg);
    return kInvalidParam;
  }
  if (!async) {
    // A synchronous copy runs after the work queued on every stream (FAKE_ACL_ASYNC).
    const aclError queued = fake_cann::Drain(nullptr, /*all=*/true);
    if (queued != kSuccess) return queued;
    std::memmove(d, s, n);
    return kSuccess;
  }
  // FAKE_ACL_D2D_ALIGN=64: acl_rt.h (aclrtMemcpyAsync) requires 64-byte aligned source and
  // destination for on-chip device-to-device copies.
  const long align = fake_cann::Switch("FAKE_ACL_D2D_ALIGN");
  if (kind == 3 && align > 0 &&
      (reinterpret_cast<uintptr_t>(dst) % align || reinterpret_cast<uintptr_t>(src) % align)) {
    std::snprintf(msg, sizeof msg, "%s (device-to-device): dst %p / src %p not %ld-byte aligned", who, dst,
                  src, align);
    FakeAclError(msg);
    return kAddrUnaligned;
  }
  // FAKE_ACL_PINNED_ONLY=1: older CANN requires aclrtMallocHost memory for asynchronous
  // host<->device copies (pageable memory "may cause unpredictable errors").
  const void* host = kind == 1 ? src : kind == 2 ? dst : nullptr;
  if (host && !pageable_allowed && fake_cann::Switch("FAKE_ACL_PINNED_ONLY") && !Pinned(host, n)) {
    std::snprintf(msg, sizeof msg, "%s (%s): host %p + %zu bytes is not aclrtMallocHost memory", who,
                  KindName(kind), host, n);
    FakeAclError(msg);
    return kInvalidMemoryType;
  }
  if (kind == 1 && !Pinned(host, n)) {
    // CANN stages a pageable host source before aclrtMemcpyAsync returns (only page-locked memory
    // is read by the DMA later), so the caller may reuse it at once: the fake copies it now.
    auto staged = std::make_shared<std::vector<char>>(static_cast<const char*>(s), static_cast<const char*>(s) + n);
    return fake_cann::Enqueue(stream, [d, staged] {
      std::memcpy(d, staged->data(), staged->size());
      return 0;
    });
  }
  return fake_cann::Enqueue(
      stream,
      [d, s, n] {
        std::memmove(d, s, n);
        return 0;
      },
      fake_cann::HostRange{host, host ? n : 0});
}

struct Handle {
  int tag;
  const void* stream = nullptr;  // events: the stream of the last aclrtRecordEvent
  uint64_t recorded_at = 0;      // events: the stream's tasks enqueued before that record
};
std::set<const void*>& Events() {
  static auto* s = new std::set<const void*>;
  return *s;
}

}  // namespace

extern "C" {

void* FakeAclDeviceAccess(const void* p, size_t bytes) { return Access(p, bytes); }
int FakeAclIsStream(const void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  return Streams().count(stream) ? 1 : 0;
}
void FakeAclError(const char* message) {
  t_error = std::string("fake CANN: ") + message;
  std::fprintf(stderr, "[fake-cann] %s\n", message);
}
void FakeAclAbort(const char* message) {
  std::fprintf(stderr, "[fake-cann] ABORT: %s\n", message);
  std::fflush(stderr);
  std::abort();
}
int FakeAclLiveBlocks() {
  std::lock_guard<std::mutex> lock(g_mu);
  return static_cast<int>(Blocks().size());
}
int FakeAclCallCount(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  auto it = Calls().find(name);
  return it == Calls().end() ? 0 : it->second;
}
void FakeAclCountCall(const char* name) {
  std::lock_guard<std::mutex> lock(g_mu);
  ++Calls()[name];
}

// ---- init, device ----
// As CANN's runtime (acl.cpp aclInitImpl / aclFinalizeImpl): a repeated aclInit answers
// ACL_ERROR_REPEAT_INITIALIZE; aclFinalize ends it, after which aclInit may run again.
int g_init_count = 0;
aclError aclInit(const char* config) {
  Trace("aclInit(%s)", config ? config : "null");
  std::lock_guard<std::mutex> lock(g_mu);
  return g_init_count++ > 0 ? 100002 : kSuccess;
}
aclError aclFinalize() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_init_count == 0) return 100037;  // ACL_ERROR_REPEAT_FINALIZE
  g_init_count = 0;
  return kSuccess;
}
// As CANN's: returns and clears the thread's latest error message; null when there is none
// (ONNX Runtime's CANN kernels fail a node whenever it is not null).
const char* aclGetRecentErrMsg() {
  thread_local std::string returned;
  if (t_error.empty()) return nullptr;
  returned.swap(t_error);
  t_error.clear();
  return returned.c_str();
}
aclError aclrtSetDevice(int32_t id) { Trace("aclrtSetDevice(%d)", id); return id == 0 ? kSuccess : kInvalidParam; }
aclError aclrtGetDevice(int32_t* id) { *id = 0; return kSuccess; }
aclError aclrtGetDeviceCount(uint32_t* count) { *count = 1; return kSuccess; }
// Null before aclInit: the SoC version is read when ACL is initialised (FAKE_ACL_SOC_BEFORE_INIT=1
// answers at any time, as some CANN versions do).
const char* aclrtGetSocName() {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (g_init_count == 0 && !fake_cann::Switch("FAKE_ACL_SOC_BEFORE_INIT")) return nullptr;
  }
  return fake_cann::SocName();
}
aclError aclrtSynchronizeDevice() { return fake_cann::Drain(nullptr, /*all=*/true); }

// ---- streams and events: work runs in fake_cann::Enqueue (fake_stream.cc) ----
aclError aclrtCreateStream(void** stream) {
  *stream = new Handle{1};
  std::lock_guard<std::mutex> lock(g_mu);
  Streams().insert(*stream);
  return kSuccess;
}
aclError aclrtDestroyStream(void* stream) {
  fake_cann::Drain(stream);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!Streams().erase(stream)) return kInvalidParam;
  }
  delete static_cast<Handle*>(stream);
  return kSuccess;
}
aclError aclrtSynchronizeStream(void* stream) {
  FakeAclCountCall("aclrtSynchronizeStream");
  if (stream && !FakeAclIsStream(stream)) {
    FakeAclError("aclrtSynchronizeStream: not a live stream");
    return kInvalidParam;
  }
  return fake_cann::Drain(stream);
}
aclError aclrtCreateEvent(void** event) {
  *event = new Handle{2};
  std::lock_guard<std::mutex> lock(g_mu);
  Events().insert(*event);
  return kSuccess;
}
aclError aclrtDestroyEvent(void* event) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    if (!Events().erase(event)) FakeAclAbort("aclrtDestroyEvent: not a live event (destroyed twice, or never made)");
  }
  delete static_cast<Handle*>(event);
  return kSuccess;
}
Handle* LiveEvent(void* event, const char* who) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!Events().count(event)) FakeAclAbort((std::string(who) + ": not a live event (used after destroy?)").c_str());
  return static_cast<Handle*>(event);
}
aclError aclrtRecordEvent(void* event, void* stream) {
  Handle* e = LiveEvent(event, "aclrtRecordEvent");
  e->stream = stream;
  e->recorded_at = fake_cann::TasksEnqueued(stream);
  return kSuccess;
}
// acl_rt.h aclrtEventRecordedStatus: 0 not ready, 1 complete (the work before the record has run).
aclError aclrtQueryEventStatus(void* event, int* status) {
  const Handle* e = LiveEvent(event, "aclrtQueryEventStatus");
  if (!status) return kInvalidParam;
  *status = fake_cann::TasksRun(e->stream) >= e->recorded_at ? 1 : 0;
  return kSuccess;
}
// Waiting runs the event's stream now: at least as ordered as the real runtime.
aclError aclrtStreamWaitEvent(void*, void* event) { return fake_cann::Drain(static_cast<Handle*>(event)->stream); }
aclError aclrtSynchronizeEvent(void* event) { return fake_cann::Drain(static_cast<Handle*>(event)->stream); }

// ---- memory ----
aclError aclrtMalloc(void** p, size_t size, int policy) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  const size_t mapped = ((size ? size : 1) + page - 1) / page * page;
  char* shadow = nullptr;
  void* device = nullptr;
  if (HostVisible()) {
    shadow = static_cast<char*>(mmap(nullptr, mapped, PROT_READ | PROT_WRITE,
                                     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0));
    device = shadow;
  } else {
    const int fd = memfd_create("fake-acl-device", 0);
    if (fd < 0 || ftruncate(fd, static_cast<off_t>(mapped)) != 0) return kBadAlloc;
    shadow = static_cast<char*>(mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0));
    device = mmap(nullptr, mapped, PROT_NONE, MAP_SHARED, fd, 0);
    close(fd);
  }
  if (shadow == MAP_FAILED || device == MAP_FAILED) return kBadAlloc;
  // FAKE_ACL_DIRTY_MALLOC=1: new device memory holds 0x5A bytes (float16 203.25, bfloat16 and
  // float 1.5e16), as reused NPU memory holds
  // whatever was there (a kernel that reads memory it never wrote then computes garbage).
  if (fake_cann::Switch("FAKE_ACL_DIRTY_MALLOC")) std::memset(shadow, 0x5A, size);
  {
    std::lock_guard<std::mutex> lock(g_mu);
    Blocks()[reinterpret_cast<uintptr_t>(device)] = Block{size, mapped, shadow};
  }
  *p = device;
  Trace("aclrtMalloc(%zu, policy %d) -> %p", size, policy, device);
  return kSuccess;
}
aclError aclrtFree(void* p) {
  // Work queued before the free runs first: ORT's CANN EP frees the device inputs of a node it
  // computes at session creation (constant folding) right after the launch, without a
  // synchronisation, which the NPU's device-wide free tolerates.
  fake_cann::Drain(nullptr, /*all=*/true);
  Block b{};
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = Blocks().find(reinterpret_cast<uintptr_t>(p));
    if (it == Blocks().end()) {
      std::fprintf(stderr, "[fake-cann] aclrtFree(%p): not a device block\n", p);
      return kInvalidParam;
    }
    b = it->second;
    Blocks().erase(it);
  }
  if (b.shadow != p) munmap(b.shadow, b.mapped);
  munmap(p, b.mapped);
  return kSuccess;
}
// Page-locked host memory: tracked (FAKE_ACL_PINNED_ONLY), filled with 0xA5 so that a result read
// before its download ran shows.
aclError aclrtMallocHost(void** p, size_t size) {
  *p = std::aligned_alloc(64, ((size ? size : 1) + 63) / 64 * 64);
  if (!*p) return kBadAlloc;
  std::memset(*p, 0xA5, size);
  std::lock_guard<std::mutex> lock(g_mu);
  PinnedBlocks()[reinterpret_cast<uintptr_t>(*p)] = size;
  return kSuccess;
}
aclError aclrtFreeHost(void* p) {
  size_t size = 0;
  {
    std::lock_guard<std::mutex> lock(g_mu);
    auto it = PinnedBlocks().find(reinterpret_cast<uintptr_t>(p));
    if (it == PinnedBlocks().end()) FakeAclAbort("aclrtFreeHost: not a live aclrtMallocHost block (freed twice?)");
    size = it->second;
    PinnedBlocks().erase(it);
  }
  char why[160];
  std::snprintf(why, sizeof why, "aclrtFreeHost(%p): freed while queued", p);
  fake_cann::FailTasksUsing(p, size, why);
  std::free(p);
  return kSuccess;
}
aclError aclrtMemcpy(void* dst, size_t dst_max, const void* src, size_t n, int kind) {
  return Copy("aclrtMemcpy", dst, dst_max, src, n, kind, nullptr, false);
}
aclError aclrtMemcpyAsync(void* dst, size_t dst_max, const void* src, size_t n, int kind,
                          void* stream) {
  return Copy("aclrtMemcpyAsync", dst, dst_max, src, n, kind, stream, true,
              CalledFromOrtCannProvider(__builtin_return_address(0)));
}
aclError aclrtMemsetAsync(void* p, size_t max, int32_t value, size_t n, void* stream) {
  if (n == 0) return kSuccess;
  const size_t bytes = n < max ? n : max;
  void* d = Access(p, bytes);
  if (!d) {
    FakeAclError("aclrtMemsetAsync: not device memory");
    return kInvalidParam;
  }
  return fake_cann::Enqueue(stream, [d, value, bytes] {
    std::memset(d, value, bytes);
    return 0;
  });
}

// ---- single-op descriptors, attributes and aclopCompileAndExecute: fake_aclop.cc ----

// ---- offline models (enable_cann_graph=1): refused ----
aclError aclmdlLoadFromMem(const void*, size_t, uint32_t*) { return kNotSupported; }
aclError aclmdlLoadFromFile(const char*, uint32_t*) { return kNotSupported; }
aclError aclmdlUnload(uint32_t) { return kSuccess; }
void* aclmdlCreateDesc() { return new Handle{4}; }
aclError aclmdlDestroyDesc(void* d) { delete static_cast<Handle*>(d); return kSuccess; }
aclError aclmdlGetDesc(void*, uint32_t) { return kNotSupported; }
size_t aclmdlGetNumInputs(void*) { return 0; }
size_t aclmdlGetNumOutputs(void*) { return 0; }
size_t aclmdlGetInputSizeByIndex(void*, size_t) { return 0; }
size_t aclmdlGetOutputSizeByIndex(void*, size_t) { return 0; }
aclError aclmdlGetOutputDims(const void*, size_t, void*) { return kNotSupported; }
void* aclmdlCreateDataset() { return new Handle{5}; }
aclError aclmdlDestroyDataset(const void* d) { delete static_cast<const Handle*>(d); return kSuccess; }
aclError aclmdlAddDatasetBuffer(void*, void*) { return kSuccess; }
void* aclmdlGetDatasetBuffer(const void*, size_t) { return nullptr; }
void* aclmdlGetDatasetTensorDesc(const void*, size_t) { return nullptr; }
aclError aclmdlExecute(uint32_t, const void*, void*) { return kNotSupported; }
aclError aclmdlExecuteAsync(uint32_t, const void*, void*, void*) { return kNotSupported; }

}  // extern "C"

// ---- GE graph building / ONNX parsing (graph mode): the classes' layouts as ORT inlines them ----
namespace ge {
class AscendString {
 public:
  AscendString() = default;
  AscendString(const char* name);  // NOLINT
  bool operator<(const AscendString& other) const;

 private:
  std::shared_ptr<std::string> name_;
};
AscendString::AscendString(const char* name)
    : name_(std::make_shared<std::string>(name ? name : "")) {}
bool AscendString::operator<(const AscendString& other) const {
  if (!name_ || !other.name_) return !name_ && other.name_;
  return *name_ < *other.name_;
}
class GraphImpl;
class Graph {
 public:
  explicit Graph(const char* name);

 private:
  std::shared_ptr<GraphImpl> impl_;
};
Graph::Graph(const char*) {}
struct ModelBufferData {
  std::shared_ptr<uint8_t> data;
  uint64_t length;
};
using graphStatus = uint32_t;
constexpr graphStatus kGraphFailed = 0xFFFFFFFF;
graphStatus aclgrphParseONNXFromMem(const char*, size_t,
                                    const std::map<AscendString, AscendString>&, Graph&) {
  FakeAclError("GE ONNX parsing is not available in the fake runtime (use enable_cann_graph=0)");
  return kGraphFailed;
}
graphStatus aclgrphBuildInitialize(std::map<AscendString, AscendString>&) { return 0; }
void aclgrphBuildFinalize() {}
graphStatus aclgrphBuildModel(const Graph&, const std::map<AscendString, AscendString>&,
                              ModelBufferData&) {
  return kGraphFailed;
}
graphStatus aclgrphSaveModel(const char*, const ModelBufferData&) { return kGraphFailed; }
}  // namespace ge

// ---- helpers shared with the other fakes (declared in fake_cann.h) ----
namespace fake_cann {
size_t ElementBytes(int dtype) {
  switch (dtype) {
    case kFloat: case kInt32: return 4;
    case kFloat16: case kBFloat16: return 2;
    case kInt8: case kUint8: case kBool: return 1;
    case kInt64: return 8;
    default: return 0;
  }
}
size_t DataBytes(int dtype, int64_t numel) {
  if (dtype == kInt4) return static_cast<size_t>(numel + 1) / 2;
  return static_cast<size_t>(numel) * ElementBytes(dtype);
}
std::string TypeName(int dtype) {
  switch (dtype) {
    case kFloat: return "float";
    case kFloat16: return "float16";
    case kBFloat16: return "bfloat16";
    case kInt8: return "int8";
    case kUint8: return "uint8";
    case kInt32: return "int32";
    case kInt64: return "int64";
    case kBool: return "bool";
    case kInt4: return "int4";
    default: return "dtype " + std::to_string(dtype);
  }
}
int64_t Numel(const Tensor* t) {
  int64_t n = 1;
  for (int64_t d : t->dims) n *= d;
  return n;
}
std::string DimsStr(const Tensor* t) {
  std::string s = "[";
  for (size_t i = 0; i < t->dims.size(); ++i) s += (i ? ", " : "") + std::to_string(t->dims[i]);
  return s + "]";
}
}  // namespace fake_cann
