// The fake's streams: where kernels and asynchronous copies run (fake_cann::Enqueue). At once by
// default; with FAKE_ACL_ASYNC=1 queued per stream and run at the synchronisation points listed in
// fake_cann.h, so that a kernel library reading a download before synchronising, or freeing a
// staging buffer a queued copy still uses, fails its tests.
#include <cctype>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "fake_cann.h"

namespace fake_cann {

namespace {

constexpr int kRtParamInvalid = 107000;  // ACL_ERROR_RT_PARAM_INVALID (rt_error_codes.h)

struct Task {
  std::function<int()> work;
  HostRange host;
  int failed = kOk;  // set when its host memory was freed while queued
  std::string why;
};

std::mutex g_mu;
struct Counts {
  uint64_t enqueued = 0, run = 0;
};
std::map<const void*, Counts>& TaskCounts() {
  static auto* c = new std::map<const void*, Counts>;
  return *c;
}
std::map<const void*, std::deque<std::shared_ptr<Task>>>& Queues() {
  static auto* q = new std::map<const void*, std::deque<std::shared_ptr<Task>>>;
  return *q;
}

// The next task of `stream` (of any stream when `all`), taken off its queue; null when none.
std::shared_ptr<Task> Next(const void* stream, bool all, const void** of) {
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [s, queue] : Queues()) {
    if ((all || s == stream) && !queue.empty()) {
      std::shared_ptr<Task> t = queue.front();
      queue.pop_front();
      *of = s;
      return t;
    }
  }
  return nullptr;
}

}  // namespace

long Switch(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::strtol(v, nullptr, 0) : 0;
}

const char* SocName() {
  const char* v = std::getenv("FAKE_ACL_SOC_NAME");
  return v && *v ? v : "Ascend910B1";
}

bool SocHasMoeKernels() {
  std::string s = SocName();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto starts = [&](const char* p) { return s.rfind(p, 0) == 0; };
  if (starts("ascend910b")) return s.size() > 10 && std::isdigit(static_cast<unsigned char>(s[10]));
  return starts("ascend910_93") || starts("ascend910_95") || starts("ascend950");
}

uint64_t TasksEnqueued(const void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  return TaskCounts()[stream].enqueued;
}
uint64_t TasksRun(const void* stream) {
  std::lock_guard<std::mutex> lock(g_mu);
  return TaskCounts()[stream].run;
}

bool SocHasKernelsOf(const char* op) {
  std::string s = SocName();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  auto starts = [&](const char* p) { return s.rfind(p, 0) == 0; };
  const bool b910 = starts("ascend910b") && s.size() > 10 && std::isdigit(static_cast<unsigned char>(s[10]));
  const bool b93 = starts("ascend910_93"), b95 = starts("ascend910_95") || starts("ascend950");
  const bool p310 = starts("ascend310p");
  const std::string name = op;
  if (name == "aclnnGroupedMatmulV4" || name == "aclnnMoeTokenUnpermute") return b910 || b93 || p310;
  if (name == "aclnnMoeTokenPermute") return b910 || b93;
  if (name == "aclnnSwiGlu") return b910 || b93 || p310 || b95;
  return b910 || b93 || b95;  // the other MoE operators
}

bool SocIs310P() {
  std::string s = SocName();
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s.rfind("ascend310p", 0) == 0;
}

int Enqueue(const void* stream, std::function<int()> work, HostRange host) {
  {
    std::lock_guard<std::mutex> lock(g_mu);
    ++TaskCounts()[stream].enqueued;
  }
  if (!Switch("FAKE_ACL_ASYNC")) {
    const int earlier = Drain(stream);  // work queued while the switch was on comes first
    const int status = work();
    std::lock_guard<std::mutex> lock(g_mu);
    ++TaskCounts()[stream].run;
    return earlier != kOk ? earlier : status;
  }
  auto task = std::make_shared<Task>();
  task->work = std::move(work);
  task->host = host;
  std::lock_guard<std::mutex> lock(g_mu);
  Queues()[stream].push_back(std::move(task));
  return kOk;
}

int Drain(const void* stream, bool all) {
  int first = kOk;
  const void* of = nullptr;
  while (std::shared_ptr<Task> t = Next(stream, all, &of)) {
    int status = t->failed;
    if (status != kOk) {
      FakeAclError(t->why.c_str());
    } else {
      status = t->work();
    }
    {
      std::lock_guard<std::mutex> lock(g_mu);
      ++TaskCounts()[of].run;
    }
    if (first == kOk) first = status;
  }
  return first;
}

int FailTasksUsing(const void* p, size_t bytes, const char* why) {
  const auto lo = reinterpret_cast<uintptr_t>(p), hi = lo + bytes;
  int n = 0;
  std::lock_guard<std::mutex> lock(g_mu);
  for (auto& [s, queue] : Queues()) {
    for (auto& t : queue) {
      const auto b = reinterpret_cast<uintptr_t>(t->host.begin), e = b + t->host.bytes;
      if (t->host.bytes && b < hi && lo < e && t->failed == kOk) {
        t->failed = kRtParamInvalid;
        t->why = std::string(why) + " (a copy queued on stream " +
                 std::to_string(reinterpret_cast<uintptr_t>(s)) + " still used it: synchronise first)";
        ++n;
      }
    }
  }
  return n;
}

}  // namespace fake_cann

extern "C" int FakeAclPendingTasks(const void* stream) {
  std::lock_guard<std::mutex> lock(fake_cann::g_mu);
  int n = 0;
  for (auto& [s, queue] : fake_cann::Queues()) {
    if (!stream || s == stream) n += static_cast<int>(queue.size());
  }
  return n;
}
