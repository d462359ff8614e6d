// Finds the CANN entry points at run time with dlopen/dlsym, in the order Ascend's own op-plugin
// (torch_npu) searches: a custom operator package first, then the vendors' packages, then CANN's
// operator libraries, then the runtime. Nothing is loaded until a kernel first needs it.
#pragma once

#include <string>
#include <vector>

#include "ops_src/cann/acl.h"

namespace ascend_moe::cann {

// Environment variable naming the libraries to search instead of the default order
// (':'-separated paths or sonames).
inline constexpr const char* kLibrariesEnv = "ASCEND_MOE_CANN_LIBRARIES";

// CANN's operator libraries by area, searched after libopapi.so in op-plugin's order
// (op_plugin/utils/op_api_common.cpp, GetOpApiFuncAddrFromFeatureLib).
inline constexpr const char* kFeatureLibraries[] = {"libaclnn_ops_infer.so", "libaclnn_ops_train.so",
                                                    "libaclnn_math.so",      "libaclnn_sparse.so",
                                                    "libaclnn_fft.so",       "libaclnn_rand.so"};

// The libraries searched, in order: $ASCEND_MOE_CANN_LIBRARIES if set; otherwise
//   $ASCEND_CUSTOM_OPP_PATH/op_api/lib/libcust_opapi.so (each ':'-separated entry),
//   $ASCEND_OPP_PATH/vendors/<v>/op_api/lib/libcust_opapi.so for each vendor v in the
//     load_priority line of $ASCEND_OPP_PATH/vendors/config.ini,
//   $ASCEND_HOME_PATH/lib64/libopapi*.so (sorted),
//   libopapi.so, then op-plugin's last resort, CANN's per-area operator libraries
//     (kFeatureLibraries), then libnnopbase.so, libascendcl.so (the dynamic loader's search).
std::vector<std::string> CandidateLibraries();

// Where a symbol was found (library non-empty), or every library tried and why it did not serve.
struct SymbolLookup {
  void* address = nullptr;
  std::string library;
  std::vector<std::string> tried;  // "path (reason)"
  std::string Describe() const;    // "found in X" or "not found; tried: ..."
};

// Searches CandidateLibraries() now (not cached): the first library that defines `symbol`.
SymbolLookup LocateSymbol(const char* symbol);

// Searched once per process and remembered. Null when absent; `why` (if given) then says what
// was tried.
void* FindSymbol(const char* symbol, std::string* why = nullptr);
// FindSymbol that throws std::runtime_error "CANN runtime unavailable: ..." when the symbol is absent.
void* RequireSymbol(const char* symbol);
// RequireSymbol as a function of type Fn.
template <typename Fn>
Fn RequireSymbolAs(const char* symbol) {
  return reinterpret_cast<Fn>(RequireSymbol(symbol));
}

// The runtime entry points every launch needs (libascendcl.so / libnnopbase.so).
struct AclRuntime {
  AclrtMemcpyAsyncFn memcpy_async = nullptr;
  AclrtMemcpyFn memcpy = nullptr;
  AclrtSynchronizeStreamFn synchronize_stream = nullptr;
  AclGetRecentErrMsgFn recent_error = nullptr;  // may be null
  AclrtGetSocNameFn get_soc_name = nullptr;     // may be null
  AclrtMallocHostFn malloc_host = nullptr;      // page-locked host memory; both null or both set
  AclrtFreeHostFn free_host = nullptr;
  AclCreateTensorFn create_tensor = nullptr;
  AclDestroyTensorFn destroy_tensor = nullptr;
  // The staging pool's events (device.h, HostBuffer).
  AclrtCreateEventFn create_event = nullptr;
  AclrtRecordEventFn record_event = nullptr;
  AclrtQueryEventStatusFn query_event = nullptr;
  AclrtDestroyEventFn destroy_event = nullptr;
  AclInitFn init = nullptr;          // may be null
  AclFinalizeFn finalize = nullptr;  // may be null
};
// Resolved on first use; throws std::runtime_error naming the missing symbol and every library
// tried.
const AclRuntime& Runtime();

}  // namespace ascend_moe::cann
