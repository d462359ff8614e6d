// The types of the plugin's generated tables (mapping.gen.h): an ascend.moe op's schema inputs and
// attributes, and per GE variant the GE inputs in IR order and where each GE attribute comes from.
// No GE or ONNX headers: the mapping core (mapping_core.h) builds and is tested without CANN.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ascend_moe_ge {

enum class OnnxAttrKind { kInt, kFloat };
enum class GeAttrKind { kInt, kBool, kFloat, kListInt };
enum class GeInputKind { kRequired, kOptional, kDynamic };
// kOnnx: the schema attribute of the same (or renamed) name; kFixed: a constant the schema has no
// counterpart for; kExpertRange: [start, end] from two INT attributes ({} for all experts).
enum class GeAttrSource { kOnnx, kFixed, kExpertRange };

struct OnnxInputSpec {
  const char* name;
  bool optional;
  const char* refused;  // non-null: GE has no such input; a node that gives it is refused for this reason
};

struct OnnxAttrSpec {
  const char* name;
  OnnxAttrKind kind;
  bool required;
  int64_t int_default;
  float float_default;
};

struct ValuePair {
  int64_t onnx;
  int64_t ge;
};

struct GeInputSpec {
  const char* name;
  GeInputKind kind;
  int onnx_index;  // the schema input feeding it, -1: none
  int cast_to;     // GE DataType code of the index Cast in front of it, -1: none
};

struct GeAttrSpec {
  const char* name;
  GeAttrKind kind;
  GeAttrSource source;
  int onnx_attr;   // index into the op's OnnxAttrSpec table (kOnnx, kExpertRange start)
  int onnx_attr2;  // kExpertRange end
  int64_t fixed_int;
  float fixed_float;
  const ValuePair* values;  // kOnnx INT with codes that differ: the accepted values and their GE codes
  size_t num_values;
};

struct VariantSpec {
  const char* ge_type;
  unsigned present_mask;  // schema inputs that must be given (bit = schema input index)
  unsigned absent_mask;   // schema inputs that must not be given
  const GeInputSpec* inputs;
  size_t num_inputs;
  const GeAttrSpec* attrs;
  size_t num_attrs;
  const GeInputSpec* outputs;  // GE's outputs in IR order (onnx_index: the node output)
  size_t num_outputs;
};

struct RefusedValue {
  int onnx_attr;
  int64_t value;
  const char* reason;
};

struct OpSpec {
  const char* onnx_type;
  int version;
  const char* refused;  // non-null: the whole op is refused for this reason
  const OnnxInputSpec* inputs;
  size_t num_inputs;
  const OnnxAttrSpec* attrs;
  size_t num_attrs;
  int num_outputs;
  const VariantSpec* variants;
  size_t num_variants;
  const RefusedValue* refused_values;
  size_t num_refused_values;
  bool partitioned;  // registered as PartitionedCall and expanded into a graph (Casts, variants)
};

}  // namespace ascend_moe_ge
