// The GE plugin's mapping logic (mapping_core.h): a small JSON reader for the parser's attribute
// string and the interpretation of the generated tables.
#include "mapping_core.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>

#include "mapping.gen.h"

namespace ascend_moe_ge {
namespace {

// ---- a JSON value and reader (objects, arrays, strings, numbers, true/false/null)
struct Json {
  enum Type { kNull, kBool, kNumber, kString, kArray, kObject } type = kNull;
  bool b = false;
  std::string text;  // kNumber: as written; kString: unescaped
  std::vector<Json> items;
  std::vector<std::pair<std::string, Json>> members;

  const Json* Find(const std::string& key) const {
    for (const auto& m : members)
      if (m.first == key) return &m.second;
    return nullptr;
  }
};

class Reader {
 public:
  explicit Reader(const std::string& s) : s_(s) {}

  Json Document() {
    Json v = Value(0);
    Space();
    if (pos_ != s_.size()) Fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& what) const {
    throw std::runtime_error("attribute JSON: " + what + " at offset " + std::to_string(pos_));
  }
  void Space() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\n' || s_[pos_] == '\r' || s_[pos_] == '\t')) ++pos_;
  }
  bool Eat(char c) {
    Space();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void Expect(char c) {
    if (!Eat(c)) Fail(std::string("expected '") + c + "'");
  }
  bool Word(const char* w) {
    const std::string word(w);
    if (s_.compare(pos_, word.size(), word) == 0) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  std::string String() {
    Expect('"');
    std::string out;
    while (pos_ < s_.size() && s_[pos_] != '"') {
      char c = s_[pos_++];
      if (c != '\\') {
        out += c;
        continue;
      }
      if (pos_ >= s_.size()) Fail("unterminated escape");
      c = s_[pos_++];
      switch (c) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'u': {
          if (pos_ + 4 > s_.size()) Fail("short \\u escape");
          const unsigned long code = std::strtoul(s_.substr(pos_, 4).c_str(), nullptr, 16);
          pos_ += 4;
          if (code < 0x80) {
            out += static_cast<char>(code);
          } else if (code < 0x800) {
            out += static_cast<char>(0xC0 | (code >> 6));
            out += static_cast<char>(0x80 | (code & 0x3F));
          } else {
            out += static_cast<char>(0xE0 | (code >> 12));
            out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
            out += static_cast<char>(0x80 | (code & 0x3F));
          }
          break;
        }
        default: out += c;  // \" \\ \/
      }
    }
    if (pos_ >= s_.size()) Fail("unterminated string");
    ++pos_;
    return out;
  }

  Json Value(int depth) {
    if (depth > 32) Fail("nested too deeply");
    Space();
    Json v;
    if (pos_ >= s_.size()) Fail("unexpected end");
    const char c = s_[pos_];
    if (c == '{') {
      ++pos_;
      v.type = Json::kObject;
      if (Eat('}')) return v;
      do {
        Space();
        std::string key = String();
        Expect(':');
        v.members.emplace_back(std::move(key), Value(depth + 1));
      } while (Eat(','));
      Expect('}');
    } else if (c == '[') {
      ++pos_;
      v.type = Json::kArray;
      if (Eat(']')) return v;
      do {
        v.items.push_back(Value(depth + 1));
      } while (Eat(','));
      Expect(']');
    } else if (c == '"') {
      v.type = Json::kString;
      v.text = String();
    } else if (Word("true")) {
      v.type = Json::kBool;
      v.b = true;
    } else if (Word("false")) {
      v.type = Json::kBool;
    } else if (Word("null")) {
      v.type = Json::kNull;
    } else {
      const size_t start = pos_;
      while (pos_ < s_.size() && std::string("+-0123456789.eE").find(s_[pos_]) != std::string::npos) ++pos_;
      if (pos_ == start) Fail("unexpected character");
      v.type = Json::kNumber;
      v.text = s_.substr(start, pos_ - start);
    }
    return v;
  }

  const std::string& s_;
  size_t pos_ = 0;
};

// ONNX AttributeProto.AttributeType numbers and names (the parser writes enums as numbers).
constexpr int kOnnxFloat = 1, kOnnxInt = 2;

int AttrTypeOf(const Json& type) {
  if (type.type == Json::kNumber) return std::atoi(type.text.c_str());
  if (type.type == Json::kString) {
    if (type.text == "FLOAT") return kOnnxFloat;
    if (type.text == "INT") return kOnnxInt;
    return -1;
  }
  return 0;
}

bool ParseInt(const Json& v, int64_t* out) {
  if (v.type != Json::kNumber && v.type != Json::kString) return false;
  errno = 0;
  char* end = nullptr;
  const long long value = std::strtoll(v.text.c_str(), &end, 10);
  if (errno != 0 || end == v.text.c_str() || *end != '\0') return false;
  *out = value;
  return true;
}

bool ParseFloat(const Json& v, float* out) {
  if (v.type != Json::kNumber && v.type != Json::kString) return false;
  char* end = nullptr;
  const float value = std::strtof(v.text.c_str(), &end);
  if (end == v.text.c_str() || *end != '\0') return false;
  *out = value;
  return true;
}

struct AttrValues {
  std::vector<bool> given;
  std::vector<int64_t> ints;
  std::vector<float> floats;
};

std::string Where(const OpSpec& op) { return OriginType(op); }

// The node's attribute values by schema attribute; throws with the reason on anything off-schema.
AttrValues ReadAttrs(const OpSpec& op, const std::string& attr_json) {
  AttrValues a;
  a.given.assign(op.num_attrs, false);
  a.ints.resize(op.num_attrs);
  a.floats.resize(op.num_attrs);
  for (size_t k = 0; k < op.num_attrs; ++k) {
    a.ints[k] = op.attrs[k].int_default;
    a.floats[k] = op.attrs[k].float_default;
  }
  const size_t first = attr_json.find_first_not_of(" \t\r\n");
  const bool none = first == std::string::npos || attr_json.compare(first, 4, "null") == 0;
  const Json doc = none ? Json() : Reader(attr_json).Document();
  const Json* list = doc.type == Json::kObject ? doc.Find("attribute") : &doc;
  static const Json kEmpty = [] {
    Json j;
    j.type = Json::kArray;
    return j;
  }();
  if (list == nullptr || list->type == Json::kNull) list = &kEmpty;  // a node without attributes
  if (list->type != Json::kArray) throw std::runtime_error("attribute JSON: 'attribute' is not a list");
  for (const Json& item : list->items) {
    const Json* name = item.Find("name");
    if (item.type != Json::kObject || name == nullptr || name->type != Json::kString)
      throw std::runtime_error("attribute JSON: an attribute without a name");
    size_t k = 0;
    while (k < op.num_attrs && name->text != op.attrs[k].name) ++k;
    if (k == op.num_attrs)
      throw std::runtime_error("attribute '" + name->text + "' is not an attribute of " + Where(op));
    const OnnxAttrSpec& spec = op.attrs[k];
    const Json* type = item.Find("type");
    const int kind = type != nullptr ? AttrTypeOf(*type) : 0;
    const int want = spec.kind == OnnxAttrKind::kInt ? kOnnxInt : kOnnxFloat;
    if (kind != 0 && kind != want)
      throw std::runtime_error("attribute '" + name->text + "' must be " +
                               (want == kOnnxInt ? "an INT" : "a FLOAT") + ", got attribute type " + std::to_string(kind));
    if (spec.kind == OnnxAttrKind::kInt) {
      const Json* v = item.Find("i");
      int64_t value = 0;  // an INT written without `i` is 0 (protobuf's default)
      if (v != nullptr && !ParseInt(*v, &value))
        throw std::runtime_error("attribute '" + name->text + "': '" + v->text + "' is not an integer");
      a.ints[k] = value;
    } else {
      const Json* v = item.Find("f");
      float value = 0.0f;
      if (v != nullptr && !ParseFloat(*v, &value))
        throw std::runtime_error("attribute '" + name->text + "': '" + v->text + "' is not a float");
      a.floats[k] = value;
    }
    a.given[k] = true;
  }
  for (size_t k = 0; k < op.num_attrs; ++k)
    if (op.attrs[k].required && !a.given[k])
      throw std::runtime_error("required attribute '" + std::string(op.attrs[k].name) + "' is missing");
  return a;
}

std::string KindName(GeAttrKind kind) {
  switch (kind) {
    case GeAttrKind::kInt: return "Int";
    case GeAttrKind::kBool: return "Bool";
    case GeAttrKind::kFloat: return "Float";
    case GeAttrKind::kListInt: return "ListInt";
  }
  return "?";
}

NodePlan Plan(const OpSpec& op, const std::string& attr_json, const std::vector<std::string>& input_names) {
  NodePlan plan;
  if (op.refused != nullptr) throw std::runtime_error(op.refused);
  if (input_names.size() > op.num_inputs)
    throw std::runtime_error("the node has " + std::to_string(input_names.size()) + " inputs, " + Where(op) +
                             " at most " + std::to_string(op.num_inputs));
  unsigned given = 0;
  for (size_t k = 0; k < op.num_inputs; ++k) {
    const bool present = k < input_names.size() && !input_names[k].empty();
    if (present) given |= 1u << k;
    if (present && op.inputs[k].refused != nullptr)
      throw std::runtime_error("input '" + std::string(op.inputs[k].name) + "' is given: " + op.inputs[k].refused);
    if (!present && !op.inputs[k].optional)
      throw std::runtime_error("required input '" + std::string(op.inputs[k].name) + "' is missing");
  }
  const AttrValues a = ReadAttrs(op, attr_json);
  for (size_t r = 0; r < op.num_refused_values; ++r) {
    const RefusedValue& rv = op.refused_values[r];
    if (a.ints[rv.onnx_attr] == rv.value)
      throw std::runtime_error("attribute '" + std::string(op.attrs[rv.onnx_attr].name) + "' = " +
                               std::to_string(rv.value) + ": " + rv.reason);
  }
  const VariantSpec* variant = nullptr;
  for (size_t v = 0; v < op.num_variants && variant == nullptr; ++v)
    if ((given & op.variants[v].present_mask) == op.variants[v].present_mask && (given & op.variants[v].absent_mask) == 0)
      variant = &op.variants[v];
  if (variant == nullptr) {
    std::string needs;
    for (size_t v = 0; v < op.num_variants; ++v) {
      std::string with, without;
      for (size_t k = 0; k < op.num_inputs; ++k) {
        if (op.variants[v].present_mask & (1u << k)) with += std::string(with.empty() ? "" : ", ") + op.inputs[k].name;
        if (op.variants[v].absent_mask & (1u << k)) without += std::string(without.empty() ? "" : ", ") + op.inputs[k].name;
      }
      needs += std::string(needs.empty() ? "" : "; ") + op.variants[v].ge_type + " needs " +
               (with.empty() ? "" : "inputs " + with) + (with.empty() || without.empty() ? "" : " and ") +
               (without.empty() ? "" : "none of " + without);
    }
    throw std::runtime_error("no GE operator takes this combination of inputs (" + needs + ")");
  }
  plan.ge_type = variant->ge_type;
  plan.partitioned = op.partitioned;
  for (size_t g = 0; g < variant->num_outputs; ++g) {
    const GeInputSpec& out = variant->outputs[g];
    plan.outputs.push_back({out.name, out.kind, out.onnx_index, -1});
  }
  for (size_t g = 0; g < variant->num_inputs; ++g) {
    const GeInputSpec& in = variant->inputs[g];
    const bool present = in.onnx_index >= 0 && (given & (1u << in.onnx_index));
    plan.inputs.push_back({in.name, in.kind, present ? in.onnx_index : -1, present ? in.cast_to : -1});
  }
  for (size_t g = 0; g < variant->num_attrs; ++g) {
    const GeAttrSpec& spec = variant->attrs[g];
    AttrPlan attr;
    attr.name = spec.name;
    attr.kind = spec.kind;
    if (spec.source == GeAttrSource::kFixed) {
      attr.i = spec.fixed_int;
      attr.f = spec.fixed_float;
    } else if (spec.source == GeAttrSource::kExpertRange) {
      const int64_t start = a.ints[spec.onnx_attr], end = a.ints[spec.onnx_attr2];
      if (end != -1) {
        attr.list = {start, end};
      } else if (start != 0) {
        // -1: up to expert_num; GE's range needs the number written out
        int64_t experts = -1;
        for (size_t k = 0; k < op.num_attrs; ++k)
          if (std::string(op.attrs[k].name) == "expert_num") experts = a.ints[k];
        if (experts <= 0)
          throw std::runtime_error("active_expert_start " + std::to_string(start) +
                                   " with active_expert_end -1 needs expert_num for GE's active_expert_range");
        attr.list = {start, experts};
      }  // else {}: every expert, GE's default
    } else if (spec.kind == GeAttrKind::kFloat) {
      attr.f = a.floats[spec.onnx_attr];
    } else {
      int64_t value = a.ints[spec.onnx_attr];
      if (spec.values != nullptr) {
        size_t v = 0;
        while (v < spec.num_values && spec.values[v].onnx != value) ++v;
        if (v == spec.num_values)
          throw std::runtime_error("attribute '" + std::string(op.attrs[spec.onnx_attr].name) + "' = " +
                                   std::to_string(value) + " has no GE " + spec.name + " code");
        value = spec.values[v].ge;
      }
      if (spec.kind == GeAttrKind::kBool && value != 0 && value != 1)
        throw std::runtime_error("attribute '" + std::string(op.attrs[spec.onnx_attr].name) + "' = " +
                                 std::to_string(value) + ": GE's " + spec.name + " is a Bool (0 or 1)");
      attr.i = value;
    }
    plan.attrs.push_back(std::move(attr));
  }
  return plan;
}

}  // namespace

const OpSpec* FindOp(const std::string& origin_type) {
  for (const OpSpec* op : kOps)
    if (OriginType(*op) == origin_type) return op;
  return nullptr;
}

const char* RegisteredType(const OpSpec& op) {
  if (op.partitioned) return "PartitionedCall";
  return op.num_variants > 0 ? op.variants[0].ge_type : op.onnx_type;
}

std::string OriginType(const OpSpec& op) {
  return std::string(kDomain) + "::" + std::to_string(op.version) + "::" + op.onnx_type;
}

NodePlan PlanNode(const OpSpec& op, const std::string& attr_json, const std::vector<std::string>& input_names) {
  try {
    return Plan(op, attr_json, input_names);
  } catch (const std::exception& e) {
    NodePlan refused;
    refused.error = OriginType(op) + ": " + e.what();
    return refused;
  }
}

std::string DescribePlan(const NodePlan& plan) {
  std::ostringstream out;
  if (!plan.error.empty()) {
    out << "refused " << plan.error << "\n";
    return out.str();
  }
  out << "op " << plan.ge_type << (plan.partitioned ? " partitioned" : " direct") << "\n";
  for (const InputPlan& in : plan.inputs)
    out << "input " << in.ge_name << " <- " << in.onnx_index << " cast " << in.cast_to << "\n";
  for (const AttrPlan& attr : plan.attrs) {
    out << "attr " << attr.name << " " << KindName(attr.kind) << " ";
    if (attr.kind == GeAttrKind::kFloat) {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "%.9g", attr.f);
      out << buf;
    } else if (attr.kind == GeAttrKind::kListInt) {
      out << "[";
      for (size_t k = 0; k < attr.list.size(); ++k) out << (k ? "," : "") << attr.list[k];
      out << "]";
    } else {
      out << attr.i;
    }
    out << "\n";
  }
  for (const InputPlan& o : plan.outputs) out << "output " << o.ge_name << " -> " << o.onnx_index << "\n";
  return out.str();
}

}  // namespace ascend_moe_ge
