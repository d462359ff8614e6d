// A C interface to the mapping core (mapping_core.h) for tests and tools without CANN: the
// Python harness (tests/test_ge_plugin.py) loads it through ctypes.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "mapping.gen.h"
#include "mapping_core.h"

namespace {
int Copy(const std::string& text, char* out, int cap) {
  if (out != nullptr && cap > 0) {
    const size_t n = std::min(text.size(), static_cast<size_t>(cap - 1));
    std::memcpy(out, text.data(), n);
    out[n] = '\0';
  }
  return static_cast<int>(text.size());
}
}  // namespace

extern "C" {

// DescribePlan of the node (origin_type, attribute JSON, input names) into `out`; returns the
// text's length (call again with a larger buffer when it is >= cap), -1 for an unknown op.
__attribute__((visibility("default"))) int ascend_moe_ge_plan(const char* origin_type, const char* attr_json,
                                                              const char* const* inputs, int num_inputs, char* out,
                                                              int cap) {
  const ascend_moe_ge::OpSpec* op = ascend_moe_ge::FindOp(origin_type);
  if (op == nullptr) return -1;
  std::vector<std::string> names;
  for (int k = 0; k < num_inputs; ++k) names.emplace_back(inputs[k]);
  return Copy(ascend_moe_ge::DescribePlan(ascend_moe_ge::PlanNode(*op, attr_json, names)), out, cap);
}

// One line per registration the plugin makes: "<registered GE type> <origin type>".
__attribute__((visibility("default"))) int ascend_moe_ge_registrations(char* out, int cap) {
  std::string text;
  for (const ascend_moe_ge::OpSpec* op : ascend_moe_ge::kOps)
    text += std::string(ascend_moe_ge::RegisteredType(*op)) + " " + ascend_moe_ge::OriginType(*op) + "\n";
  return Copy(text, out, cap);
}
}
