// MoeFinalizeRoutingV2 and MoeTokenUnpermute (moe_token_unpermute_validate.cc) input validation (docs/operators.md §8.3, §9.3): errors
// name the input or attribute and the offending value, worded as onnx_schemas' validators.
#pragma once

#include <string>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/moe_finalize_routing_v2.h"

namespace ascend_moe {

namespace finalize_defs = defs::moe_finalize_routing_v2;
namespace unpermute_defs = defs::moe_token_unpermute;

// Shared by both ops' validation (moe_finalize_routing_v2_validate.cc).
[[noreturn]] void FailInput(const char* op, const char* name, const std::string& what_and_value);
cpu::RowType RowTypeOf(ONNXTensorElementDataType t);
cpu::IndexType IndexTypeOf(ONNXTensorElementDataType t);
// The element types again at run time (kernel creation checked the graph's declared types).
void CheckTypes(const char* op, const ParamSpec* specs, size_t n, const InputView* inputs);

// The error for an invalid drop_pad_mode / padded_mode; empty when valid.
std::string CheckDropPadMode(int64_t drop_pad_mode);
std::string CheckPaddedMode(int64_t padded_mode);

// Checks types, ranks, dims and index values of one call; returns the kernel parameters and
// fills the buffers' input pointers. `inputs` are indexed like the op's inputs.
cpu::WeightedGatherParams ValidateMoeFinalizeRoutingV2(const InputView* inputs, int64_t drop_pad_mode,
                                                       cpu::WeightedGatherBuffers* buffers);
cpu::WeightedGatherParams ValidateMoeTokenUnpermute(const InputView* inputs, cpu::WeightedGatherBuffers* buffers);

}  // namespace ascend_moe
