#include "ops_src/cann/loader.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace ascend_moe::cann {

namespace {

std::string Env(const char* name) {
  const char* v = std::getenv(name);
  return v ? std::string(v) : std::string();
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> parts;
  std::string cur;
  std::istringstream in(s);
  while (std::getline(in, cur, sep)) {
    // trim spaces
    const size_t b = cur.find_first_not_of(" \t\r"), e = cur.find_last_not_of(" \t\r");
    if (b != std::string::npos) parts.push_back(cur.substr(b, e - b + 1));
  }
  return parts;
}

// Vendor names of the load_priority line in $ASCEND_OPP_PATH/vendors/config.ini.
std::vector<std::string> VendorPriority(const std::string& opp) {
  std::ifstream ini(opp + "/vendors/config.ini");
  std::string line;
  while (std::getline(ini, line)) {
    const size_t eq = line.find('=');
    if (eq == std::string::npos) continue;
    const std::vector<std::string> key = Split(line.substr(0, eq), ' ');
    if (key.size() == 1 && key[0] == "load_priority") return Split(line.substr(eq + 1), ',');
  }
  return {};
}

// dlopen once per path; the handles stay open for the process lifetime. RTLD_LAZY as op-plugin
// opens the operator libraries: a library whose unused functions need a symbol this process
// lacks still serves the ones it has.
void* Open(const std::string& path, std::string* error) {
  static std::mutex mu;
  static std::map<std::string, void*> handles;
  std::lock_guard<std::mutex> lock(mu);
  auto it = handles.find(path);
  if (it != handles.end() && it->second) return it->second;
  void* h = dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    *error = e ? e : "cannot open";
    return nullptr;
  }
  handles[path] = h;
  return h;
}

}  // namespace

std::vector<std::string> CandidateLibraries() {
  const std::string override_list = Env(kLibrariesEnv);
  if (!override_list.empty()) return Split(override_list, ':');
  std::vector<std::string> libs;
  for (const std::string& dir : Split(Env("ASCEND_CUSTOM_OPP_PATH"), ':')) {
    libs.push_back(dir + "/op_api/lib/libcust_opapi.so");
  }
  const std::string opp = Env("ASCEND_OPP_PATH");
  if (!opp.empty()) {
    for (const std::string& vendor : VendorPriority(opp)) {
      libs.push_back(opp + "/vendors/" + vendor + "/op_api/lib/libcust_opapi.so");
    }
  }
  const std::string home = Env("ASCEND_HOME_PATH");
  if (!home.empty()) {
    glob_t g{};
    if (glob((home + "/lib64/libopapi*.so").c_str(), 0, nullptr, &g) == 0) {
      for (size_t i = 0; i < g.gl_pathc; ++i) libs.push_back(g.gl_pathv[i]);  // glob sorts
    }
    globfree(&g);
  }
  for (const char* soname : {"libopapi.so"}) libs.push_back(soname);
  for (const char* soname : kFeatureLibraries) libs.push_back(soname);
  for (const char* soname : {"libnnopbase.so", "libascendcl.so"}) libs.push_back(soname);
  return libs;
}

std::string SymbolLookup::Describe() const {
  if (address) return "found in " + library;
  std::string s = "not found; tried: ";
  for (size_t i = 0; i < tried.size(); ++i) s += (i ? ", " : "") + tried[i];
  if (tried.empty()) s += "(no library)";
  return s;
}

SymbolLookup LocateSymbol(const char* symbol) {
  SymbolLookup result;
  for (const std::string& lib : CandidateLibraries()) {
    std::string error;
    void* h = Open(lib, &error);
    if (!h) {
      result.tried.push_back(lib + " (" + error + ")");
      continue;
    }
    dlerror();
    void* address = dlsym(h, symbol);
    if (address) {
      result.address = address;
      result.library = lib;
      return result;
    }
    result.tried.push_back(lib + " (no " + symbol + ")");
  }
  return result;
}

void* FindSymbol(const char* symbol, std::string* why) {
  static std::mutex mu;
  static std::map<std::string, SymbolLookup> cache;
  std::lock_guard<std::mutex> lock(mu);
  auto it = cache.find(symbol);
  if (it == cache.end()) it = cache.emplace(symbol, LocateSymbol(symbol)).first;
  if (!it->second.address && why) *why = std::string(symbol) + " " + it->second.Describe();
  return it->second.address;
}

void* RequireSymbol(const char* symbol) {
  std::string why;
  void* p = FindSymbol(symbol, &why);
  if (!p) throw std::runtime_error("CANN runtime unavailable: " + why);
  return p;
}

const AclRuntime& Runtime() {
  static const AclRuntime runtime = [] {
    AclRuntime r;
    auto require = [](const char* symbol) { return RequireSymbol(symbol); };
    r.memcpy_async = reinterpret_cast<AclrtMemcpyAsyncFn>(require("aclrtMemcpyAsync"));
    r.memcpy = reinterpret_cast<AclrtMemcpyFn>(require("aclrtMemcpy"));
    r.synchronize_stream = reinterpret_cast<AclrtSynchronizeStreamFn>(require("aclrtSynchronizeStream"));
    r.create_tensor = reinterpret_cast<AclCreateTensorFn>(require("aclCreateTensor"));
    r.destroy_tensor = reinterpret_cast<AclDestroyTensorFn>(require("aclDestroyTensor"));
    r.create_event = reinterpret_cast<AclrtCreateEventFn>(require("aclrtCreateEvent"));
    r.record_event = reinterpret_cast<AclrtRecordEventFn>(require("aclrtRecordEvent"));
    r.query_event = reinterpret_cast<AclrtQueryEventStatusFn>(require("aclrtQueryEventStatus"));
    r.destroy_event = reinterpret_cast<AclrtDestroyEventFn>(require("aclrtDestroyEvent"));
    r.init = reinterpret_cast<AclInitFn>(FindSymbol("aclInit"));
    r.finalize = reinterpret_cast<AclFinalizeFn>(FindSymbol("aclFinalize"));
    r.recent_error = reinterpret_cast<AclGetRecentErrMsgFn>(FindSymbol("aclGetRecentErrMsg"));
    r.get_soc_name = reinterpret_cast<AclrtGetSocNameFn>(FindSymbol("aclrtGetSocName"));
    r.malloc_host = reinterpret_cast<AclrtMallocHostFn>(FindSymbol("aclrtMallocHost"));
    r.free_host = reinterpret_cast<AclrtFreeHostFn>(FindSymbol("aclrtFreeHost"));
    if (!r.malloc_host || !r.free_host) {
      r.malloc_host = nullptr;
      r.free_host = nullptr;
    }
    return r;
  }();
  return runtime;
}

size_t AclElementBytes(AclDataType type) {
  switch (type) {
    case kAclFloat:
    case kAclInt32:
      return 4;
    case kAclFloat16:
    case kAclBFloat16:
      return 2;
    case kAclInt8:
    case kAclUint8:
    case kAclBool:
      return 1;
    case kAclInt64:
      return 8;
  }
  return 0;
}

const char* AclTypeName(AclDataType type) {
  switch (type) {
    case kAclFloat:
      return "float";
    case kAclFloat16:
      return "float16";
    case kAclBFloat16:
      return "bfloat16";
    case kAclInt8:
      return "int8";
    case kAclUint8:
      return "uint8";
    case kAclInt32:
      return "int32";
    case kAclInt64:
      return "int64";
    case kAclBool:
      return "bool";
    case kAclInt4:
      return "int4";
  }
  return "unknown";
}

}  // namespace ascend_moe::cann
