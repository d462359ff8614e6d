// The CANN path predictions of the MoE op family (AscendMoeCannPath, `moe-onnx info`): the same
// blocker functions the kernels call, fed with what is known of a node. Unknown facts fit.
#include <algorithm>
#include <string>

#include <vector>

#include "cann_facts.h"
#include "cann_support.h"
#include "grouped_matmul/grouped_matmul_validate.h"
#include "op_defs.gen.h"
#include "ops_src/cann/grouped_matmul.h"
#include "ops_src/cann/moe_finalize_routing_v2.h"
#include "ops_src/cann/moe_init_routing.h"
#include "ops_src/cann/moe_init_routing_v3.h"
#include "ops_src/cann/moe_routed_experts.h"
#include "ops_src/cann/moe_token_permute.h"
#include "ops_src/cann/moe_token_unpermute.h"
#include "ops_src/cann/soc.h"
#include "ops_src/cann/swi_glu.h"

namespace ascend_moe {

namespace {

cpu::GmmType GmmTypeOf(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GmmType::kFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GmmType::kBFloat16;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) return cpu::GmmType::kInt8;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) return cpu::GmmType::kInt32;
  return cpu::GmmType::kFloat32;
}

// int8 / int32 (int4 words) weights: the quantized forms; otherwise x's type.
cpu::GmmWeight GmmWeightOf(ONNXTensorElementDataType t) {
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) return cpu::GmmWeight::kInt8;
  if (t == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32) return cpu::GmmWeight::kInt4;
  return cpu::GmmWeight::kSame;
}

std::string GroupedMatmulFacts(const Facts& f) {
  cann::GroupedMatmulDeviceArgs a;
  a.params.type = GmmTypeOf(TypeNamed(f, "x_type"));
  a.params.weight = GmmWeightOf(TypeNamed(f, "weight_type"));
  a.params.antiquant_groups = IntFact(f, "antiquant_groups", 1);  // unknown: per channel
  // W8A8: y's type from output_dtype, the scale's type (unknown: the pairing the operator takes)
  const ONNXTensorElementDataType y = GroupedMatmulOutputType(IntFact(f, "output_dtype", 0));
  a.params.out_type = y != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ? GmmTypeOf(y) : a.params.type;
  const ONNXTensorElementDataType scale = TypeNamed(f, "scale_type");
  a.params.scale_type = scale != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ? GmmTypeOf(scale)
                        : a.params.out_type == cpu::GmmType::kBFloat16   ? cpu::GmmType::kBFloat16
                                                                         : cpu::GmmType::kFloat32;
  a.params.groups = IntFact(f, "experts", 1);
  a.params.depth = 1;
  const ONNXTensorElementDataType bias = TypeNamed(f, "bias_type");
  a.has_bias = bias != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  a.params.bias_float32 = bias == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT;
  const std::string limits = cann::GroupedMatmulNativeBlocker(a);
  return limits.empty() ? cann::GroupedMatmulSocBlocker(a.params, a.has_bias, StringFact(f, "soc")) : limits;
}

std::string InitRoutingV3Facts(const Facts& f) {
  const defs::moe_init_routing_v3::Attrs d;
  cann::MoeInitRoutingV3DeviceArgs a;
  a.quant_mode = IntFact(f, "quant_mode", d.quant_mode);
  a.drop_pad_mode = IntFact(f, "drop_pad_mode", d.drop_pad_mode);
  a.expert_num = IntFact(f, "expert_num", d.expert_num);
  a.expert_start = IntFact(f, "active_expert_start", d.active_expert_start);
  a.expert_end = IntFact(f, "active_expert_end", d.active_expert_end);
  if (a.expert_end < 0) a.expert_end = a.expert_num;                         // the whole range
  if (a.expert_num <= 0) a.expert_num = std::max<int64_t>(a.expert_end, 1);  // not known: taken to fit
  if (a.expert_end <= 0) a.expert_end = a.expert_num;
  a.tokens_num_type = IntFact(f, "expert_tokens_num_type", d.expert_tokens_num_type);
  a.tokens = 1;  // a node is judged for calls with tokens
  return cann::MoeInitRoutingV3NativeBlocker(a);
}

std::string FinalizeFacts(const Facts& f) {
  cann::FinalizeRoutingV2Call c;
  const ONNXTensorElementDataType x = TypeNamed(f, "x_type"), scales = TypeNamed(f, "scales_type");
  AclTypeOf(x == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED ? ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT : x, &c.type);
  c.scales_type = c.type;
  if (scales != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) AclTypeOf(scales, &c.scales_type);
  c.k = IntFact(f, "k", 1);
  c.experts = IntFact(f, "experts", 0);
  return cann::MoeFinalizeRoutingV2NativeBlocker(c, scales != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED);
}

}  // namespace

bool FamilyBlocker(const std::string& op, const Facts& f, const char** call, std::string* reason) {
  const std::string soc = StringFact(f, "soc");
  std::vector<const char*> calls;  // the operators whose kernels the SoC must have
  if (op == defs::grouped_matmul::kName) {
    *call = cann::kAclnnGroupedMatmulV4;
    *reason = GroupedMatmulFacts(f);
  } else if (op == defs::moe_routed_experts::kName) {
    cpu::MoeRoutedExpertsParams p;
    p.swiglu_limit = std::stof(f.count("swiglu_limit") ? f.at("swiglu_limit") : "0");
    p.experts = IntFact(f, "experts", 1);
    if (TypeNamed(f, "weight_type") == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) {
      p.quant_bits = static_cast<int>(IntFact(f, "weight_bits", 8));
    }
    *call =
        "aclnnMoeInitRoutingV3 + aclnnGroupedMatmulV4 + aclnnSwiGlu + aclnnGroupedMatmulV4 + "
        "aclnnMoeFinalizeRoutingV2";
    calls = {cann::kAclnnMoeInitRoutingV3, cann::kAclnnGroupedMatmulV4, cann::kAclnnSwiGlu,
             cann::kAclnnMoeFinalizeRoutingV2};
    *reason = cann::MoeRoutedExpertsNativeBlocker(p);
  } else if (op == defs::moe_init_routing_v3::kName) {
    *call = cann::kAclnnMoeInitRoutingV3;
    *reason = InitRoutingV3Facts(f);
  } else if (op == defs::moe_finalize_routing_v2::kName) {
    *call = cann::kAclnnMoeFinalizeRoutingV2;
    *reason = FinalizeFacts(f);
  } else if (op == defs::moe_token_permute::kName) {
    cann::MoeTokenPermuteDeviceArgs a;
    a.tokens = a.rows = 1;
    a.k = IntFact(f, "k", 1);
    *call = cann::kAclnnMoeTokenPermute;
    *reason = cann::MoeTokenPermuteNativeBlocker(a);
  } else if (op == defs::moe_token_unpermute::kName) {
    cann::MoeTokenUnpermuteDeviceArgs a;
    a.rows = 1;
    a.k = IntFact(f, "k", 1);
    *call = cann::kAclnnMoeTokenUnpermute;
    *reason = cann::MoeTokenUnpermuteNativeBlocker(a);
  } else if (op == defs::moe_init_routing::kName) {
    cann::MoeInitRoutingDeviceArgs a;
    a.tokens = 1;
    a.rows = IntFact(f, "active_num", 1);
    *call = cann::kAclnnMoeInitRouting;
    *reason = cann::MoeInitRoutingNativeBlocker(a);
  } else if (op == defs::swi_glu::kName) {
    cann::SwiGluDeviceArgs a;
    a.x_dims.assign(static_cast<size_t>(IntFact(f, "rank", 2)), 2);
    *call = cann::kAclnnSwiGlu;
    *reason = cann::SwiGluNativeBlocker(a);
  } else {
    return false;
  }
  if (calls.empty()) calls = {*call};
  for (const char* c : calls) {
    if (reason->empty()) *reason = cann::SocBlocker(soc, c);
  }
  return true;
}

}  // namespace ascend_moe
