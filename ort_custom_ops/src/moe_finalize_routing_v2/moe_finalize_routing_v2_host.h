// MoeFinalizeRoutingV2's validation, shared by the CPU kernel and the CANN kernel.
#pragma once

#include <array>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/weighted_gather.h"

namespace ascend_moe {

namespace finalize = defs::moe_finalize_routing_v2;

using FinalizeRoutingV2Inputs = std::array<InputView, finalize::kNumIns>;

// Ranks and dims (the table checked presence and element types), then the index values (host
// memory: expanded_row_idx and expert_idx); returns the kernel parameters and fills the buffers'
// inputs with the views' data pointers.
cpu::WeightedGatherParams ValidateMoeFinalizeRoutingV2(const FinalizeRoutingV2Inputs& in,
                                                       int64_t drop_pad_mode,
                                                       cpu::WeightedGatherBuffers* buffers);

}  // namespace ascend_moe
