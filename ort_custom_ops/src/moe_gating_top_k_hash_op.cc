// Placeholder until the MoeGatingTopKHash kernels land.
#include "ops.h"

namespace ascend_moe {
std::vector<const OrtCustomOp*> MoeGatingTopKHashOps() { return {}; }
}  // namespace ascend_moe
