// Entry points of the CANN support for tools and tests: where the CANN kernels' loader finds an
// entry point, and which path (an ACLNN call, or the fallback and why) a node would take. The
// Python side (ort_custom_ops.cann, `moe-onnx info`) asks these instead of restating the rules.
#include <cstdint>
#include <map>
#include <sstream>
#include <string>

#include "cann_facts.h"
#include "cann_support.h"
#include "op_defs.gen.h"
#include "ops_src/cann/loader.h"
#include "ops_src/cann/moe_gating_top_k_hash.h"
#include "ops_src/cann/moe_re_routing.h"
#include "ops_src/cann/soc.h"

namespace ascend_moe {
namespace {

// The blocker of the native gating call for these facts (E unknown: its rules are skipped).
std::string GatingBlocker(const std::map<std::string, std::string>& f, const char** call) {
  const defs::moe_gating_top_k_hash::Attrs d;
  cann::MoeGatingDeviceArgs a;
  a.params.renorm = IntFact(f, "renorm", d.renorm);
  a.params.norm_type = IntFact(f, "norm_type", d.norm_type);
  a.params.group_count = IntFact(f, "group_count", d.group_count);
  a.params.k_group = IntFact(f, "k_group", d.k_group);
  a.params.group_select_mode = IntFact(f, "group_select_mode", d.group_select_mode);
  a.params.experts = IntFact(f, "experts", 0);
  if (a.params.group_count < 1) return "invalid node: group_count < 1";
  a.soc = StringFact(f, "soc");
  a.in.hash = IntFact(f, "hash_routing", 0) != 0;
  a.additional = IntFact(f, "additional", 0) != 0;
  a.in.table_type = TypeNamed(f, "table_type") == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64
                        ? cpu::GatingIntType::kInt64
                        : cpu::GatingIntType::kInt32;  // int32 or not known
  return cann::MoeGatingNativeBlocker(a, call);
}

// The blocker of aclnnMoeReRouting for these facts; a type or rank not known is taken as one the
// call accepts, an unknown H as fitting.
std::string ReRoutingBlocker(const std::map<std::string, std::string>& f) {
  const defs::moe_re_routing::Attrs d;
  cann::MoeReRoutingDeviceArgs a;
  a.soc = StringFact(f, "soc");
  a.params.expert_token_num_type = IntFact(f, "expert_token_num_type", d.expert_token_num_type);
  a.params.idx_type = IntFact(f, "idx_type", d.idx_type);
  const ONNXTensorElementDataType tokens = TypeNamed(f, "token_type");
  a.token_type = cann::kNativeTokenTypes[0];
  a.token_type_known = tokens == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || AclTypeOf(tokens, &a.token_type);
  const ONNXTensorElementDataType scales = TypeNamed(f, "scale_type");
  a.params.has_scales = scales != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED || f.count("scale_rank");
  a.scale_type = cann::kNativeScaleType;
  if (scales != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED && !AclTypeOf(scales, &a.scale_type)) {
    a.scale_type = cann::kAclBool;  // no ACL scale type: not the native one
  }
  a.scale_rank = static_cast<int>(IntFact(f, "scale_rank", 1));
  a.hidden = IntFact(f, "hidden", -1);
  return cann::MoeReRoutingNativeBlocker(a);
}

std::string JsonString(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

}  // namespace
}  // namespace ascend_moe

#define ASCEND_MOE_EXPORT extern "C" __attribute__((visibility("default")))

// "found in <library>" or "not found; tried: <library> (<why>), ..."; searched now, not cached.
// The returned text stays valid until the next call from the same thread.
ASCEND_MOE_EXPORT const char* AscendMoeCannLocate(const char* symbol) {
  thread_local std::string text;
  text = ascend_moe::cann::LocateSymbol(symbol ? symbol : "").Describe();
  return text.c_str();
}

// The SoC name aclrtGetSocName reports in this process ("" without a CANN runtime).
ASCEND_MOE_EXPORT const char* AscendMoeCannSoc() { return ascend_moe::cann::SocName().c_str(); }

// Why ACLNN operator `call` has no kernels for SoC `soc` (this process's when null or empty), or
// ""; with `call` null or empty, which of CANN's MoE operators have none (soc.h, SocBlockerAll).
// Valid until the next call from the same thread.
ASCEND_MOE_EXPORT const char* AscendMoeCannSocBlocker(const char* soc, const char* call) {
  thread_local std::string text;
  const std::string s = soc ? std::string(soc) : std::string();
  text = call && *call ? ascend_moe::cann::SocBlocker(s, call) : ascend_moe::cann::SocBlockerAll(s);
  return text.c_str();
}

// The path a node of `op` would take on the CANN execution provider by the documented limits of
// the Ascend operators (whether this machine's CANN provides the call is not asked): JSON
// {"call": "<ACLNN operator>" or null, "reason": "" or why the fallback runs}. `facts` is
// "name=value ..." with the node's attributes (defaults when absent) and what is known of its
// inputs: MoeGatingTopKHash experts, hash_routing (0/1), table_type, additional (0/1);
// MoeReRouting token_type, scale_type, scale_rank, hidden; the op family's facts are listed in
// cann_facts.h; and soc (aclrtGetSocName's name; this process's when left out, see
// AscendMoeCannSoc). Other facts left out are not known and taken to fit. Valid until the next
// call from the same thread.
ASCEND_MOE_EXPORT const char* AscendMoeCannPath(const char* op, const char* facts) {
  thread_local std::string json;
  using namespace ascend_moe;
  const std::string name = op ? op : "";
  const char* call = nullptr;
  std::string reason;
  try {
    const auto parsed = ParseFacts(facts);
    if (name == defs::moe_gating_top_k_hash::kName) {
      reason = GatingBlocker(parsed, &call);
    } else if (name == defs::moe_re_routing::kName) {
      call = cann::kAclnnMoeReRouting;
      reason = ReRoutingBlocker(parsed);
    } else if (!FamilyBlocker(name, parsed, &call, &reason)) {
      reason = "no CANN kernel for " + name + " (the node runs on the CPU execution provider)";
    }
  } catch (const std::exception& e) {
    reason = std::string("invalid facts: ") + e.what();
  }
  if (!reason.empty()) call = nullptr;
  json = "{\"call\": " + (call ? JsonString(call) : std::string("null")) +
         ", \"reason\": " + JsonString(reason) + "}";
  return json.c_str();
}
