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

// The libraries searched, in order: $ASCEND_MOE_CANN_LIBRARIES if set; otherwise
//   $ASCEND_CUSTOM_OPP_PATH/op_api/lib/libcust_opapi.so (each ':'-separated entry),
//   $ASCEND_OPP_PATH/vendors/<v>/op_api/lib/libcust_opapi.so for each vendor v in the
//     load_priority line of $ASCEND_OPP_PATH/vendors/config.ini,
//   $ASCEND_HOME_PATH/lib64/libopapi*.so (sorted),
//   libopapi.so, libnnopbase.so, libascendcl.so (the dynamic loader's search).
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

// The runtime entry points every launch needs (libascendcl.so / libnnopbase.so).
struct AclRuntime {
  AclrtMemcpyAsyncFn memcpy_async = nullptr;
  AclrtMemcpyFn memcpy = nullptr;
  AclrtSynchronizeStreamFn synchronize_stream = nullptr;
  AclGetRecentErrMsgFn recent_error = nullptr;  // may be null
  AclCreateTensorFn create_tensor = nullptr;
  AclDestroyTensorFn destroy_tensor = nullptr;
};
// Resolved on first use; throws std::runtime_error naming the missing symbol and every library
// tried.
const AclRuntime& Runtime();

}  // namespace ascend_moe::cann
