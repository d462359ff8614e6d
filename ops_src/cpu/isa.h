// Instruction-set paths of the CPU kernels. Each kernel's vector code is compiled once per path,
// in a translation unit of its own (<kernel>_baseline.cc, <kernel>_avx2.cc, <kernel>_avx512.cc),
// and the kernel calls the path ActiveCpuIsa() names. The baseline is the compiler's default
// target (SSE2 on x86-64, any CPU); the AVX2 and AVX-512 paths exist where the compiler supports
// function-level targets on x86-64 (GCC), so the library runs on any x86-64 CPU.
//
// A per-path translation unit, the pattern every kernel follows:
//
//   #include "ops_src/cpu/isa.h"
//   #if ASCEND_MOE_CPU_X86_PATHS            // (not in the baseline unit)
//   #include <...every header the code needs...>
//   ASCEND_MOE_CPU_TARGET_AVX2_BEGIN        // or ..._AVX512_BEGIN
//   namespace ascend_moe::cpu::<kernel>_avx2 {
//   constexpr CpuIsa kIsa = CpuIsa::kAvx2;  // the build's constants: code branches on them with
//   constexpr int kLanes = 8;               // `if constexpr`, not on the preprocessor
//   #include "<the kernel's vector code>"
//   }
//   ASCEND_MOE_CPU_TARGET_END
//   #endif
//
// Headers go before the target region so that no inline function of a library header is compiled
// for AVX2 / AVX-512 (the linker keeps one copy of each, which a baseline CPU may then execute).
#pragma once

#include <string_view>

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define ASCEND_MOE_CPU_X86_PATHS 1
#else
#define ASCEND_MOE_CPU_X86_PATHS 0
#endif

// Code between BEGIN and END is compiled for AVX2 + FMA, or AVX-512 (F, BW, DQ, VL) + AVX2 + FMA.
// GCC 12 reads the AVX-512 intrinsics' _mm512_undefined_ps() pass-through operands as
// uninitialised: those warnings are off in the AVX-512 region.
#define ASCEND_MOE_CPU_TARGET_AVX2_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma\")") _Pragma("GCC diagnostic push")
#define ASCEND_MOE_CPU_TARGET_AVX512_BEGIN                                                           \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx2,fma\")") \
      _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"")     \
          _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
// The integer dot products of int8 activations (moe_routed_experts_a8_*.cc): AVX-VNNI on top of
// AVX2, and AVX-512 VNNI on top of the AVX-512 path's extensions.
#define ASCEND_MOE_CPU_TARGET_AVXVNNI_BEGIN \
  _Pragma("GCC push_options") _Pragma("GCC target(\"avx2,fma,avxvnni\")") _Pragma("GCC diagnostic push")
#define ASCEND_MOE_CPU_TARGET_AVX512VNNI_BEGIN                                                       \
  _Pragma("GCC push_options")                                                                        \
      _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx512vnni,avx2,fma\")")              \
          _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
              _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
// The bfloat16 dot products (moe_routed_experts_bf16dot_*.cc): AVX-512 BF16 on top of the
// AVX-512 path's extensions.
#define ASCEND_MOE_CPU_TARGET_AVX512BF16_BEGIN                                                       \
  _Pragma("GCC push_options")                                                                        \
      _Pragma("GCC target(\"avx512f,avx512bw,avx512dq,avx512vl,avx512bf16,avx2,fma\")")              \
          _Pragma("GCC diagnostic push") _Pragma("GCC diagnostic ignored \"-Wmaybe-uninitialized\"") \
              _Pragma("GCC diagnostic ignored \"-Wuninitialized\"")
#define ASCEND_MOE_CPU_TARGET_END _Pragma("GCC diagnostic pop") _Pragma("GCC pop_options")

namespace ascend_moe::cpu {

// The paths, in increasing order: a CPU that runs one runs every lower one.
enum class CpuIsa : int { kBaseline = 0, kAvx2 = 1, kAvx512 = 2 };

// Whether this library has the AVX2 and AVX-512 paths (else only the baseline).
inline constexpr bool kCpuX86Paths = ASCEND_MOE_CPU_X86_PATHS != 0;

// "baseline", "avx2", "avx512".
const char* CpuIsaName(CpuIsa isa);
// The path of a name CpuIsaName gives; false (isa untouched) for any other name.
bool ParseCpuIsa(std::string_view name, CpuIsa* isa);

// The best path this CPU runs (and this library has): AVX-512 needs F, BW, DQ and VL; AVX2 needs
// AVX2 and FMA. Detected once.
CpuIsa BestCpuIsa();
// Whether this CPU runs `isa` (isa <= BestCpuIsa()).
bool CpuRuns(CpuIsa isa);

// The path the kernels use: BestCpuIsa(), lowered by the override. The override is
// SetCpuIsa's name if it was called, else the environment variable ASCEND_MOE_CPU_ISA =
// baseline | avx2 | avx512 (read once, on the first call; other values are ignored). A path
// the CPU lacks is never taken: a higher override gives BestCpuIsa().
CpuIsa ActiveCpuIsa();
// Sets the override by name (e.g. from a session configuration entry); it applies to every
// kernel of the process from their next call. False, changing nothing, for an unknown name.
bool SetCpuIsa(std::string_view name);

// Whether the CPU has AVX-VNNI (vpdpbusd on VEX-encoded 256-bit registers) / AVX-512 VNNI.
bool CpuHasAvxVnni();
bool CpuHasAvx512Vnni();
// Whether the CPU has AVX-512 BF16 (vdpbf16ps) with the AVX-512 path's extensions.
bool CpuHasAvx512Bf16();

// Whether the CPU is an AMD one (kernels pick narrower code where AMD splits 512-bit operations).
bool IsAmdCpu();

}  // namespace ascend_moe::cpu
