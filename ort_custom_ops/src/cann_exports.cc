// Diagnostic entry point of the CANN support (tools and tests): where the CANN kernels' loader
// finds an entry point in this process's environment.
#include <string>

#include "ops_src/cann/loader.h"

// "found in <library>" or "not found; tried: <library> (<why>), ..."; searched now, not cached.
// The returned text stays valid until the next call from the same thread.
extern "C" __attribute__((visibility("default"))) const char* AscendMoeCannLocate(const char* symbol) {
  thread_local std::string text;
  text = ascend_moe::cann::LocateSymbol(symbol ? symbol : "").Describe();
  return text.c_str();
}
