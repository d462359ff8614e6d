// The graph-engine (GE) ONNX parser plugin of the ascend.moe ops: one REGISTER_CUSTOM_OP per op and
// domain version (the generated tables, mapping.gen.h), on GE's public register API only.
//
// GE's ONNX parser hands ParseParamsByOperatorFn the node as an Operator whose "attribute" attr is
// the node's attributes as one JSON string and whose "input" attr lists its input names; it wires
// the node's inputs into the GE op's IR order by position. An op whose inputs GE takes in the
// schema's order registers as that GE op and only gets its attributes set. An op that needs index
// Casts, dynamic tensor lists or a variant chosen by its inputs registers as PartitionedCall: its
// inputs stay in the node's order ("args", by index), and ParseOpToGraphFn builds the small graph
// (Data -> Cast -> GE op) GE expands in its place. The decisions are mapping_core's; a refused node
// fails the parse with the reason on stderr.
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "graph/ascend_string.h"
#include "graph/graph.h"
#include "graph/operator.h"
#include "register/register.h"

#include "mapping.gen.h"
#include "mapping_core.h"

namespace ascend_moe_ge {
namespace {

constexpr const char* kAttrJson = "attribute";  // set by GE's parser
constexpr const char* kAttrInputs = "input";     // set by GE's parser
constexpr const char* kAttrOriginalType = "original_type";  // how GE finds the ParseOpToGraphFn
constexpr const char* kKeptJson = "ascend_moe_attribute";   // what the graph function re-plans from
constexpr const char* kKeptInputs = "ascend_moe_input";

void Log(const std::string& node, const std::string& text) {
  std::fprintf(stderr, "[ascend.moe GE plugin] node '%s': %s\n", node.c_str(), text.c_str());
}

std::string NameOf(const ge::Operator& op) {
  ge::AscendString name;
  (void)op.GetName(name);
  return name.GetString() == nullptr ? "" : name.GetString();
}

std::string StringAttr(const ge::Operator& op, const char* attr) {
  ge::AscendString value;
  if (op.GetAttr(attr, value) != ge::GRAPH_SUCCESS || value.GetString() == nullptr) return "";
  return value.GetString();
}

std::vector<std::string> ListAttr(const ge::Operator& op, const char* attr) {
  std::vector<ge::AscendString> values;
  std::vector<std::string> out;
  if (op.GetAttr(attr, values) != ge::GRAPH_SUCCESS) return out;
  for (const auto& v : values) out.emplace_back(v.GetString() == nullptr ? "" : v.GetString());
  return out;
}

void SetAttrs(ge::Operator& op, const NodePlan& plan) {
  for (const AttrPlan& a : plan.attrs) {
    switch (a.kind) {
      case GeAttrKind::kInt: op.SetAttr(a.name.c_str(), static_cast<int64_t>(a.i)); break;
      case GeAttrKind::kBool: op.SetAttr(a.name.c_str(), a.i != 0); break;
      case GeAttrKind::kFloat: op.SetAttr(a.name.c_str(), a.f); break;
      case GeAttrKind::kListInt: op.SetAttr(a.name.c_str(), a.list); break;
    }
  }
}

// An operator whose IR is declared from the recorded tables, as REG_OP's classes declare theirs:
// the graph function does not depend on which operator libraries the process has loaded.
class IrOperator : public ge::Operator {
 public:
  IrOperator(const std::string& name, const char* type) : ge::Operator(name.c_str(), type) {}
  void Input(const char* name) { InputRegister(name); }
  void OptionalInput(const char* name) { OptionalInputRegister(name); }
  void DynamicInput(const char* name, uint32_t count) { DynamicInputRegister(name, count); }
  void Output(const char* name) { OutputRegister(name); }
  void DynamicOutput(const char* name, uint32_t count) { DynamicOutputRegister(name, count); }
};

IrOperator Data(const std::string& name, int64_t index) {
  IrOperator op(name, "Data");
  op.Input("x");
  op.Output("y");
  op.SetAttr("index", index);
  return op;
}

IrOperator Cast(const std::string& name, int dst_type) {
  IrOperator op(name, "Cast");
  op.Input("x");
  op.Output("y");
  op.SetAttr("dst_type", static_cast<int64_t>(dst_type));
  return op;
}

domi::Status ParseParams(const ge::Operator& src, ge::Operator& dest, const OpSpec& spec) {
  const std::string node = NameOf(src);
  const std::string json = StringAttr(src, kAttrJson);
  const std::vector<std::string> inputs = ListAttr(src, kAttrInputs);
  const NodePlan plan = PlanNode(spec, json, inputs);
  if (!plan.error.empty()) {
    Log(node, "refused: " + plan.error);
    return domi::FAILED;
  }
  if (!spec.partitioned) {
    SetAttrs(dest, plan);
    return domi::SUCCESS;
  }
  // PartitionedCall: the node's inputs in its own order, expanded by ParseGraph below.
  dest.DynamicInputRegisterByIndex("args", static_cast<uint32_t>(inputs.size()), 0);
  dest.DynamicOutputRegister("output", static_cast<uint32_t>(spec.num_outputs));
  dest.SetAttr(kAttrOriginalType, OriginType(spec).c_str());
  dest.SetAttr(kKeptJson, json.c_str());
  std::vector<ge::AscendString> names;
  for (const std::string& name : inputs) names.emplace_back(name.c_str());
  dest.SetAttr(kKeptInputs, names);
  return domi::SUCCESS;
}

domi::Status ParseGraph(const ge::Operator& op, ge::Graph& graph, const OpSpec& spec) {
  const std::string node = NameOf(op);
  const std::vector<std::string> inputs = ListAttr(op, kKeptInputs);
  const NodePlan plan = PlanNode(spec, StringAttr(op, kKeptJson), inputs);
  if (!plan.error.empty()) {
    Log(node, "refused: " + plan.error);
    return domi::FAILED;
  }
  IrOperator target(node + "_" + plan.ge_type, plan.ge_type.c_str());
  for (const InputPlan& in : plan.inputs) {
    const uint32_t connected = in.onnx_index >= 0 ? 1 : 0;
    if (in.kind == GeInputKind::kDynamic) target.DynamicInput(in.ge_name.c_str(), connected);
    else if (in.kind == GeInputKind::kRequired) target.Input(in.ge_name.c_str());
    else target.OptionalInput(in.ge_name.c_str());
  }
  for (const InputPlan& out : plan.outputs) {
    if (out.kind == GeInputKind::kDynamic) target.DynamicOutput(out.ge_name.c_str(), 1);
    else target.Output(out.ge_name.c_str());
  }
  SetAttrs(target, plan);

  std::vector<ge::Operator> data;
  std::map<int, size_t> data_of;  // node input -> position in `data`
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (inputs[k].empty()) continue;
    data_of[static_cast<int>(k)] = data.size();
    data.push_back(Data(node + "_arg" + std::to_string(k), static_cast<int64_t>(k)));
  }
  uint32_t index = 0;  // the target's input index: unconnected dynamic lists take no slot
  for (const InputPlan& in : plan.inputs) {
    if (in.kind == GeInputKind::kDynamic && in.onnx_index < 0) continue;
    if (in.onnx_index >= 0) {
      ge::Operator& source = data[data_of.at(in.onnx_index)];
      if (in.cast_to >= 0) {
        IrOperator cast = Cast(node + "_" + in.ge_name + "_cast", in.cast_to);
        cast.SetInput(0u, source, 0u);
        target.SetInput(index, cast, 0u);
      } else {
        target.SetInput(index, source, 0u);
      }
    }
    ++index;
  }
  std::vector<size_t> outputs(plan.outputs.size());
  for (size_t k = 0; k < outputs.size(); ++k) outputs[k] = k;
  graph.SetInputs(data).SetOutputs({{target, outputs}});
  return domi::SUCCESS;
}

}  // namespace
}  // namespace ascend_moe_ge

// One registration per op and domain version of the tables (ASCEND_MOE_GE_FOR_EACH_OP, generated):
// REGISTER_CUSTOM_OP registers at load time through a static object per row. Only an expanded op
// gets a ParseOpToGraphFn: GE expands every node whose type and original type have one.
#define ASCEND_MOE_GE_REGISTER(N)                                                                  \
  REGISTER_CUSTOM_OP(ascend_moe_ge::RegisteredType(*ascend_moe_ge::kOps[N]))                       \
      .FrameworkType(domi::ONNX)                                                                  \
      .OriginOpType(ascend_moe_ge::OriginType(*ascend_moe_ge::kOps[N]).c_str())                    \
      .ParseParamsByOperatorFn([](const ge::Operator& src, ge::Operator& dest) {                 \
        return ascend_moe_ge::ParseParams(src, dest, *ascend_moe_ge::kOps[N]);                    \
      })                                                                                          \
      .ParseOpToGraphFn(ascend_moe_ge::kOps[N]->partitioned                                       \
                            ? domi::ParseOpToGraphFunc([](const ge::Operator& op, ge::Graph& graph) { \
                                return ascend_moe_ge::ParseGraph(op, graph, *ascend_moe_ge::kOps[N]); \
                              })                                                                  \
                            : domi::ParseOpToGraphFunc())                                         \
      .ImplyType(domi::ImplyType::TVM);

namespace domi {  // REGISTER_CUSTOM_OP names OpReceiver and OpRegistrationData unqualified
ASCEND_MOE_GE_FOR_EACH_OP(ASCEND_MOE_GE_REGISTER)
}  // namespace domi
