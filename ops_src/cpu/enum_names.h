// One table per mapping of a small enum of the kernels, read by lookup instead of a switch: the
// names of instruction-set paths, dot-product kinds and chips (read both ways: logs and
// `moe-onnx info`, environment variables and session configuration entries), and the ACL types
// of the kernels' element types.
#pragma once

#include <cstddef>
#include <string_view>

namespace ascend_moe {

template <typename Enum, typename Value>
struct EnumValue {
  Enum key;
  Value value;
};
template <typename Enum>
using EnumName = EnumValue<Enum, const char*>;

// The value of `key` in `table`; `otherwise` when the table lacks it.
template <typename Enum, typename Value, size_t N>
Value ValueOf(const EnumValue<Enum, Value> (&table)[N], Enum key, Value otherwise) {
  for (const EnumValue<Enum, Value>& entry : table) {
    if (entry.key == key) return entry.value;
  }
  return otherwise;
}

// The name of `value` in `names`; `unknown` when the table lacks it.
template <typename Enum, size_t N>
const char* NameOf(const EnumName<Enum> (&names)[N], Enum value, const char* unknown) {
  return ValueOf(names, value, unknown);
}

// The value named `name` in `names`; false (value untouched) for any other name.
template <typename Enum, size_t N>
bool ParseName(const EnumName<Enum> (&names)[N], std::string_view name, Enum* value) {
  for (const EnumName<Enum>& entry : names) {
    if (name == entry.value) {
      *value = entry.key;
      return true;
    }
  }
  return false;
}

}  // namespace ascend_moe
