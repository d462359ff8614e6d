// CPU detection and the instruction-set override (isa.h).
#include "ops_src/cpu/isa.h"

#include <atomic>
#include <cstdlib>

#include "ops_src/cpu/enum_names.h"

namespace ascend_moe::cpu {

namespace {

#if ASCEND_MOE_CPU_X86_PATHS
CpuIsa DetectBestIsa() {
  __builtin_cpu_init();
  if (!__builtin_cpu_supports("avx2") || !__builtin_cpu_supports("fma")) return CpuIsa::kBaseline;
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl")) {
    return CpuIsa::kAvx512;
  }
  return CpuIsa::kAvx2;
}
bool DetectAmd() {
  __builtin_cpu_init();
  return __builtin_cpu_is("amd");
}
bool DetectAvxVnni() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && __builtin_cpu_supports("avxvnni");
}
bool DetectAvx512Vnni() {
  __builtin_cpu_init();
  return DetectBestIsa() == CpuIsa::kAvx512 && __builtin_cpu_supports("avx512vnni");
}
bool DetectAvx512Bf16() {
  __builtin_cpu_init();
  return DetectBestIsa() == CpuIsa::kAvx512 && __builtin_cpu_supports("avx512bf16");
}
#else
CpuIsa DetectBestIsa() { return CpuIsa::kBaseline; }
bool DetectAvx512Bf16() { return false; }
bool DetectAmd() { return false; }
bool DetectAvxVnni() { return false; }
bool DetectAvx512Vnni() { return false; }
#endif

// ASCEND_MOE_CPU_ISA, read once; kAvx512 (no lowering) when unset or unknown.
CpuIsa EnvironmentIsa() {
  static const CpuIsa isa = [] {
    CpuIsa wanted = CpuIsa::kAvx512;
    const char* name = std::getenv("ASCEND_MOE_CPU_ISA");
    if (name != nullptr) ParseCpuIsa(name, &wanted);
    return wanted;
  }();
  return isa;
}

constexpr int kNoOverride = -1;
std::atomic<int> set_isa{kNoOverride};  // SetCpuIsa's path

}  // namespace

namespace {
constexpr EnumName<CpuIsa> kCpuIsaNames[] = {
    {CpuIsa::kBaseline, "baseline"}, {CpuIsa::kAvx2, "avx2"}, {CpuIsa::kAvx512, "avx512"}};
}  // namespace

const char* CpuIsaName(CpuIsa isa) { return NameOf(kCpuIsaNames, isa, "baseline"); }

bool ParseCpuIsa(std::string_view name, CpuIsa* isa) { return ParseName(kCpuIsaNames, name, isa); }

CpuIsa BestCpuIsa() {
  static const CpuIsa best = DetectBestIsa();
  return best;
}

bool CpuRuns(CpuIsa isa) { return static_cast<int>(isa) <= static_cast<int>(BestCpuIsa()); }

CpuIsa ActiveCpuIsa() {
  const int set = set_isa.load(std::memory_order_relaxed);
  const CpuIsa wanted = set != kNoOverride ? static_cast<CpuIsa>(set) : EnvironmentIsa();
  return CpuRuns(wanted) ? wanted : BestCpuIsa();
}

bool SetCpuIsa(std::string_view name) {
  CpuIsa isa;
  if (!ParseCpuIsa(name, &isa)) return false;
  set_isa.store(static_cast<int>(isa), std::memory_order_relaxed);
  return true;
}

bool CpuHasAvxVnni() {
  static const bool has = DetectAvxVnni();
  return has;
}

bool CpuHasAvx512Vnni() {
  static const bool has = DetectAvx512Vnni();
  return has;
}

bool CpuHasAvx512Bf16() {
  static const bool has = DetectAvx512Bf16();
  return has;
}

bool IsAmdCpu() {
  static const bool amd = DetectAmd();
  return amd;
}

}  // namespace ascend_moe::cpu
