// MoeTokenUnpermute's validation, shared by the CPU kernel and the CANN kernel.
#pragma once

#include <array>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/weighted_gather.h"

namespace ascend_moe {

namespace unpermute = defs::moe_token_unpermute;

using TokenUnpermuteInputs = std::array<InputView, unpermute::kNumIns>;

// Ranks and dims, then the indices of the slots that are read (host memory: sorted_indices and
// probs); returns the kernel parameters and fills the buffers' inputs with the views' pointers.
cpu::WeightedGatherParams ValidateMoeTokenUnpermute(const TokenUnpermuteInputs& in,
                                                    cpu::WeightedGatherBuffers* buffers);

}  // namespace ascend_moe
