// MoeRoutedExperts with bfloat16 weights on bfloat16 dot products (AVX-512 BF16's vdpbf16ps):
// the x rows and the SwiGLU rows are rounded to bfloat16 once, and each 32-bit lane of a product
// step adds the two products of its bfloat16 pair to a float32 accumulator (docs/quantization.md,
// bfloat16 experts). The weights are read in place: their natural order pairs inputs 2j, 2j + 1 in
// one dword, as vdpbf16ps reads them, so nothing is repacked. Knows nothing of ONNX Runtime or torch.
#pragma once

#include <cstdint>

#include "ops_src/cpu/isa.h"
#include "ops_src/cpu/moe_routed_experts/moe_routed_experts_paths.h"

namespace ascend_moe::cpu {

// How a plan with bfloat16 weights multiplies.
enum class Bf16Dot : int {
  kWiden = 0,       // the ISA path's float tiles on weights widened to float32 (any CPU)
  kEmulated = 1,    // AVX2 code computing vdpbf16ps's steps exactly (tests the path on any AVX2 CPU)
  kAvx512Bf16 = 2,  // vdpbf16ps on 256-bit registers (AVX-512 BF16 + VL)
};
const char* Bf16DotName(Bf16Dot dot);
// The path under ActiveCpuIsa(): vdpbf16ps where the CPU has AVX-512 BF16 and the AVX-512 path is
// active, else the widening tiles; ASCEND_MOE_CPU_BF16_DOT = widen | emulated-bf16 | avx512bf16
// (read once; a path the CPU cannot run is ignored) picks another for tests and benchmarks.
Bf16Dot ActiveBf16Dot();
// The same for the ISA path `isa` (a plan forced onto another path, MoeRoutedExpertsPlan::UseIsa).
Bf16Dot Bf16DotOn(CpuIsa isa);

// Phase 1 for one expert: actb[q * I + i] (bfloat16 bits) = the SwiGLU of gate/up rows 2i, 2i+1 of
// fc1 ([2I, H] bfloat16) applied to X[q] (bfloat16 rows) with `glu`, for i in [i0, i1); `dots`: scratch of
// 2 (i1 - i0) n floats.
using Bf16UpRowsFn = void(const uint16_t* fc1, int64_t H, const uint16_t* const* X, int64_t n, int64_t i0,
                          int64_t i1, const ExpertGlu& glu, uint16_t* actb, int64_t I, float* dots);
// Phase 2 for one expert: Y[q][h] += scale[q] * (row h of fc2 ([H, I] bfloat16) . A[q]), h in [h0, h1).
using Bf16DownRowsFn = void(const uint16_t* fc2, int64_t I, const uint16_t* const* A, const float* scale,
                            float* const* Y, int64_t n, int64_t h0, int64_t h1);

Bf16UpRowsFn* Bf16UpRowsOf(Bf16Dot dot);
Bf16DownRowsFn* Bf16DownRowsOf(Bf16Dot dot);

}  // namespace ascend_moe::cpu
