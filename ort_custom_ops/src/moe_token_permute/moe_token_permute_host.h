// MoeTokenPermute's validation and host computation, shared by the CPU kernel and the CANN kernel
// (its host fallback, and the validation of every call).
#pragma once

#include <array>

#include "expert_sort_ort.h"
#include "op_defs.gen.h"

namespace ascend_moe {

using TokenPermuteInputs = std::array<InputView, defs::moe_token_permute::kNumIns>;

// Ranks and dims (no data is read): the kernel parameters, num_out_rows resolved.
cpu::MoeInitRoutingParams ValidateMoeTokenPermute(const InputView& tokens, const InputView& indices,
                                                  const defs::moe_token_permute::Attrs& attrs);
// Validates (the ids too) and computes on host memory; rows on the session's intra-op pool.
void ComputeMoeTokenPermute(Ort::KernelContext& ctx, const TokenPermuteInputs& in,
                            const defs::moe_token_permute::Attrs& attrs, const HostOutputFn& output);

}  // namespace ascend_moe
