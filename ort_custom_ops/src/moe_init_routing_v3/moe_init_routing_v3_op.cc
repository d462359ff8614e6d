// ascend.moe::MoeInitRoutingV3 for ONNX Runtime (docs/operators.md): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rules, the input validation (the
// messages of onnx_schemas.moe_init_routing_v3) and the CPU kernel, which sorts on the calling
// thread and writes the rows on the intra-op pool (ComputeMoeInitRoutingV3: also the CANN
// kernel's host fallback).
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "cann_kernel.h"
#include "expert_sort_ort.h"
#include "moe_init_routing_v3_host.h"
#include "op_base.h"

namespace ascend_moe {

namespace d = defs::moe_init_routing_v3;
using Attrs = d::Attrs;

namespace {

constexpr const char* kOp = d::kName;
constexpr int64_t kMaxPairs = limits::moe_init_routing_v3::kMaxPairs;

int64_t ResolvedEnd(const Attrs& a) { return a.active_expert_end == -1 ? a.expert_num : a.active_expert_end; }

std::string AttrError(const char* name, const std::string& rest) {
  return Str(kOp, ": attribute '", name, "' ", rest);
}

}  // namespace

// The message for the first invalid attribute or combination; empty when all are valid.
std::string d::CheckAttrs(const Attrs& a) {
  const int64_t e = a.expert_num;
  if (e < 1) return AttrError("expert_num", Str("must be >= 1, got ", e));
  if (a.drop_pad_mode != 0 && a.drop_pad_mode != 1) {
    return AttrError("drop_pad_mode", Str("must be 0 (dropless) or 1 (drop/pad), got ", a.drop_pad_mode));
  }
  if (a.expert_tokens_num_type < 0 || a.expert_tokens_num_type > 2) {
    return AttrError("expert_tokens_num_type",
                     Str("must be 0 (cumsum), 1 (count) or 2 (key_value), got ", a.expert_tokens_num_type));
  }
  if (a.expert_tokens_num_flag != 0 && a.expert_tokens_num_flag != 1)
    return AttrError("expert_tokens_num_flag", Str("must be 0 or 1, got ", a.expert_tokens_num_flag));
  if (a.quant_mode < -1 || a.quant_mode > 1) {
    return AttrError("quant_mode",
                     Str("must be -1 (none), 0 (static int8) or 1 (dynamic int8), got ", a.quant_mode,
                         " (the MXFP8/HIF8/MXFP4/FP8/INT4 modes are not supported)"));
  }
  if (a.row_idx_type != 0 && a.row_idx_type != 1) {
    return AttrError("row_idx_type", Str("must be 0 (gather) or 1 (scatter), got ", a.row_idx_type));
  }
  if (a.active_num < -1) return AttrError("active_num", Str("must be >= -1, got ", a.active_num));
  if (a.active_expert_start < 0)
    return AttrError("active_expert_start", Str("must be >= 0, got ", a.active_expert_start));
  if (a.active_expert_end != -1 &&
      !(a.active_expert_start < a.active_expert_end && a.active_expert_end <= e)) {
    return AttrError("active_expert_end",
                     Str("must be -1 or in (active_expert_start, expert_num] = (", a.active_expert_start,
                         ", ", e, "], got ", a.active_expert_end));
  }
  if (a.active_expert_end == -1 && a.active_expert_start >= e) {
    return AttrError("active_expert_start",
                     Str("must be < expert_num = ", e, ", got ", a.active_expert_start));
  }
  if (a.drop_pad_mode == 1) {
    if (a.expert_capacity < 1) {
      return AttrError("expert_capacity",
                       Str("must be >= 1 when drop_pad_mode is 1, got ", a.expert_capacity));
    }
    if (a.expert_capacity > kMaxPairs / e) {
      return AttrError("expert_capacity", Str("must be at most ", kMaxPairs / e,
                                              " (expert_num * expert_capacity rows, indexed by int32), got ",
                                              a.expert_capacity));
    }
    if (a.expert_tokens_num_type != 1) {
      return AttrError("expert_tokens_num_type",
                       Str("must be 1 (count) when drop_pad_mode is 1, got ", a.expert_tokens_num_type));
    }
    if (a.row_idx_type != 0) {
      return AttrError("row_idx_type", Str("must be 0 when drop_pad_mode is 1, got ", a.row_idx_type));
    }
    if (a.active_expert_start != 0 || ResolvedEnd(a) != e) {
      return Str(kOp, ": the active expert range must be [0, expert_num) = [0, ", e,
                 ") when drop_pad_mode is 1, got [", a.active_expert_start, ", ", a.active_expert_end, ")");
    }
  }
  return {};
}

namespace {

[[noreturn]] void FailInput(const char* name, const std::string& rest) {
  Fail(Str(kOp, ": input '", name, "' ", rest));
}

}  // namespace

cpu::MoeInitRoutingParams ValidateMoeInitRoutingV3(const InputView& x, const InputView& idx,
                                                   const InputView& scale, const InputView& offset,
                                                   const Attrs& a) {
  if (x.shape.size() != 2) FailInput("x", Str("must be 2-D [N, H], got shape ", ShapeStr(x.shape)));
  const int64_t n = x.shape[0], h = x.shape[1];
  if (h < 1) FailInput("x", Str("must have H >= 1, got shape ", ShapeStr(x.shape)));
  if (idx.shape.size() != 2)
    FailInput("expert_idx", Str("must be 2-D [N, K], got shape ", ShapeStr(idx.shape)));
  if (idx.shape[0] != n) {
    FailInput("expert_idx", Str("must have N = ", n, " rows (x.shape[0]), got shape ", ShapeStr(idx.shape)));
  }
  const int64_t k = idx.shape[1];
  if (k < 1) FailInput("expert_idx", Str("must have K >= 1, got shape ", ShapeStr(idx.shape)));
  if (n > kMaxPairs / k) {
    FailInput("expert_idx", Str("must have at most ", kMaxPairs,
                                " elements (expanded_row_idx is int32), got N*K = ", n * k));
  }
  if (a.quant_mode != -1 && x.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) {
    FailInput("x", Str("must be float, float16 or bfloat16 when quant_mode is ", a.quant_mode, ", got int8"));
  }
  const int64_t width = ResolvedEnd(a) - a.active_expert_start;
  if (a.quant_mode == 0) {
    const std::pair<const InputView*, const char*> both[] = {{&scale, "scale"}, {&offset, "offset"}};
    for (const auto& [v, name] : both) {
      if (!v->present) FailInput(name, "is required when quant_mode is 0");
      if (v->shape != std::vector<int64_t>{1}) {
        FailInput(name, Str("must have shape [1] when quant_mode is 0, got shape ", ShapeStr(v->shape)));
      }
    }
  } else {
    if (offset.present) FailInput("offset", Str("must be absent when quant_mode is ", a.quant_mode));
    if (scale.present && a.quant_mode == -1 && scale.shape != std::vector<int64_t>{n}) {
      FailInput("scale", Str("must have shape [N] = [", n, "] when quant_mode is -1, got shape ",
                             ShapeStr(scale.shape)));
    }
    if (scale.present && a.quant_mode == 1 &&
        (scale.shape.size() != 2 || (scale.shape[0] != 1 && scale.shape[0] != width) ||
         scale.shape[1] != h)) {
      FailInput("scale", Str("must have shape [", width, ", H] or [1, H] (H = ", h,
                             ") when quant_mode is 1, got shape ", ShapeStr(scale.shape)));
    }
  }
  cpu::MoeInitRoutingParams p = RoutingParams(n, k, h, x.type, idx.type);
  p.expert_num = a.expert_num;
  p.expert_start = a.active_expert_start;
  p.expert_end = ResolvedEnd(a);
  p.active_num = a.active_num;
  p.expert_capacity = a.expert_capacity;
  p.drop_pad_mode = a.drop_pad_mode;
  p.tokens_num_type = a.expert_tokens_num_type;
  p.quant_mode = a.quant_mode;
  p.row_idx_type = a.row_idx_type;
  p.scale_rows = scale.present ? scale.shape[0] : 0;
  return p;
}

std::vector<int64_t> MoeInitRoutingV3CountsShape(const Attrs& a) {
  if (a.expert_tokens_num_type == 2) return {a.expert_num, 2};
  return {ResolvedEnd(a) - a.active_expert_start};
}

OrtStatusPtr ORT_API_CALL d::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  const Attrs a = InferAttrs(api, ctx, &error);
  const InferredRouting routing = InferRouting(api, ctx, d::kInX, d::kInExpertIdx, 2);
  const InferDim &h = routing.h, &pairs = routing.pairs;
  auto out = [&](size_t i, ONNXTensorElementDataType type, std::vector<InferDim> dims) {
    return SetInferOutput(api, ctx, i, InferredTensor{type, std::move(dims), true});
  };
  std::vector<InferDim> x_dims, scale_dims;
  if (error.empty() && a.drop_pad_mode == 1) {
    x_dims = {InferDim{a.expert_num, {}}, InferDim{a.expert_capacity, {}}, h};
    scale_dims = {InferDim{a.expert_num * a.expert_capacity, {}}};
  } else {
    InferDim rows{};
    if (pairs.value >= 0) rows.value = a.active_num <= 0 ? pairs.value : std::min(a.active_num, pairs.value);
    x_dims = {rows, h};
    scale_dims = {rows};
  }
  const ONNXTensorElementDataType x_type =
      a.quant_mode != -1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 : routing.row_type;
  if (OrtStatusPtr s = out(d::kOutExpandedX, x_type, x_dims)) return s;
  if (OrtStatusPtr s = out(d::kOutExpandedRowIdx, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {pairs})) return s;
  std::vector<InferDim> c_dims;
  for (int64_t v : MoeInitRoutingV3CountsShape(a)) c_dims.push_back(InferDim{error.empty() ? v : -1, {}});
  if (OrtStatusPtr s = out(d::kOutExpertTokensCountOrCumsum, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, c_dims))
    return s;
  if (OrtStatusPtr s = out(d::kOutExpandedScale, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, scale_dims)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

void ComputeMoeInitRoutingV3(Ort::KernelContext& ctx, const InitRoutingV3Inputs& in, const Attrs& attrs,
                             const HostOutputFn& output) {
  const InputView &x = in[d::kInX], &idx = in[d::kInExpertIdx];
  const InputView &scale = in[d::kInScale], &offset = in[d::kInOffset];
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRoutingV3(x, idx, scale, offset, attrs);
  cpu::MoeInitRoutingPlan plan;
  const int64_t bad = plan.Build(p, idx.data);
  if (bad >= 0) {
    const int64_t v =
        p.idx_int64 ? static_cast<const int64_t*>(idx.data)[bad] : static_cast<const int32_t*>(idx.data)[bad];
    FailInput("expert_idx", Str("must hold expert ids in [0, expert_num) = [0, ", p.expert_num, "), got ", v,
                                " at [", bad / p.top_k, ", ", bad % p.top_k, "]"));
  }
  const int64_t rows = plan.out_rows();
  std::vector<int64_t> x_shape{rows, p.cols};
  if (p.drop_pad_mode == 1) x_shape = {p.expert_num, p.expert_capacity, p.cols};
  cpu::MoeInitRoutingBuffers b;
  b.x = x.data;
  b.scale = scale.present ? static_cast<const float*>(scale.data) : nullptr;
  b.offset = offset.present ? static_cast<const float*>(offset.data) : nullptr;
  b.expanded_x =
      output(d::kOutExpandedX, x_shape, p.quant_mode == -1 ? x.type : ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8);
  plan.WriteRowIdx(static_cast<int32_t*>(
      output(d::kOutExpandedRowIdx, {p.num_tokens * p.top_k}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)));
  plan.WriteCounts(
      static_cast<int64_t*>(output(d::kOutExpertTokensCountOrCumsum, MoeInitRoutingV3CountsShape(attrs),
                                   ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)));
  b.expanded_scale =
      static_cast<float*>(output(d::kOutExpandedScale, {rows}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT));
  ExpandRowsInParallel(ctx, plan, b, rows);
}

std::vector<const OrtCustomOp*> MoeInitRoutingV3Ops() {
  return OpKernels<
      MoeInitRoutingV3Def,
      CpuKernel<MoeInitRoutingV3Def, RunOnKernelOutputs<MoeInitRoutingV3Def, ComputeMoeInitRoutingV3>>>(
      MoeInitRoutingV3CannOp());
}

}  // namespace ascend_moe
