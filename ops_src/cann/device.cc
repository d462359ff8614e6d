#include "ops_src/cann/device.h"

#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>

#include "ops_src/cann/loader.h"

namespace ascend_moe::cann {

DeviceBuffer::DeviceBuffer(const DeviceContext& ctx, size_t bytes) : ctx_(ctx) {
  data_ = ctx_.allocate(bytes ? bytes : 1);
}

DeviceBuffer::~DeviceBuffer() {
  if (data_) ctx_.release(data_);
}

// One pinned host block of the staging pool.
struct StagingBlock {
  void* data = nullptr;
  size_t capacity = 0;
  bool pinned = false;
  bool leased = false;
  void* event = nullptr;   // recorded after the last copy queued from the block (UploadTo)
  bool in_flight = false;  // that copy may not have run yet
};

namespace {

// Blocks up to this size stay in the pool when given back; larger ones (a fallback's weights)
// are freed once their copies have run.
constexpr size_t kPooledBlockMax = size_t{16} << 20;
constexpr size_t kSmallestBlock = 4096;

// The process's staging blocks. Never destroyed: at exit CANN may already be finalised.
class StagingPool {
 public:
  static StagingPool& Get() {
    static auto* pool = new StagingPool;
    return *pool;
  }

  StagingBlock* Take(size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      FreeRetiredLocked();
      StagingBlock* best = nullptr;
      for (const auto& b : blocks_) {
        if (!b->leased && b->capacity >= bytes && (!best || b->capacity < best->capacity) &&
            ReadyLocked(b.get())) {
          best = b.get();
        }
      }
      if (best) {
        best->leased = true;
        return best;
      }
    }
    auto block = std::make_unique<StagingBlock>();
    size_t capacity = kSmallestBlock;
    while (capacity < bytes) capacity *= 2;
    Allocate(block.get(), capacity);
    block->leased = true;
    std::lock_guard<std::mutex> lock(mu_);
    blocks_.push_back(std::move(block));
    return blocks_.back().get();
  }

  // `stream` null: reusable at once; else once the work queued on it so far has run.
  void Give(StagingBlock* b, AclStream stream) noexcept {
    const AclRuntime& rt = Runtime();
    if (stream) {
      int status = b->event ? 0 : rt.create_event(&b->event);
      if (status == 0) status = rt.record_event(b->event, stream);
      if (status != 0) {  // cannot tell when the copy ran: keep the block out of use
        ReleaseChecked(status, "aclrtRecordEvent (staging block kept out of use)");
        return;
      }
    }
    std::lock_guard<std::mutex> lock(mu_);
    b->in_flight = stream != nullptr;
    b->leased = false;
    if (b->capacity > kPooledBlockMax) FreeRetiredLocked();
  }

 private:
  static void Allocate(StagingBlock* b, size_t capacity) {
    const AclRuntime& rt = Runtime();
    b->capacity = capacity;
    if (rt.malloc_host) {
      CheckAcl(rt.malloc_host(&b->data, capacity), "aclrtMallocHost");
      b->pinned = true;
      return;
    }
    b->data = std::aligned_alloc(kDeviceCopyAlign, capacity);
    if (!b->data) throw std::bad_alloc();
  }

  // Whether the block's last copy has run (aclrtQueryEventStatus).
  static bool ReadyLocked(StagingBlock* b) noexcept {
    if (!b->in_flight) return true;
    int recorded = 0;  // aclrtEventRecordedStatus: 0 not ready, 1 complete
    const int status = Runtime().query_event(b->event, &recorded);
    if (status != 0) {
      ReleaseChecked(status, "aclrtQueryEventStatus");
      return false;
    }
    if (recorded == kAclEventRecordedComplete) b->in_flight = false;
    return !b->in_flight;
  }

  // Frees the large blocks given back whose copies have run.
  void FreeRetiredLocked() noexcept {
    const AclRuntime& rt = Runtime();
    for (auto it = blocks_.begin(); it != blocks_.end();) {
      StagingBlock* b = it->get();
      if (b->leased || b->capacity <= kPooledBlockMax || !ReadyLocked(b)) {
        ++it;
        continue;
      }
      if (b->event) ReleaseChecked(rt.destroy_event(b->event), "aclrtDestroyEvent");
      if (b->pinned) {
        ReleaseChecked(rt.free_host(b->data), "aclrtFreeHost");
      } else {
        std::free(b->data);
      }
      it = blocks_.erase(it);
    }
  }

  std::mutex mu_;
  std::vector<std::unique_ptr<StagingBlock>> blocks_;
};

}  // namespace

HostBuffer::HostBuffer(size_t bytes) : bytes_(bytes) {
  block_ = StagingPool::Get().Take(bytes ? bytes : 1);
  data_ = block_->data;
}

HostBuffer::~HostBuffer() { StagingPool::Get().Give(block_, queued_ ? queued_on_ : nullptr); }

void HostBuffer::UploadTo(const DeviceContext& ctx, void* device, size_t bytes) {
  CopyAsync(ctx, device, data_, bytes, kHostToDevice);
  queued_on_ = ctx.stream;
  queued_ = bytes > 0;
}

void CheckAcl(int status, const std::string& what) {
  if (status == 0) return;
  const AclRuntime& rt = Runtime();
  const char* msg = rt.recent_error ? rt.recent_error() : nullptr;
  throw std::runtime_error(what + " failed with ACL/ACLNN status " + std::to_string(status) +
                           (msg && *msg ? std::string(": ") + msg : std::string()));
}

void CopyAsync(const DeviceContext& ctx, void* dst, const void* src, size_t bytes, AclMemcpyKind kind) {
  if (bytes == 0) return;
  CheckAcl(Runtime().memcpy_async(dst, bytes, src, bytes, kind, ctx.stream), "aclrtMemcpyAsync");
}

void CopySync(void* dst, const void* src, size_t bytes, AclMemcpyKind kind) {
  if (bytes == 0) return;
  CheckAcl(Runtime().memcpy(dst, bytes, src, bytes, kind), "aclrtMemcpy");
}

void Synchronize(const DeviceContext& ctx) {
  CheckAcl(Runtime().synchronize_stream(ctx.stream), "aclrtSynchronizeStream");
}

void UploadStaged(const DeviceContext& ctx, void* device, const void* host, size_t bytes) {
  if (bytes == 0) return;
  HostBuffer staging(bytes);
  std::memcpy(staging.get(), host, bytes);
  staging.UploadTo(ctx, device, bytes);
}

bool IsAclnnRejection(AclnnStatus status) {
  return status == kAclnnParamInvalid || (status >= kAclnnInnerFirst && status <= kAclnnInnerLast);
}

AclnnPrepared PrepareAclnn(const char* name,
                           const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare) {
  AclnnPrepared prepared;
  const AclnnStatus status = prepare(&prepared.workspace_size, &prepared.executor);
  const std::string what = std::string(name) + "GetWorkspaceSize";
  if (status != 0 && IsAclnnRejection(status)) {
    try {
      CheckAcl(status, what);
    } catch (const std::runtime_error& e) {
      prepared.rejected = e.what();
    }
    return prepared;
  }
  CheckAcl(status, what);
  return prepared;
}

void LaunchAclnn(const DeviceContext& ctx, const char* name, const AclnnPrepared& prepared, AclnnRunFn run) {
  if (prepared.workspace_size > 0) {
    DeviceBuffer workspace(ctx, prepared.workspace_size);
    CheckAcl(run(workspace.get(), prepared.workspace_size, prepared.executor, ctx.stream), name);
  } else {
    CheckAcl(run(nullptr, 0, prepared.executor, ctx.stream), name);
  }
}

void RunAclnn(const DeviceContext& ctx, const char* name,
              const std::function<AclnnStatus(uint64_t*, AclOpExecutor**)>& prepare, AclnnRunFn run) {
  const AclnnPrepared prepared = PrepareAclnn(name, prepare);
  if (!prepared.rejected.empty()) throw std::runtime_error(prepared.rejected);
  LaunchAclnn(ctx, name, prepared, run);
}

}  // namespace ascend_moe::cann
