// GroupedMatmul input validation (docs/operators.md §4.3) beyond what the generated table checks,
// shared by every execution provider's kernel: errors name the input and the offending value
// (the messages of onnx_schemas.grouped_matmul).
#pragma once

#include <array>
#include <string>
#include <vector>

#include "op_defs.gen.h"
#include "op_utils.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

namespace ascend_moe {

namespace gmm = defs::grouped_matmul;

inline constexpr int64_t kCumsum = 0, kCount = 1;  // group_list_type values

// The element types and packing the GroupedMatmul rules speak of (shape inference, validation).
namespace gmm_types {
inline constexpr int64_t kInt4PerWord = 8;  // int4 weights: 8 per int32 word
inline constexpr ONNXTensorElementDataType kFloat = ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
inline constexpr ONNXTensorElementDataType kInt8 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8;
inline constexpr ONNXTensorElementDataType kInt32 = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
inline constexpr ONNXTensorElementDataType kNone = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}  // namespace gmm_types

using GroupedMatmulInputs = std::array<InputView, gmm::kNumIns>;

// The element types of the inputs, in gmm::In order (UNDEFINED: absent).
using GroupedMatmulTypeList = std::array<ONNXTensorElementDataType, gmm::kNumIns>;
GroupedMatmulTypeList GroupedMatmulGraphTypes(const std::vector<GraphTensor>& inputs);
GroupedMatmulTypeList GroupedMatmulViewTypes(const GroupedMatmulInputs& in);

// float: x and weight of one float type; kAntiquant: float x with int8 / int4 (int32 words)
// weights and antiquant_scale (W8A16 / W4A16); kW8A8: int8 x and weight, dequantised by scale
// and per_token_scale into output_dtype's type.
enum class GmmMode { kFloat, kAntiquant, kW8A8 };

// y's type for an output_dtype value (UNDEFINED for 0 and unknown values).
ONNXTensorElementDataType GroupedMatmulOutputType(int64_t output_dtype);

struct GroupedMatmulTypes {
  GmmMode mode = GmmMode::kFloat;
  ONNXTensorElementDataType y = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::string error;  // the first rule broken, empty when all hold
};

// The type rules the generated table cannot state (docs/operators.md §4.3; the order and messages
// of onnx_schemas.grouped_matmul.mode_and_output_type), after the table's checks.
GroupedMatmulTypes CheckGroupedMatmulTypes(const GroupedMatmulTypeList& types, int64_t output_dtype);

// The type rules (fails with the first broken one), ranks and dims of the inputs (no data is
// read): the kernel parameters.
cpu::GroupedMatmulParams ValidateGroupedMatmulShapes(const GroupedMatmulInputs& in, const gmm::Attrs& attrs);

// The group ends from group_list's values (host memory), checked in index order (the first fault
// is reported).
std::vector<int64_t> GroupedMatmulEnds(const InputView& group_list, int64_t rows, int64_t group_list_type);

// The generated definition plus y's type, which output_dtype decides for int8 x, and the type rules.
struct GroupedMatmulDef : gmm::Def {
  static std::vector<ONNXTensorElementDataType> OutputTypes(const OrtKernelInfo* info,
                                                            const std::vector<GraphTensor>& inputs) {
    const int64_t output_dtype = ReadIntAttr(info, gmm::kName, gmm::kAttrs[gmm::kAttrOutputDtype]);
    const ONNXTensorElementDataType x = inputs[gmm::kInX].type;
    // int8 x without output_dtype: float, as shape inference declares it (the constructor refuses the node)
    const ONNXTensorElementDataType y =
        x != ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 ? x
        : GroupedMatmulOutputType(output_dtype) != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED
            ? GroupedMatmulOutputType(output_dtype)
            : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
    return {y};
  }
  // The type rules fail at session creation too (the table's checks ran already).
  static void CheckNode(const OrtKernelInfo* info, const std::vector<GraphTensor>& inputs) {
    const int64_t output_dtype = ReadIntAttr(info, gmm::kName, gmm::kAttrs[gmm::kAttrOutputDtype]);
    const GroupedMatmulTypes types = CheckGroupedMatmulTypes(GroupedMatmulGraphTypes(inputs), output_dtype);
    if (!types.error.empty()) Fail(types.error);
  }
};

}  // namespace ascend_moe
