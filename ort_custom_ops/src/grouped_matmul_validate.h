// GroupedMatmul attribute and input validation (docs/operators.md §4.3): errors name the input or
// attribute and the offending value (the messages of onnx_schemas.grouped_matmul).
#pragma once

#include <string>
#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace gmm_defs = defs::grouped_matmul;

struct GroupedMatmulAttrs {
  int64_t group_list_type = 0;  // read through the generated table (its default)
  int64_t transpose_weight = 0;
};

// The message for invalid attribute values; empty when they are valid.
std::string CheckGroupedMatmulAttrs(const GroupedMatmulAttrs& attrs);

// "bias must be x's type or float", the one type rule the generated tables cannot state. Empty
// when it holds or either type is unknown (UNDEFINED).
std::string CheckGroupedMatmulBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias);

// Presence, element types, ranks and dims of the inputs (no data read); the kernel parameters.
cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const InputView& x, const InputView& weight,
                                                     const InputView& group_list, const InputView& bias,
                                                     const GroupedMatmulAttrs& attrs);

// The E group ends from group_list's values, checked in index order (the first fault is reported).
std::vector<int64_t> GroupedMatmulEnds(const InputView& group_list, int64_t rows, int64_t group_list_type);

}  // namespace ascend_moe
