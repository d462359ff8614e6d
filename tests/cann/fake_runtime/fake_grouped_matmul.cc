// Fake aclnnGroupedMatmulV4 (libopapi.so): the argument checks of ops-transformer's
// gmm/grouped_matmul/op_host/op_api/aclnn_grouped_matmul.cpp for the case this library uses
// (one x, one weight, one y: split_item 2/3, group_type 0, a group-list tensor, no activation;
// float x and weight of one type; W8A8: int8 x and weight with scale, per-token scale and an
// int32 bias, CheckFunctionQuantParams / CheckGroupedMatmulQuant / CheckQuantParamsDtype /
// CheckPerTokenScale; W8A16 / W4A16: float16 / bfloat16 x with int8 or ACL_INT4 weights,
// CheckGroupedMatmulAntiQuant / CheckOptionalTensorList / CheckWeightShapeInnerAxisEven), with its
// status codes; y = x (w + antiquantOffset) antiquantScale for the antiquant forms; the computation is the
// project's CPU kernel. Like the NPU kernel it writes only the rows of the groups (the rows after the last
// group keep what they held), and the group list values, which the operator reads on the device unchecked,
// must be valid or the run fails (the NPU would read and write out of bounds).
#include <cctype>
#include <string>
#include <vector>

#include "fake_aclnn.h"
#include "fake_lists.h"
#include "ops_src/cpu/grouped_matmul/grouped_matmul.h"

using namespace fake_cann;

namespace {

constexpr int64_t kMaxGroupListTensor = 1024;  // MAX_GROUP_LIST_SIZE_TENSOR

const TensorList* L(const void* p) { return static_cast<const TensorList*>(p); }

// A list argument: null is 161001 when required; it must be live and (in this fake) hold one tensor.
const void* OneTensor(ArgCheck& c, const char* name, const void* list, bool required) {
  if (!c.ok()) return nullptr;
  if (!list) {
    if (required) c.Fail(kParamNullptr, std::string(name) + " must not be nullptr.");
    return nullptr;
  }
  if (!FakeAclnnIsTensorList(list)) {
    FakeAclAbort((std::string("aclnnGroupedMatmulV4GetWorkspaceSize: argument '") + name +
                  "' is not a live aclTensorList (used after destroy?)")
                     .c_str());
  }
  if (L(list)->tensors.empty()) {
    c.Fail(kParamInvalid, std::string(name) + " must not be empty tensorlist.");
    return nullptr;
  }
  if (L(list)->tensors.size() != 1) {
    c.Fail(kParamInvalid, std::string(name) + ": the fake models single-tensor lists only");
    return nullptr;
  }
  return L(list)->tensors[0];
}

// The weight: [E, K, N] contiguous, or the transposed view of [E, N, K] storage (the operator's
// IsTransposeLastTwoDims). Sets *transposed.
bool CheckWeight(ArgCheck& c, const void* w, int dtype, int64_t k, bool* transposed) {
  if (!c.ok()) return false;
  if (!FakeAclnnIsTensor(w)) {
    c.RequireLive("weight[0]", w);
    return false;
  }
  const Tensor* t = T(w);
  if (t->dtype != dtype) {
    c.Fail(kParamInvalid, "GMM: weight dtype does not match with required dtype[" + TypeName(dtype) + "].");
    return false;
  }
  if (t->dims.size() != 3 || t->format != 2 || t->offset != 0) {
    c.Fail(kParamInvalid, "Dim num or format of tensor in tensor list weight is invalid.");
    return false;
  }
  const int64_t e = t->dims[0], kk = t->dims[1], n = t->dims[2];
  const std::vector<int64_t> plain{kk * n, n, 1}, trans{kk * n, 1, kk};
  *transposed = t->strides == trans && t->strides != plain;
  if (t->strides != plain && t->strides != trans) {
    c.Fail(kParamInvalid, "weight must be contiguous or the transpose of its last two axes");
    return false;
  }
  if (kk != k) {
    c.Fail(kParamInvalid, "k dim value of x and weight is not matched.");
    return false;
  }
  // CheckWeightShapeInnerAxisEven: the stored inner axis (N, or K when transposed) of int4.
  if (dtype == kInt4 && (*transposed ? kk : n) % 2 != 0) {
    c.Fail(kParamInvalid,
           "weight's inner axis size[" + std::to_string(*transposed ? kk : n) + "] is not even!");
    return false;
  }
  if (e * kk * n > 0 && !Data(w)) c.Fail(kParamInvalid, "weight data is not inside one device allocation");
  return c.ok();
}

ascend_moe::cpu::GmmType GmmTypeOf(int dtype) {
  using ascend_moe::cpu::GmmType;
  switch (dtype) {
    case kFloat16:
      return GmmType::kFloat16;
    case kBFloat16:
      return GmmType::kBFloat16;
    case kInt8:
      return GmmType::kInt8;
    case kInt32:
      return GmmType::kInt32;
    default:
      return GmmType::kFloat32;
  }
}

// W8A8's quantisation arguments (y's dtype, scale, per-token scale; offset null). Returns the
// scale and per-token scale tensors through *scale_t / *per_token_t.
void CheckW8A8(ArgCheck& c, const void* yt, const void* scale, const void* offset,
               const void* per_token_scale, int64_t m, int64_t e, int64_t n, const void** scale_t,
               const void** per_token_t) {
  if (!c.ok()) return;
  const int yd = T(yt)->dtype;
  if (yd != kInt8 && yd != kBFloat16 && yd != kFloat16 && yd != kInt32) {
    c.Fail(kParamInvalid,
           "Expect yDtype is int8, int32, float16 or bfloat16 in quant case, but now y[0] dtype is " +
               TypeName(yd));
    return;
  }
  if (yd == kInt8) {
    c.Fail(kParamInvalid, "the fake does not model int8 y (int64 / uint64 scale)");
    return;
  }
  if (yd == kInt32) {  // the raw sums: no further checks in the operator
    *scale_t = OneTensor(c, "scale", scale, false);
    *per_token_t = OneTensor(c, "perTokenScaleOptional", per_token_scale, false);
    if (c.ok() && (*scale_t || *per_token_t))
      c.Fail(kParamInvalid, "the fake models int32 y without scales only");
    return;
  }
  if (offset) return c.Fail(kParamInvalid, "GMM: offset must be nullptr in quant, but now is not nullptr.");
  if (!scale) return c.Fail(kParamInvalid, "GMM: scale must not be nullptr in quant, but now is nullptr.");
  *scale_t = OneTensor(c, "scale", scale, true);
  *per_token_t = OneTensor(c, "perTokenScaleOptional", per_token_scale, false);
  if (!c.ok() || !FakeAclnnIsTensor(*scale_t)) return c.Fail(kParamInvalid, "Invalid scale.");
  const int sd = T(*scale_t)->dtype;
  if (!((sd == kBFloat16 && yd == kBFloat16) || (sd == kFloat && yd == kFloat16))) {
    return c.Fail(kParamInvalid,
                  std::string(*per_token_t ? "per-token" : "per-channel") +
                      " quant case only supports scale data type bfloat16 with output data type "
                      "bfloat16, or scale with data type float32 when output is float16, but now "
                      "scale[0] has data type " +
                      TypeName(sd) + " and output has data type " + TypeName(yd) + "!");
  }
  c.Check("scale[0]", *scale_t, true, {sd}, {e, n});
  if (*per_token_t && c.ok() && T(*per_token_t)->dtype != kFloat) {
    return c.Fail(kParamInvalid,
                  "per-token quant case only support perTokenScale with data type float32, but "
                  "perTokenScale[0] has data type " +
                      TypeName(T(*per_token_t)->dtype) + "!");
  }
  if (*per_token_t && c.ok() && (T(*per_token_t)->dims.size() != 1 || T(*per_token_t)->dims[0] != m)) {
    return c.Fail(kParamInvalid,
                  "MDim of perTokenScaleOptional should be equal with MDim[" + std::to_string(m) + "] of x.");
  }
  c.Check("perTokenScaleOptional[0]", *per_token_t, false, {kFloat}, {m});
}

// The antiquant forms (CheckGroupedMatmulAntiQuant, CheckOptionalTensorList): antiquantScale and
// antiquantOffset both given, of x's type; [E, N] (per channel), or [E, G, N] (per group, G
// dividing K) for int4 weights only; a transposed int4 weight needs an even group length.
void CheckAntiquant(ArgCheck& c, const void* scale, const void* offset, int xd, int wd, bool transposed,
                    int64_t e, int64_t k, int64_t n, const void** scale_t, const void** offset_t,
                    int64_t* groups) {
  const std::string types = "GMM Xtype:" + TypeName(xd) + " Wtype:" + TypeName(wd) + ": ";
  if (!c.ok()) return;
  if (!scale)
    return c.Fail(kParamInvalid,
                  types + "antiquantScale must not be nullptr in antiquant, but now is nullptr.");
  if (!offset)
    return c.Fail(kParamInvalid,
                  types + "antiquantOffset must not be nullptr in antiquant, but now is nullptr.");
  *scale_t = OneTensor(c, "antiquantScale", scale, true);
  *offset_t = OneTensor(c, "antiquantOffset", offset, true);
  if (!c.ok()) return;
  for (const void* t : {*scale_t, *offset_t}) {
    c.RequireLive("antiquant tensor", t);
  }
  const std::vector<int64_t>& d = T(*scale_t)->dims;
  if (d.size() == 3 && wd != kInt4)
    return c.Fail(kParamInvalid, "antiquantScale Dim must be 2, but now is 3.");
  *groups = d.size() == 3 ? d[1] : 1;
  if (d.size() == 3 && !(*groups > 0 && k % *groups == 0)) {
    return c.Fail(kParamInvalid, "perGroupNum must be larger than 0, and can evenly divided by K[" +
                                     std::to_string(k) + "] in A16W4-pergroup case, but now perGroupNum is " +
                                     std::to_string(*groups) + ".");
  }
  if (!((d.size() == 2 || d.size() == 3) && d.front() == e && d.back() == n))
    return c.Fail(kParamInvalid, "Invalid antiquantScale");
  if (wd == kInt4 && transposed && d.size() == 3 && (k / *groups) % 2 != 0) {
    return c.Fail(
        kParamInvalid,
        "pergroupSize should be even when weight is transposed in A16W4-pergroup case, but now is " +
            std::to_string(k / *groups));
  }
  if (T(*scale_t)->dtype != xd)
    return c.Fail(kParamInvalid,
                  "GMM: antiquantScale dtype does not match with x dtype[" + TypeName(xd) + "].");
  if (T(*offset_t)->dtype != xd)
    return c.Fail(kParamInvalid,
                  "GMM: antiquantOffset dtype does not match with x dtype[" + TypeName(xd) + "].");
  c.Check("antiquantScale[0]", *scale_t, true, {xd}, d);
  c.Check("antiquantOffset[0]", *offset_t, true, {xd}, d);
}

// CheckGroupListCommonTensor: an int64 [E] tensor of at most 1024 entries.
void CheckGroupList(ArgCheck& c, const void* group_list, int64_t e) {
  if (c.ok() && !group_list)
    c.Fail(kParamInvalid, "groupListOptional(tensor) is required in this case, but get nullptr.");
  c.Check("groupListOptional", group_list, true, {kInt64}, {-1});
  if (!c.ok()) return;
  const int64_t groups = T(group_list)->dims[0];
  if (groups > kMaxGroupListTensor) {
    c.Fail(kParamInvalid, "When groupList type is tenosr, size of groupList " + std::to_string(groups) +
                              " should be less than or equal to 1024.");
  } else if (!((groups == e && e > 1) || e == 1)) {
    c.Fail(kParamInvalid, "When groupList is not null, size of groupList(tensor) " + std::to_string(groups) +
                              " should be equal to weight dim 0 " + std::to_string(e) + " with groupType 0.");
  }
}

}  // namespace

extern "C" {

int aclnnGroupedMatmulV4GetWorkspaceSize(const void* x, const void* weight, const void* bias,
                                         const void* scale, const void* offset, const void* antiquant_scale,
                                         const void* antiquant_offset, const void* per_token_scale,
                                         const void* group_list, const void* activation_input,
                                         const void* activation_quant_scale,
                                         const void* activation_quant_offset, int64_t split_item,
                                         int64_t group_type, int64_t group_list_type, int64_t act_type,
                                         void* out, void* activation_feature_out, void* dyn_quant_scale_out,
                                         uint64_t* workspace_size, void** executor) {
  ArgCheck c("aclnnGroupedMatmulV4GetWorkspaceSize");
  // The l0 operator finds no kernel: its null result is 561103 (aclnn_grouped_matmul.cpp,
  // CHECK_RET(result != nullptr, ACLNN_ERR_INNER_NULLPTR)), as any infer-shape or tiling failure.
  c.RequireKernels(kInnerNullptr);
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  const void* xt = OneTensor(c, "x", x, true);
  const void* wt = OneTensor(c, "weight", weight, true);
  const void* yt = OneTensor(c, "y", out, true);
  if (!c.ok()) return c.status();
  // PreCheckGroupType / CheckCommonParam.
  if ((split_item == 2 || split_item == 3) && group_type == -1) {
    c.Fail(kParamInvalid, "When splitItem is 2/3, groupType can not be -1.");
  } else if (split_item != 2 && split_item != 3) {
    c.Fail(kParamInvalid, "When y is not separated, splitItem should be 2/3, but current splitItem is " +
                              std::to_string(split_item) + ".");
  } else if (group_type != 0) {
    c.Fail(kParamInvalid, "the fake models groupType 0 (split M) only, got " + std::to_string(group_type));
  }
  if (group_list_type != 0 && group_list_type != 1) {
    c.Fail(kParamInvalid, group_list_type == 2 ? "the fake does not model groupListType 2 (sparse)"
                                               : "groupListType shoule be 0 or 1.");
  }
  if (act_type != 0) c.Fail(kParamInvalid, "non quant case dose not support activation.");
  if (activation_input || activation_quant_scale || activation_quant_offset || activation_feature_out ||
      dyn_quant_scale_out) {
    c.Fail(kParamInvalid, "activation inputs / outputs are for quantised activation only");
  }
  if (!c.ok()) return c.status();
  c.RequireLive("x[0]", xt);
  if (!c.ok()) return c.status();
  const int xd = T(xt)->dtype;
  const bool w8a8 = xd == kInt8;
  const int wd = FakeAclnnIsTensor(wt) ? T(wt)->dtype : xd;
  const bool antiquant = (xd == kFloat16 || xd == kBFloat16) && (wd == kInt8 || wd == kInt4);
  if (!w8a8) {  // CheckNonQuant, CheckGroupedMatmulAntiQuant
    for (const void* q : {scale, offset, per_token_scale}) {
      if (q && c.ok())
        c.Fail(kParamInvalid, antiquant ? "Detected antiquant, but quant inputs is not empty!"
                                        : "Detected nonquant, but quant inputs is not empty!");
    }
  }
  if ((antiquant_scale || antiquant_offset) && c.ok() && (w8a8 || wd == xd)) {
    c.Fail(kParamInvalid, w8a8 ? "Detected quant, but antiquant inputs is not empty!"
                               : "Detected nonquant, but antiquant inputs is not empty!");
  }
  if (!c.ok()) return c.status();
  if (!((xd == kFloat || xd == kFloat16 || xd == kBFloat16) && wd == xd) && !w8a8 && !antiquant) {
    c.Fail(kParamInvalid, "GMM: there is no matching xDtype and weightDtype pattern. case with x dtype " +
                              TypeName(xd) + " and weight dtype " + TypeName(wd) + " is not supported.");
    return c.status();
  }
  // Check310PlatformForFunction: on Ascend310P float16 x, weight, bias and y only, no quantisation.
  std::string soc = SocName();
  for (char& ch : soc) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  if (soc.rfind("ascend310p", 0) == 0) {
    const int bd = bias && FakeAclnnIsTensorList(bias) && !L(bias)->tensors.empty() ? T(L(bias)->tensors[0])->dtype
                                                                                   : kFloat16;
    if (xd != kFloat16 || wd != kFloat16 || bd != kFloat16) {
      c.Fail(kParamInvalid, "Only float16 is supported on Ascend310P platforms.");
      return c.status();
    }
  }
  c.Check("x[0]", xt, true, {xd}, {-1, -1});
  if (!c.ok()) return c.status();
  const int64_t m = T(xt)->dims[0], k = T(xt)->dims[1];
  bool transposed = false;
  if (!CheckWeight(c, wt, w8a8 ? kInt8 : antiquant ? wd : xd, k, &transposed)) return c.status();
  const int64_t e = T(wt)->dims[0], n = T(wt)->dims[2];
  const void* aq_scale_t = nullptr;
  const void* aq_offset_t = nullptr;
  int64_t aq_groups = 1;
  if (antiquant)
    CheckAntiquant(c, antiquant_scale, antiquant_offset, xd, wd, transposed, e, k, n, &aq_scale_t,
                   &aq_offset_t, &aq_groups);
  const void* scale_t = nullptr;
  const void* per_token_t = nullptr;
  if (w8a8) {
    c.RequireLive("y[0]", yt);
    CheckW8A8(c, yt, scale, offset, per_token_scale, m, e, n, &scale_t, &per_token_t);
  }
  if (!c.ok()) return c.status();
  const int yd = w8a8 ? T(yt)->dtype : xd;
  c.Check("y[0]", yt, true, {yd}, {m, n});
  const void* bt = OneTensor(c, "biasOptional", bias, false);
  // CheckNonQuantMatmulDataType: bias is float for bfloat16 x, x's type otherwise; W8A8: int32
  // (the operator's bfloat16 bias is not modelled).
  c.Check("bias[0]", bt, false, {w8a8 ? kInt32 : xd == kBFloat16 ? kFloat : xd}, {e, n});
  CheckGroupList(c, group_list, e);
  if (!c.ok()) return c.status();

  ascend_moe::cpu::GroupedMatmulParams p;
  p.rows = m;
  p.depth = k;
  p.cols = n;
  p.groups = e;
  p.type = GmmTypeOf(xd);
  p.out_type = GmmTypeOf(yd);
  p.bias_float32 = bt && T(bt)->dtype == kFloat;
  if (w8a8) {
    p.weight = ascend_moe::cpu::GmmWeight::kInt8;
    if (scale_t) p.scale_type = GmmTypeOf(T(scale_t)->dtype);
  }
  if (antiquant) {
    // ACL_INT4 elements in memory are the CPU kernel's int4 words (element 2j in the low nibble).
    p.weight = wd == kInt4 ? ascend_moe::cpu::GmmWeight::kInt4 : ascend_moe::cpu::GmmWeight::kInt8;
    p.antiquant_groups = aq_groups;
    p.antiquant_type = GmmTypeOf(xd);
  }
  p.transpose_weight = transposed;
  auto run = [=]() {
    const int64_t* values = static_cast<const int64_t*>(Data(group_list));
    std::vector<int64_t> ends(static_cast<size_t>(e));
    int64_t total = 0;
    for (int64_t i = 0; i < e; ++i) {
      const int64_t v = values[i];
      const int64_t end = group_list_type == 1 ? total + v : v;
      if (v < 0 || end < total || end > m) {
        FakeAclError(("aclnnGroupedMatmulV4: group list value " + std::to_string(v) + " at [" +
                      std::to_string(i) + "] leaves [0, M = " + std::to_string(m) +
                      "] or decreases: the NPU would read and write out of bounds (status 561002)")
                         .c_str());
        return static_cast<int>(kTilingError);
      }
      ends[static_cast<size_t>(i)] = total = end;
    }
    // Only the grouped rows [0, total) are written: the CPU kernel over that prefix.
    ascend_moe::cpu::GroupedMatmulParams q = p;
    q.rows = total;
    if (q.rows == 0) return static_cast<int>(kOk);
    ascend_moe::cpu::GroupedMatmulBuffers b;
    b.x = Data(xt);
    b.weight = Data(wt);
    b.bias = bt ? Data(bt) : nullptr;
    b.scale = scale_t ? Data(scale_t) : nullptr;
    b.antiquant_scale = aq_scale_t ? Data(aq_scale_t) : nullptr;
    b.antiquant_offset = aq_offset_t ? Data(aq_offset_t) : nullptr;
    b.per_token_scale = per_token_t ? static_cast<const float*>(Data(per_token_t)) : nullptr;
    b.y = Data(yt);
    ascend_moe::cpu::GroupedMatmul(q, b, ends.data());
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnGroupedMatmulV4", 16 * 1024 * 1024,
                      {xt, wt, bt, yt, group_list, scale_t, per_token_t, aq_scale_t, aq_offset_t}, run,
                      workspace_size, executor);
}

int aclnnGroupedMatmulV4(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnGroupedMatmulV4", workspace, workspace_size, executor, stream);
}

}  // extern "C"
