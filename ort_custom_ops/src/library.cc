// Entry points of the custom-op library: RegisterCustomOps (called by ONNX Runtime through
// SessionOptions.register_custom_ops_library) and AscendMoeOpsManifest (for tests and tools).
#include <array>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <mutex>
#include <string>

#define ORT_STR_(x) #x
#define ORT_STR(x) ORT_STR_(x)

#include "op_defs.gen.h"

#define ASCEND_MOE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

// The oldest ONNX Runtime the library supports (also in pyproject.toml, ort_custom_ops/__init__.py
// and the README; a test keeps them equal). Older runtimes crash in their custom-op shape
// inference for a node with an absent optional input before a present one (fixed in 1.24).
#define ASCEND_MOE_MIN_ORT "1.24.1"

// (major, minor, patch) of a "major.minor.patch..." string; {-1, -1, -1} if it is not one.
// A missing patch number reads as 0; anything after the last number read is ignored.
std::array<int, 3> ParseVersion(const char* text) {
  constexpr std::array<int, 3> kInvalid{-1, -1, -1};
  if (text == nullptr) return kInvalid;
  std::array<int, 3> v{0, 0, 0};
  const char* p = text;
  size_t parsed = 0;
  for (; parsed < v.size(); ++parsed) {
    if (parsed > 0) {
      if (*p != '.') break;
      ++p;
    }
    char* end = nullptr;
    errno = 0;
    const long n = std::strtol(p, &end, 10);
    if (end == p || errno == ERANGE || n < INT_MIN || n > INT_MAX) break;
    v[parsed] = static_cast<int>(n);
    p = end;
  }
  return parsed < 2 ? kInvalid : v;
}

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
  const char* version = api_base->GetVersionString();
  if (ParseVersion(version) < ParseVersion(ASCEND_MOE_MIN_ORT)) {
    // API 1 exists in every runtime: enough to report the problem instead of crashing later.
    const std::string msg = std::string("ascend.moe custom ops need ONNX Runtime >= " ASCEND_MOE_MIN_ORT
                                        ", this process runs ONNX Runtime ") +
                            (version ? version : "(unknown version)");
    return api_base->GetApi(1)->CreateStatus(ORT_FAIL, msg.c_str());
  }
  const OrtApi* api = api_base->GetApi(ORT_API_VERSION);
  if (api == nullptr) {
    // The runtime is older than the headers this library was built with; API 1 can still say so.
    return api_base->GetApi(1)->CreateStatus(
        ORT_FAIL,
        "ascend.moe custom ops: this ONNX Runtime is older than the headers the library "
        "was built with (ORT_API_VERSION " ORT_STR(ORT_API_VERSION) ")");
  }
  Ort::InitApi(api);
  const std::array<int, 3> v = ParseVersion(version);
  ascend_moe::SetRuntimeVersion(v[0], v[1], v[2]);
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

// The oldest supported ONNX Runtime version, "major.minor.patch" (for tests and tools).
ASCEND_MOE_EXPORT const char* AscendMoeMinOrtVersion() { return ASCEND_MOE_MIN_ORT; }

// Names, inputs, outputs and attributes (kinds, defaults) as the C++ kernels use them (JSON); valid for the
// process lifetime.
ASCEND_MOE_EXPORT const char* AscendMoeOpsManifest() {
  static std::string json;
  static std::once_flag once;
  std::call_once(once, [] {
    (void)ascend_moe::AllOps();  // constructing the ops registers their manifest entries
    json = ascend_moe::ManifestJson(ascend_moe::defs::kDomain);
  });
  return json.c_str();
}
