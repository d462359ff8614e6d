// GroupedMatmul input validation (docs/operators.md §4.3) beyond what the generated table checks,
// shared by every execution provider's kernel: errors name the input and the offending value
// (the messages of onnx_schemas.grouped_matmul).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/grouped_matmul.h"

namespace ascend_moe {

namespace gmm = defs::grouped_matmul;

inline constexpr int64_t kCumsum = 0, kCount = 1;  // group_list_type values

using GroupedMatmulInputs = std::array<InputView, gmm::kNumIns>;

// "bias must be x's type or float", the one type rule the generated tables cannot state. Empty
// when it holds or either type is unknown (UNDEFINED).
std::string CheckGroupedMatmulBiasType(ONNXTensorElementDataType x, ONNXTensorElementDataType bias);

// Ranks and dims of the inputs, the bias type rule (the table checked presence and the other
// types; no data is read): the kernel parameters.
cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const GroupedMatmulInputs& in, const gmm::Attrs& attrs);

// The group ends from group_list's values (host memory), checked in index order (the first fault
// is reported).
std::vector<int64_t> GroupedMatmulEnds(const InputView& group_list, int64_t rows, int64_t group_list_type);

}  // namespace ascend_moe
