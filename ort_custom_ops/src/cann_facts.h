// The facts `moe-onnx info` knows of a node ("name=value ..." text: attributes and what is known
// of the inputs), as the CANN path predictions read them (cann_exports.cc).
#pragma once

#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include "op_utils.h"

namespace ascend_moe {

using Facts = std::map<std::string, std::string>;

// "name=value name=value ..." -> {name: value}.
inline Facts ParseFacts(const char* text) {
  Facts facts;
  std::istringstream in(text ? text : "");
  std::string item;
  while (in >> item) {
    const size_t eq = item.find('=');
    if (eq != std::string::npos) facts[item.substr(0, eq)] = item.substr(eq + 1);
  }
  return facts;
}

inline int64_t IntFact(const Facts& facts, const std::string& name, int64_t unknown) {
  const auto it = facts.find(name);
  return it == facts.end() ? unknown : std::stoll(it->second);
}

inline std::string StringFact(const Facts& facts, const std::string& name) {
  const auto it = facts.find(name);
  return it == facts.end() ? std::string() : it->second;
}

// The element type an ONNX type name ("float16") names; UNDEFINED for none.
inline ONNXTensorElementDataType TypeNamed(const Facts& facts, const std::string& name) {
  const auto it = facts.find(name);
  if (it == facts.end()) return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  for (int t = 1; t <= ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2FNUZ; ++t) {
    const auto type = static_cast<ONNXTensorElementDataType>(t);
    if (it->second == TypeName(type)) return type;
  }
  return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

// The path of the MoE op family's nodes (cann_family_paths.cc): false when `op` is not one of
// them. Otherwise *call is the ACLNN operator and *reason empty, or *reason says why the fallback
// runs. Facts: GroupedMatmul x_type, weight_type, bias_type, scale_type, output_dtype, experts,
// antiquant_groups; MoeRoutedExperts swiglu_limit, experts, weight_type, weight_bits;
// MoeInitRoutingV3 its attributes; MoeFinalizeRoutingV2 x_type, scales_type, k, experts (bias
// rows); MoeTokenPermute / MoeTokenUnpermute k; MoeInitRouting active_num; SwiGlu rank.
bool FamilyBlocker(const std::string& op, const Facts& facts, const char** call, std::string* reason);

}  // namespace ascend_moe
