// SwiGlu CPU kernel (docs/operators.md §11): y = silu(a) * b with (a, b) the two halves of x
// along one axis. Plain C++ over raw pointers: x is read as [outer, 2 * inner] (inner = the
// half-axis size times the trailing dims), y is [outer, inner].
#pragma once

#include <cstdint>

namespace ascend_moe::cpu {

enum class SwiGluType { kFloat32, kFloat16, kBFloat16 };

struct SwiGluParams {
  SwiGluType type = SwiGluType::kFloat32;
  int64_t outer = 0;  // product of the dims before the axis
  int64_t inner = 0;  // half the axis times the product of the dims after it
};

// Rows [row_begin, row_end) of the outer dimension (float16 / bfloat16 computed in float32,
// rounded once).
void SwiGluRows(const SwiGluParams& p, const void* x, void* y, int64_t row_begin, int64_t row_end);

}  // namespace ascend_moe::cpu
