// The GE plugin's mapping logic, free of GE and CANN headers: from a node's attributes (the JSON
// string GE's ONNX parser hands a ParseParamsByOperatorFn, FLOATs printed with %g) and its input
// names, the plan the plugin carries out: the GE op, each GE input in IR order (which node input
// feeds it, through which index Cast), and each GE attribute's kind and value; or the reason the
// node is refused.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "mapping_types.h"

namespace ascend_moe_ge {

struct InputPlan {
  std::string ge_name;
  GeInputKind kind;
  int onnx_index;  // the node input wired to it, -1: left unconnected
  int cast_to;     // GE DataType code of the Cast in front of it, -1: none
};

struct AttrPlan {
  std::string name;
  GeAttrKind kind;
  int64_t i = 0;  // kInt, kBool (0 / 1)
  float f = 0.0f;
  std::vector<int64_t> list;
};

struct NodePlan {
  std::string error;  // non-empty: the node is refused, for this reason
  std::string ge_type;
  bool partitioned = false;
  std::vector<InputPlan> inputs;  // GE IR order
  std::vector<AttrPlan> attrs;    // GE IR order; GE attributes absent here keep GE's default
  std::vector<InputPlan> outputs;  // GE IR order (onnx_index: the node output it is)
};

// The spec of "<domain>::<version>::<OpType>" (GE's lookup key), or nullptr.
const OpSpec* FindOp(const std::string& origin_type);

// The key GE looks the op up by.
std::string OriginType(const OpSpec& op);

// The GE type `op` registers as: PartitionedCall when expanded into a graph, else its GE op (the
// schema's name for a refused op, which the plugin registers only to log why).
const char* RegisteredType(const OpSpec& op);

// The plan for one node of `op`: `attr_json` as GE's parser writes it ({"attribute": [...]}, empty
// or "null" for none), `input_names` the node's inputs ("" for an absent one).
NodePlan PlanNode(const OpSpec& op, const std::string& attr_json, const std::vector<std::string>& input_names);

// The plan as text, one item per line ("op X", "input NAME <- N cast C", "attr NAME KIND VALUE",
// "outputs N", or "refused REASON"): what the tests compare and what the plugin logs at debug level.
std::string DescribePlan(const NodePlan& plan);

}  // namespace ascend_moe_ge
