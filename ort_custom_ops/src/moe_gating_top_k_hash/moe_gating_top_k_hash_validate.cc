#include "moe_gating_top_k_hash_validate.h"

#include <cmath>

namespace ascend_moe {

using namespace gating_defs;

namespace {

[[noreturn]] void FailInput(In input, const std::string& what_and_value) {
  Fail(Str(kName, ": input '", kInputs[input].name, "' ", what_and_value));
}
[[noreturn]] void FailAttr(Attr attr, const std::string& what_and_value) {
  Fail(Str(kName, ": attribute '", kAttrs[attr].name, "' ", what_and_value));
}

// The kernel's name for an element type the table allows for x-like inputs / ids and tables.
cpu::GatingFloatType FloatTypeOf(ONNXTensorElementDataType type) {
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16) return cpu::GatingFloatType::kFloat16;
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16) return cpu::GatingFloatType::kBFloat16;
  return cpu::GatingFloatType::kFloat32;
}
cpu::GatingIntType IntTypeOf(ONNXTensorElementDataType type) {
  return type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32 ? cpu::GatingIntType::kInt32
                                                     : cpu::GatingIntType::kInt64;
}

// bias / additional_bias: [E] (the table checked they have the type of x).
void CheckBiasLike(In input, const InputView& v, int64_t E) {
  if (!v.present) return;
  if (v.shape.size() != 1 || v.shape[0] != E) {
    FailInput(input, Str("must have shape [E] = [", E, "], got ", ShapeStr(v.shape)));
  }
}

}  // namespace

std::string gating_defs::CheckAttrs(const Attrs& a) {
  auto attr = [](Attr i) { return Str(kName, ": attribute '", kAttrs[i].name, "' "); };
  if (a.k < 1 || a.k > cpu::kGatingMaxK) {
    return Str(attr(kAttrK), "must be in [1, ", cpu::kGatingMaxK, "], got ", a.k);
  }
  if (a.group_count < 1) return Str(attr(kAttrGroupCount), "must be >= 1, got ", a.group_count);
  if (a.k_group < 1 || a.k_group > a.group_count) {
    return Str(attr(kAttrKGroup), "must be in [1, group_count (", a.group_count, ")], got ", a.k_group);
  }
  if (a.group_select_mode != 0 && a.group_select_mode != 1) {
    return Str(attr(kAttrGroupSelectMode), "must be one of [0, 1], got ", a.group_select_mode);
  }
  if (a.norm_type < 0 || a.norm_type > 2) {
    return Str(attr(kAttrNormType), "must be one of [0, 1, 2], got ", a.norm_type);
  }
  if (a.renorm != 0 && a.renorm != 1) {
    return Str(attr(kAttrRenorm), "must be one of [0, 1], got ", a.renorm);
  }
  if (a.out_flag != 0 && a.out_flag != 1) {
    return Str(attr(kAttrOutFlag), "must be one of [0, 1], got ", a.out_flag);
  }
  if (!std::isfinite(a.eps) || a.eps < 0.0f) {
    return Str(attr(kAttrEps), "must be finite and >= 0, got ", a.eps);
  }
  if (!std::isfinite(a.routed_scaling_factor)) {
    return Str(attr(kAttrRoutedScalingFactor), "must be finite, got ", a.routed_scaling_factor);
  }
  return {};
}

MoeGatingProblem ValidateMoeGatingInputs(const MoeGatingInputViews& in, const Attrs& a) {
  MoeGatingProblem p;
  const InputView& x = in[kInX];
  if (x.shape.size() < 2) FailInput(kInX, Str("must have rank >= 2, got shape ", ShapeStr(x.shape)));
  p.x_type = FloatTypeOf(x.type);

  const int64_t E = x.shape.back();
  if (E < 1 || E > cpu::kGatingMaxExperts) {
    FailInput(kInX, Str("last dimension E must be in [1, ", cpu::kGatingMaxExperts, "], got ", E));
  }
  if (a.k > E) FailAttr(kAttrK, Str("must be <= E (", E, "), got ", a.k));
  if (E % a.group_count != 0) {
    FailAttr(kAttrGroupCount, Str("must divide E (", E, "), got ", a.group_count));
  }
  const int64_t per_group = E / a.group_count;
  if (a.k > a.k_group * per_group) {
    FailAttr(kAttrK, Str("must be <= k_group * E / group_count (", a.k_group * per_group, "), got ", a.k));
  }
  const bool grouped = MoeGatingGroupingEffective(a);
  if (a.group_select_mode == 1 && grouped && per_group < 2) {
    FailAttr(kAttrGroupSelectMode, Str("1 needs E / group_count >= 2, got E / group_count = ", per_group));
  }

  std::vector<int64_t> lead(x.shape.begin(), x.shape.end() - 1);
  const int64_t R = NumElements(lead);

  CheckBiasLike(kInBias, in[kInBias], E);
  CheckBiasLike(kInAdditionalBias, in[kInAdditionalBias], E);

  const InputView& ids = in[kInInputIds];
  const InputView& table = in[kInTid2eid];
  if (ids.present != table.present) {
    const In given = ids.present ? kInInputIds : kInTid2eid;
    const In missing = ids.present ? kInTid2eid : kInInputIds;
    FailInput(given, Str("needs input '", kInputs[missing].name, "' (hash routing uses both), got only '",
                         kInputs[given].name, "'"));
  }
  if (table.present) {
    if (table.shape.size() != 2 || table.shape[1] != a.k) {
      FailInput(kInTid2eid, Str("must have shape [n, k=", a.k, "], got ", ShapeStr(table.shape)));
    }
    p.table_type = IntTypeOf(table.type);
    p.ids_type = IntTypeOf(ids.type);
    if (ids.size != R) {
      FailInput(kInInputIds, Str("must have R = ", R, " elements, got shape ", ShapeStr(ids.shape)));
    }
    if (grouped) {
      Fail(Str(kName,
               ": hash routing (input 'tid2eid') cannot be combined with "
               "group-limited selection, got group_count=",
               a.group_count, ", k_group=", a.k_group));
    }
    p.hash = true;
  }

  const InputView& mask = in[kInAdditionalTokenMask];
  if (mask.present) {
    if (!in[kInAdditionalBias].present) {
      FailInput(kInAdditionalTokenMask, "needs input 'additional_bias', got the mask alone");
    }
    if (mask.size != R) {
      FailInput(kInAdditionalTokenMask,
                Str("must have R = ", R, " elements, got shape ", ShapeStr(mask.shape)));
    }
    p.additional = true;
  }

  cpu::MoeGatingTopKHashParams& q = p.params;
  q.rows = R;
  q.experts = E;
  q.k = a.k;
  q.k_group = a.k_group;
  q.group_count = a.group_count;
  q.group_select_mode = a.group_select_mode;
  q.renorm = a.renorm;
  q.norm_type = a.norm_type;
  q.out_flag = a.out_flag;
  q.routed_scaling_factor = a.routed_scaling_factor;
  q.eps = a.eps;

  p.y_shape = lead;
  p.y_shape.push_back(a.k);
  p.out_shape = a.out_flag ? x.shape : std::vector<int64_t>{0};
  return p;
}

cpu::MoeGatingTopKHashInputs MoeGatingKernelInputs(const MoeGatingInputViews& in, const MoeGatingProblem& p) {
  cpu::MoeGatingTopKHashInputs k;
  k.x_type = p.x_type;
  k.x = in[kInX].data;
  k.bias = in[kInBias].present ? in[kInBias].data : nullptr;
  if (p.hash) {
    k.hash = true;
    k.ids_type = p.ids_type;
    k.input_ids = in[kInInputIds].data;
    k.table_type = p.table_type;
    k.tid2eid = in[kInTid2eid].data;
    k.table_rows = in[kInTid2eid].shape[0];
  }
  if (p.additional) {
    k.additional_bias = in[kInAdditionalBias].data;
    k.additional_token_mask = static_cast<const uint8_t*>(in[kInAdditionalTokenMask].data);
  }
  return k;
}

}  // namespace ascend_moe
