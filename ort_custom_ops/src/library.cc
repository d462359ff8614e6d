// Entry points of the custom-op library: RegisterCustomOps (called by ONNX Runtime through
// SessionOptions.register_custom_ops_library) and AscendMoeOpsManifest (for tests and tools).
#include <mutex>

#define ORT_STR_(x) #x
#define ORT_STR(x) ORT_STR_(x)

#include "ops.h"

#define ASCEND_MOE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The domain must outlive every session that uses it; ORT only keeps a pointer.
Ort::CustomOpDomain& Domain() {
  static Ort::CustomOpDomain* domain = [] {
    auto* d = new Ort::CustomOpDomain(ascend_moe::defs::kDomain);
    for (const OrtCustomOp* op : ascend_moe::AllOps()) d->Add(op);
    return d;
  }();
  return *domain;
}

}  // namespace

ASCEND_MOE_EXPORT OrtStatus* ORT_API_CALL RegisterCustomOps(OrtSessionOptions* options,
                                                            const OrtApiBase* api_base) {
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    // The runtime is older than the headers this library was built with; API 1 can still say so.
    return api_base->GetApi(1)->CreateStatus(
        ORT_FAIL, "ascend.moe custom ops: this ONNX Runtime is older than the headers the library "
                  "was built with (ORT_API_VERSION " ORT_STR(ORT_API_VERSION) ")");
  }
  Ort::InitApi(api);
  try {
    static std::mutex mu;
    std::lock_guard<std::mutex> lock(mu);
    Ort::UnownedSessionOptions session_options(options);
    session_options.Add(Domain());
  } catch (const Ort::Exception& e) {
    return api->CreateStatus(e.GetOrtErrorCode(), e.what());
  } catch (const std::exception& e) {
    return api->CreateStatus(ORT_FAIL, e.what());
  }
  return nullptr;
}

// Names, inputs, outputs and attributes (kinds, defaults) as the C++ kernels use them (JSON); valid for the process lifetime.
ASCEND_MOE_EXPORT const char* AscendMoeOpsManifest() {
  static std::string json;
  static std::once_flag once;
  std::call_once(once, [] {
    (void)ascend_moe::AllOps();  // constructing the ops registers their manifest entries
    json = ascend_moe::ManifestJson(ascend_moe::defs::kDomain);
  });
  return json.c_str();
}
