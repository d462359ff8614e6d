#include "moe_gating_top_k_hash_validate.h"

#include <cmath>
#include <iterator>

namespace ascend_moe {

namespace {

[[noreturn]] void FailInput(const char* name, const std::string& what_and_value) {
  Fail(Str(kMoeGatingName, ": input '", name, "' ", what_and_value));
}
[[noreturn]] void FailAttr(gating_defs::Attr attr, const std::string& what_and_value) {
  Fail(Str(kMoeGatingName, ": attribute '", gating_defs::kAttrs[attr].name, "' ", what_and_value));
}

// The element type of x-like inputs, or false when the type is not allowed.
bool FloatTypeOf(ONNXTensorElementDataType type, cpu::GatingFloatType* out) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: *out = cpu::GatingFloatType::kFloat32; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: *out = cpu::GatingFloatType::kFloat16; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: *out = cpu::GatingFloatType::kBFloat16; return true;
    default: return false;
  }
}

bool IntTypeOf(ONNXTensorElementDataType type, cpu::GatingIntType* out) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: *out = cpu::GatingIntType::kInt32; return true;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: *out = cpu::GatingIntType::kInt64; return true;
    default: return false;
  }
}

// bias / additional_bias: [E], the type of x.
void CheckBiasLike(const char* name, const InputView& v, const InputView& x, int64_t E) {
  if (!v.present) return;
  if (v.shape.size() != 1 || v.shape[0] != E) {
    FailInput(name, Str("must have shape [E] = [", E, "], got ", ShapeStr(v.shape)));
  }
  if (v.type != x.type) {
    FailInput(name, Str("must have the type of x (", TypeName(x.type), "), got ", TypeName(v.type)));
  }
}

}  // namespace

std::string CheckMoeGatingAttrs(const MoeGatingAttrs& a) {
  using namespace gating_defs;
  auto attr = [](Attr i) { return Str(kMoeGatingName, ": attribute '", kAttrs[i].name, "' "); };
  if (a.k < 1 || a.k > cpu::kGatingMaxK) {
    return Str(attr(kAttrK), "must be in [1, ", cpu::kGatingMaxK, "], got ", a.k);
  }
  if (a.group_count < 1) return Str(attr(kAttrGroupCount), "must be >= 1, got ", a.group_count);
  if (a.k_group < 1 || a.k_group > a.group_count) {
    return Str(attr(kAttrKGroup), "must be in [1, group_count (", a.group_count, ")], got ",
               a.k_group);
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

MoeGatingAttrs ReadMoeGatingAttrs(const OrtKernelInfo* info) {
  using namespace gating_defs;
  auto read_int = [&](Attr i) { return ReadIntAttr(info, kName, kAttrs[i]); };
  auto read_float = [&](Attr i) { return ReadFloatAttr(info, kName, kAttrs[i]); };
  MoeGatingAttrs a{};
  a.k = read_int(kAttrK);
  a.k_group = read_int(kAttrKGroup);
  a.group_count = read_int(kAttrGroupCount);
  a.group_select_mode = read_int(kAttrGroupSelectMode);
  a.renorm = read_int(kAttrRenorm);
  a.norm_type = read_int(kAttrNormType);
  a.out_flag = read_int(kAttrOutFlag);
  a.routed_scaling_factor = read_float(kAttrRoutedScalingFactor);
  a.eps = read_float(kAttrEps);
  const std::string error = CheckMoeGatingAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

MoeGatingProblem ValidateMoeGatingInputs(const MoeGatingInputViews& in, const MoeGatingAttrs& a) {
  MoeGatingProblem p;
  const InputView& x = in.x;
  if (!x.present) FailInput("x", "is required, got none");
  if (x.shape.size() < 2) FailInput("x", Str("must have rank >= 2, got shape ", ShapeStr(x.shape)));
  if (!FloatTypeOf(x.type, &p.x_type)) {
    FailInput("x", Str("must be float, float16 or bfloat16, got ", TypeName(x.type)));
  }
  // The attribute rules are checked when the kernel is created; repeated here so that every
  // execution provider's kernel gets them from one place.
  const std::string attr_error = CheckMoeGatingAttrs(a);
  if (!attr_error.empty()) Fail(attr_error);

  const int64_t E = x.shape.back();
  if (E < 1 || E > cpu::kGatingMaxExperts) {
    FailInput("x", Str("last dimension E must be in [1, ", cpu::kGatingMaxExperts, "], got ", E));
  }
  if (a.k > E) FailAttr(gating_defs::kAttrK, Str("must be <= E (", E, "), got ", a.k));
  if (E % a.group_count != 0) {
    FailAttr(gating_defs::kAttrGroupCount, Str("must divide E (", E, "), got ", a.group_count));
  }
  const int64_t per_group = E / a.group_count;
  if (a.k > a.k_group * per_group) {
    FailAttr(gating_defs::kAttrK, Str("must be <= k_group * E / group_count (", a.k_group * per_group, "), got ",
                       a.k));
  }
  const bool grouped = MoeGatingGroupingEffective(a);
  if (a.group_select_mode == 1 && grouped && per_group < 2) {
    FailAttr(gating_defs::kAttrGroupSelectMode,
             Str("1 needs E / group_count >= 2, got E / group_count = ", per_group));
  }

  std::vector<int64_t> lead(x.shape.begin(), x.shape.end() - 1);
  const int64_t R = NumElements(lead);

  CheckBiasLike("bias", in.bias, x, E);
  CheckBiasLike("additional_bias", in.additional_bias, x, E);

  const InputView& ids = in.input_ids;
  const InputView& table = in.tid2eid;
  if (ids.present != table.present) {
    const char* given = ids.present ? "input_ids" : "tid2eid";
    const char* missing = ids.present ? "tid2eid" : "input_ids";
    FailInput(given, Str("needs input '", missing, "' (hash routing uses both), got only '", given,
                         "'"));
  }
  if (table.present) {
    if (table.shape.size() != 2 || table.shape[1] != a.k) {
      FailInput("tid2eid", Str("must have shape [n, k=", a.k, "], got ", ShapeStr(table.shape)));
    }
    if (!IntTypeOf(table.type, &p.table_type)) {
      FailInput("tid2eid", Str("must be int32 or int64, got ", TypeName(table.type)));
    }
    if (!IntTypeOf(ids.type, &p.ids_type)) {
      FailInput("input_ids", Str("must be int32 or int64, got ", TypeName(ids.type)));
    }
    if (ids.size != R) {
      FailInput("input_ids", Str("must have R = ", R, " elements, got shape ", ShapeStr(ids.shape)));
    }
    if (grouped) {
      Fail(Str(kMoeGatingName, ": hash routing (input 'tid2eid') cannot be combined with "
               "group-limited selection, got group_count=", a.group_count, ", k_group=", a.k_group));
    }
    p.hash = true;
  }

  const InputView& mask = in.mask;
  if (mask.present) {
    if (!in.additional_bias.present) {
      FailInput("additional_token_mask",
                "needs input 'additional_bias', got the mask alone");
    }
    if (mask.type != ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL) {
      FailInput("additional_token_mask", Str("must be bool, got ", TypeName(mask.type)));
    }
    if (mask.size != R) {
      FailInput("additional_token_mask",
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

}  // namespace ascend_moe
