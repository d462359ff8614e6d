// MoeReRouting input validation (docs/operators.md §2.3) beyond what the generated table checks,
// shared by every execution provider's kernel: errors name the input and the offending value.
#pragma once

#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_re_routing.h"

namespace ascend_moe {

namespace rerouting_defs = defs::moe_re_routing;

// Checks ranks and dims of the inputs (the generated table checked presence and element types;
// no data is read) and returns the kernel parameters. `scales.present` false means no
// per_token_scales. The attribute rules are rerouting_defs::CheckAttrs (run by ReadAttrs):
// expert_token_num_type 1 = per-expert counts, 0 = inclusive prefix sums; idx_type 0 = gather
// index, 1 = scatter index.
cpu::MoeReRoutingParams ValidateMoeReRoutingShapes(const InputView& tokens, const InputView& counts,
                                                   const InputView& scales,
                                                   const rerouting_defs::Attrs& attrs);

// Checks the count values (host memory): every count >= 0 and their exact sum equals A.
void ValidateMoeReRoutingCounts(const cpu::MoeReRoutingParams& params, const void* counts);

}  // namespace ascend_moe
