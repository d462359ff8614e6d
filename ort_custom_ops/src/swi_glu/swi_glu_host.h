// SwiGlu's validation, shared by the CPU kernel and the CANN kernel (whose host fallback runs the
// CPU computation).
#pragma once

#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/swi_glu.h"

namespace ascend_moe {

namespace swiglu = defs::swi_glu;

// Checks dim against x's rank and the even split; returns the kernel parameters and fills
// `y_shape` (x's shape with the axis halved) and `axis` (dim made non-negative).
cpu::SwiGluParams ValidateSwiGlu(const InputView& x, const swiglu::Attrs& attrs,
                                 std::vector<int64_t>* y_shape, int64_t* axis);

// Runs the CPU kernel over the outer rows on the session's intra-op pool.
void RunSwiGlu(Ort::KernelContext& ctx, const cpu::SwiGluParams& p, const void* x, void* y);

}  // namespace ascend_moe
