#include "cann_support.h"

#include "ops_src/cann/aclnn_args.h"

namespace ascend_moe {

CannDevice::CannDevice(Ort::KernelContext& ctx, size_t device_input) {
  const Ort::ConstValue input = ctx.GetInput(device_input);
  const Ort::ConstMemoryInfo memory = input.GetTensorMemoryInfo();
  allocator_ = ctx.GetAllocator(*static_cast<const OrtMemoryInfo*>(memory));
  if (allocator_ == nullptr) Fail("CANN kernel: ONNX Runtime gave no allocator for the device");
  context_.stream = ctx.GetGPUComputeStream();
  OrtAllocator* a = allocator_;
  context_.allocate = [a](size_t bytes) {
    void* p = a->Alloc(a, bytes);
    if (p == nullptr) Fail(Str("CANN kernel: the device arena could not allocate ", bytes, " bytes"));
    return p;
  };
  context_.release = [a](void* p) { a->Free(a, p); };
}

CannDevice::~CannDevice() {
  if (allocator_) Ort::GetApi().ReleaseAllocator(allocator_);
}

bool AclTypeOf(ONNXTensorElementDataType type, cann::AclDataType* out) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      *out = cann::kAclFloat;
      return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      *out = cann::kAclFloat16;
      return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      *out = cann::kAclBFloat16;
      return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      *out = cann::kAclInt8;
      return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
      *out = cann::kAclUint8;
      return true;
    default:
      return false;
  }
}

std::vector<int32_t> Int32Values(const InputView& v) {
  std::vector<int32_t> out(static_cast<size_t>(v.size));
  for (int64_t i = 0; i < v.size; ++i) {
    out[i] = v.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                 ? static_cast<int32_t>(static_cast<const int64_t*>(v.data)[i])
                 : static_cast<const int32_t*>(v.data)[i];
  }
  return out;
}

NodeLog::NodeLog(const OrtKernelInfo* info) {
  Ort::ConstKernelInfo ki(info);
  node_ = ki.GetNodeName();
  logger_ = ki.GetLogger();
}

void NodeLog::WarnOnce(const std::string& message) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!said_.insert(message).second) return;
  }
  const std::string text = Str("node '", node_, "': ", message);
  ORT_CXX_LOG_NOEXCEPT(logger_, ORT_LOGGING_LEVEL_WARNING, text.c_str());
}

bool NativeRejection::Get(std::string* reason) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason_.empty()) return false;
  *reason = reason_;
  return true;
}

void NativeRejection::Remember(const std::string& reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason_.empty()) reason_ = reason;
}

NativeOrHost::NativeOrHost(const OrtKernelInfo* info, const char* op, const char* fallback)
    : op_(op), fallback_(fallback), log_(info) {}

std::string NativeOrHost::Blocker(std::string blocker, const char* aclnn_call) const {
  if (blocker.empty()) blocker = cann::MissingAclnnOp(aclnn_call);
  if (blocker.empty()) blocker = cann::ChipBlocker(aclnn_call);
  if (blocker.empty()) rejection_.Get(&blocker);
  return blocker;
}

void NativeOrHost::Fallback(const std::string& reason) {
  log_.WarnOnce(Str(op_, " runs on the ", fallback_, ": ", reason));
}

void NativeOrHost::Reject(const std::string& reason) {
  rejection_.Remember(reason);
  Fallback(reason);
}

void NativeOrHost::Launch(const std::function<void()>& native, const std::function<void()>& host) {
  try {
    native();
  } catch (const cann::AclnnRejected& e) {
    Reject(e.what());
    host();
  }
}

void NativeOrHost::Run(const std::string& blocker, const std::function<void()>& native,
                       const std::function<void()>& host, bool log) {
  if (blocker.empty()) return Launch(native, host);
  if (log) Fallback(blocker);
  host();
}

void NativeOrHost::RunPath(cann::NativePath& path, const std::function<void()>& launch) {
  if (path.call && Rejected(&path.reason)) path.call = nullptr;
  if (!path.call) Fallback(path.reason);
  launch();
  if (path.rejected) Reject(path.reason);
}

}  // namespace ascend_moe
