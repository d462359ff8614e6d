// MoeInitRouting's validation and host computation, shared by the CPU kernel and the CANN kernel
// (its host fallback, and the validation of every call).
#pragma once

#include <array>

#include "expert_sort_ort.h"
#include "op_defs.gen.h"

namespace ascend_moe {

using InitRoutingInputs = std::array<InputView, defs::moe_init_routing::kNumIns>;

// Ranks and dims (no data is read): the kernel parameters.
cpu::MoeInitRoutingParams ValidateMoeInitRouting(const InitRoutingInputs& in,
                                                 const defs::moe_init_routing::Attrs& attrs);
// The expert ids (in [0, 2^31 - 1)), then row_idx (a permutation of [0, N*K)), host memory.
void CheckMoeInitRoutingIndices(const InitRoutingInputs& in, const cpu::MoeInitRoutingParams& params);
// Validates (CheckMoeInitRoutingIndices included) and computes on host memory.
void ComputeMoeInitRouting(Ort::KernelContext& ctx, const InitRoutingInputs& in,
                           const defs::moe_init_routing::Attrs& attrs, const HostOutputFn& output);

}  // namespace ascend_moe
