// Each op returns its kernels, one static OrtCustomOp per execution provider, all under the same
// op name; constructing them registers the op's manifest entry. No ORT API call is made.
#pragma once

#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"

namespace ascend_moe {

std::vector<const OrtCustomOp*> MoeGatingTopKHashOps();
std::vector<const OrtCustomOp*> MoeReRoutingOps();
std::vector<const OrtCustomOp*> MoeRoutedExpertsOps();  // CPU only
std::vector<const OrtCustomOp*> MoeFinalizeRoutingV2Ops();  // CPU only
std::vector<const OrtCustomOp*> MoeTokenUnpermuteOps();  // CPU only

// Every op of the library, in registration order.
inline std::vector<const OrtCustomOp*> AllOps() {
  std::vector<const OrtCustomOp*> ops;
  for (auto* op : MoeGatingTopKHashOps()) ops.push_back(op);
  for (auto* op : MoeReRoutingOps()) ops.push_back(op);
  for (auto* op : MoeRoutedExpertsOps()) ops.push_back(op);
  for (auto* op : MoeFinalizeRoutingV2Ops()) ops.push_back(op);
  for (auto* op : MoeTokenUnpermuteOps()) ops.push_back(op);
  return ops;
}

}  // namespace ascend_moe
