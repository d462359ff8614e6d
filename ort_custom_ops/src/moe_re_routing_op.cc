// Placeholder until the MoeReRouting kernels land.
#include "ops.h"

namespace ascend_moe {
std::vector<const OrtCustomOp*> MoeReRoutingOps() { return {}; }
}  // namespace ascend_moe
