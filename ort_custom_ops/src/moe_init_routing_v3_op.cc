// ascend.moe::MoeInitRoutingV3 for ONNX Runtime (docs/operators.md): the op definition (inputs,
// outputs, attributes, shape inference), validation (the messages of onnx_schemas.moe_init_routing_v3)
// and the CPU kernel, which sorts on the calling thread and writes the rows on the intra-op pool.
// CPU execution provider only.
#include <algorithm>
#include <iterator>
#include <string>
#include <utility>

#include "op_base.h"
#include "ops.h"
#include "ops_src/cpu/moe_init_routing.h"

namespace ascend_moe {

namespace {

namespace d = defs::moe_init_routing_v3;
constexpr const char* kOp = d::kName;
constexpr int64_t kMaxPairs = 2147483647;  // expanded_row_idx is int32

struct Attrs {
  int64_t active_num, capacity, expert_num, drop_pad, tokens_type, flag, quant, start, end, row_idx_type;
  int64_t resolved_end() const { return end == -1 ? expert_num : end; }
};

template <typename Read>
Attrs ReadAttrs(Read&& read) {
  return {read(d::kAttrActiveNum), read(d::kAttrExpertCapacity), read(d::kAttrExpertNum),
          read(d::kAttrDropPadMode), read(d::kAttrExpertTokensNumType), read(d::kAttrExpertTokensNumFlag),
          read(d::kAttrQuantMode), read(d::kAttrActiveExpertStart), read(d::kAttrActiveExpertEnd),
          read(d::kAttrRowIdxType)};
}

std::string AttrError(const char* name, const std::string& rest) {
  return Str(kOp, ": attribute '", name, "' ", rest);
}

// The message for the first invalid attribute or combination; empty when all are valid.
std::string CheckAttrs(const Attrs& a) {
  const int64_t e = a.expert_num;
  if (e < 1) return AttrError("expert_num", Str("must be >= 1, got ", e));
  if (a.drop_pad != 0 && a.drop_pad != 1) {
    return AttrError("drop_pad_mode", Str("must be 0 (dropless) or 1 (drop/pad), got ", a.drop_pad));
  }
  if (a.tokens_type < 0 || a.tokens_type > 2) {
    return AttrError("expert_tokens_num_type",
                     Str("must be 0 (cumsum), 1 (count) or 2 (key_value), got ", a.tokens_type));
  }
  if (a.flag != 0 && a.flag != 1) return AttrError("expert_tokens_num_flag", Str("must be 0 or 1, got ", a.flag));
  if (a.quant < -1 || a.quant > 1) {
    return AttrError("quant_mode", Str("must be -1 (none), 0 (static int8) or 1 (dynamic int8), got ", a.quant,
                                       " (the MXFP8/HIF8/MXFP4/FP8/INT4 modes are not supported)"));
  }
  if (a.row_idx_type != 0 && a.row_idx_type != 1) {
    return AttrError("row_idx_type", Str("must be 0 (gather) or 1 (scatter), got ", a.row_idx_type));
  }
  if (a.active_num < -1) return AttrError("active_num", Str("must be >= -1, got ", a.active_num));
  if (a.start < 0) return AttrError("active_expert_start", Str("must be >= 0, got ", a.start));
  if (a.end != -1 && !(a.start < a.end && a.end <= e)) {
    return AttrError("active_expert_end", Str("must be -1 or in (active_expert_start, expert_num] = (", a.start,
                                              ", ", e, "], got ", a.end));
  }
  if (a.end == -1 && a.start >= e) {
    return AttrError("active_expert_start", Str("must be < expert_num = ", e, ", got ", a.start));
  }
  if (a.drop_pad == 1) {
    if (a.capacity < 1) {
      return AttrError("expert_capacity", Str("must be >= 1 when drop_pad_mode is 1, got ", a.capacity));
    }
    if (a.tokens_type != 1) {
      return AttrError("expert_tokens_num_type", Str("must be 1 (count) when drop_pad_mode is 1, got ", a.tokens_type));
    }
    if (a.row_idx_type != 0) {
      return AttrError("row_idx_type", Str("must be 0 when drop_pad_mode is 1, got ", a.row_idx_type));
    }
    if (a.start != 0 || a.resolved_end() != e) {
      return Str(kOp, ": the active expert range must be [0, expert_num) = [0, ", e,
                 ") when drop_pad_mode is 1, got [", a.start, ", ", a.end, ")");
    }
  }
  return {};
}

[[noreturn]] void FailInput(const char* name, const std::string& rest) {
  Fail(Str(kOp, ": input '", name, "' ", rest));
}

cpu::RowType RowTypeOf(ONNXTensorElementDataType t) {
  switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return cpu::RowType::kFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return cpu::RowType::kBFloat16;
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return cpu::RowType::kInt8;
    default: return cpu::RowType::kFloat;
  }
}

void CheckType(const InputView& v, size_t index) {
  const ParamSpec& spec = d::kInputs[index];
  if (std::find(spec.types, spec.types + spec.num_types, v.type) == spec.types + spec.num_types) {
    FailInput(spec.name, Str("must be ", TypeList(spec), ", got ", TypeName(v.type)));
  }
}

// Checks the inputs against the attributes (no data read) and returns the kernel parameters.
cpu::MoeInitRoutingParams Validate(const InputView& x, const InputView& idx, const InputView& scale,
                                   const InputView& offset, const Attrs& a) {
  if (!x.present) FailInput("x", "is required, got none");
  if (!idx.present) FailInput("expert_idx", "is required, got none");
  CheckType(x, d::kInX);
  if (x.shape.size() != 2) FailInput("x", Str("must be 2-D [N, H], got shape ", ShapeStr(x.shape)));
  const int64_t n = x.shape[0], h = x.shape[1];
  if (h < 1) FailInput("x", Str("must have H >= 1, got shape ", ShapeStr(x.shape)));
  CheckType(idx, d::kInExpertIdx);
  if (idx.shape.size() != 2) FailInput("expert_idx", Str("must be 2-D [N, K], got shape ", ShapeStr(idx.shape)));
  if (idx.shape[0] != n) {
    FailInput("expert_idx", Str("must have N = ", n, " rows (x.shape[0]), got shape ", ShapeStr(idx.shape)));
  }
  const int64_t k = idx.shape[1];
  if (k < 1) FailInput("expert_idx", Str("must have K >= 1, got shape ", ShapeStr(idx.shape)));
  if (n > kMaxPairs / k) {
    FailInput("expert_idx", Str("must have at most ", kMaxPairs, " elements (expanded_row_idx is int32), got N*K = ",
                                n * k));
  }
  if (a.quant != -1 && x.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8) {
    FailInput("x", Str("must be float, float16 or bfloat16 when quant_mode is ", a.quant, ", got int8"));
  }
  if (scale.present) CheckType(scale, d::kInScale);
  if (offset.present) CheckType(offset, d::kInOffset);
  const int64_t width = a.resolved_end() - a.start;
  if (a.quant == 0) {
    const std::pair<const InputView*, const char*> both[] = {{&scale, "scale"}, {&offset, "offset"}};
    for (const auto& [v, name] : both) {
      if (!v->present) FailInput(name, "is required when quant_mode is 0");
      if (v->shape != std::vector<int64_t>{1}) {
        FailInput(name, Str("must have shape [1] when quant_mode is 0, got shape ", ShapeStr(v->shape)));
      }
    }
  } else {
    if (offset.present) FailInput("offset", Str("must be absent when quant_mode is ", a.quant));
    if (scale.present && a.quant == -1 && scale.shape != std::vector<int64_t>{n}) {
      FailInput("scale", Str("must have shape [N] = [", n, "] when quant_mode is -1, got shape ", ShapeStr(scale.shape)));
    }
    if (scale.present && a.quant == 1 &&
        (scale.shape.size() != 2 || (scale.shape[0] != 1 && scale.shape[0] != width) || scale.shape[1] != h)) {
      FailInput("scale", Str("must have shape [", width, ", H] or [1, H] (H = ", h,
                             ") when quant_mode is 1, got shape ", ShapeStr(scale.shape)));
    }
  }
  cpu::MoeInitRoutingParams p;
  p.num_tokens = n;
  p.top_k = k;
  p.cols = h;
  p.x_type = RowTypeOf(x.type);
  p.idx_int64 = idx.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64;
  p.expert_num = a.expert_num;
  p.expert_start = a.start;
  p.expert_end = a.resolved_end();
  p.active_num = a.active_num;
  p.expert_capacity = a.capacity;
  p.drop_pad_mode = a.drop_pad;
  p.tokens_num_type = a.tokens_type;
  p.quant_mode = a.quant;
  p.row_idx_type = a.row_idx_type;
  p.scale_rows = scale.present ? scale.shape[0] : 0;
  return p;
}

std::vector<int64_t> CountsShape(const Attrs& a) {
  if (a.tokens_type == 2) return {a.expert_num, 2};
  return {a.resolved_end() - a.start};
}

OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  const Attrs a = ReadAttrs([&](size_t i) { return InferAttrInt(api, ctx, d::kAttrs[i]); });
  const std::string error = CheckAttrs(a);
  InferredTensor x{}, idx{};
  const bool has_x = GetInferInput(api, ctx, d::kInX, &x);
  const bool has_idx = GetInferInput(api, ctx, d::kInExpertIdx, &idx);
  InferDim h{}, pairs{};
  if (has_x && x.dims.size() == 2) h = x.dims[1];
  if (has_idx && idx.dims.size() == 2 && idx.dims[0].value >= 0 && idx.dims[1].value >= 0) {
    pairs.value = idx.dims[0].value * idx.dims[1].value;
  }
  auto out = [&](size_t i, ONNXTensorElementDataType type, std::vector<InferDim> dims) {
    return SetInferOutput(api, ctx, i, InferredTensor{type, std::move(dims), true});
  };
  std::vector<InferDim> x_dims, scale_dims;
  if (error.empty() && a.drop_pad == 1) {
    x_dims = {InferDim{a.expert_num, {}}, InferDim{a.capacity, {}}, h};
    scale_dims = {InferDim{a.expert_num * a.capacity, {}}};
  } else {
    InferDim rows{};
    if (pairs.value >= 0) rows.value = a.active_num <= 0 ? pairs.value : std::min(a.active_num, pairs.value);
    x_dims = {rows, h};
    scale_dims = {rows};
  }
  const ONNXTensorElementDataType x_type =
      a.quant != -1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 : (has_x ? x.type : ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT);
  if (OrtStatusPtr s = out(d::kOutExpandedX, x_type, x_dims)) return s;
  if (OrtStatusPtr s = out(d::kOutExpandedRowIdx, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {pairs})) return s;
  std::vector<InferDim> c_dims;
  for (int64_t v : CountsShape(a)) c_dims.push_back(InferDim{error.empty() ? v : -1, {}});
  if (OrtStatusPtr s = out(d::kOutExpertTokensCountOrCumsum, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64, c_dims)) return s;
  if (OrtStatusPtr s = out(d::kOutExpandedScale, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, scale_dims)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

constexpr int64_t kChunkBytes = int64_t{1} << 20;

Attrs ReadKernelAttrs(const OrtKernelInfo* info) {
  const Attrs a = ReadAttrs([&](size_t i) { return ReadIntAttr(info, kOp, d::kAttrs[i]); });
  const std::string error = CheckAttrs(a);
  if (!error.empty()) Fail(error);
  return a;
}

struct CpuKernel {
  static constexpr const char* kProvider = kCpuProvider;

  explicit CpuKernel(const OrtKernelInfo* info) : attrs_(ReadKernelAttrs(info)) {}

  void Compute(Ort::KernelContext& ctx) {
    const InputView x = GetInputView(ctx, d::kInX);
    const InputView idx = GetInputView(ctx, d::kInExpertIdx);
    const InputView scale = GetInputView(ctx, d::kInScale);
    const InputView offset = GetInputView(ctx, d::kInOffset);
    const cpu::MoeInitRoutingParams p = Validate(x, idx, scale, offset, attrs_);
    cpu::MoeInitRoutingPlan plan;
    const int64_t bad = plan.Build(p, idx.data);
    if (bad >= 0) {
      const int64_t v = p.idx_int64 ? static_cast<const int64_t*>(idx.data)[bad]
                                    : static_cast<const int32_t*>(idx.data)[bad];
      FailInput("expert_idx", Str("must hold expert ids in [0, expert_num) = [0, ", p.expert_num, "), got ", v,
                                  " at [", bad / p.top_k, ", ", bad % p.top_k, "]"));
    }
    auto output = [&](size_t i, const std::vector<int64_t>& shape, ONNXTensorElementDataType type) {
      return GetCheckedOutput(ctx, kOp, d::kOutputs, i, shape, type, /*required=*/true);
    };
    const int64_t rows = plan.out_rows();
    std::vector<int64_t> x_shape{rows, p.cols};
    if (p.drop_pad_mode == 1) x_shape = {p.expert_num, p.expert_capacity, p.cols};
    cpu::MoeInitRoutingBuffers b;
    b.x = x.data;
    b.scale = scale.present ? static_cast<const float*>(scale.data) : nullptr;
    b.offset = offset.present ? static_cast<const float*>(offset.data) : nullptr;
    b.expanded_x = output(d::kOutExpandedX, x_shape, p.quant_mode == -1 ? x.type : ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8);
    plan.WriteRowIdx(static_cast<int32_t*>(
        output(d::kOutExpandedRowIdx, {p.num_tokens * p.top_k}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)));
    plan.WriteCounts(static_cast<int64_t*>(
        output(d::kOutExpertTokensCountOrCumsum, CountsShape(attrs_), ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)));
    b.expanded_scale = static_cast<float*>(output(d::kOutExpandedScale, {rows}, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT));
    ParallelForRange(ctx, rows, plan.RowsPerChunk(kChunkBytes),
                     [&](int64_t begin, int64_t end) { plan.ExpandRows(b, begin, end); });
  }

 private:
  Attrs attrs_;
};

struct Def {
  static constexpr const char* kName = kOp;
  static constexpr int kSinceVersion = d::kSinceVersion;
  static constexpr const ParamSpec* kInputs = d::kInputs;
  static constexpr size_t kNumInputs = std::size(d::kInputs);
  static constexpr const ParamSpec* kOutputs = d::kOutputs;
  static constexpr size_t kNumOutputs = std::size(d::kOutputs);
  static constexpr const AttrSpec* kAttrs = d::kAttrs;
  static constexpr size_t kNumAttrs = std::size(d::kAttrs);
  static constexpr auto InferShapes = &ascend_moe::InferShapes;

  // expanded_x is x's type without quantisation and int8 with it.
  static std::vector<ONNXTensorElementDataType> OutputTypes(const OrtKernelInfo* info,
                                                           const std::vector<GraphTensor>& inputs) {
    std::vector<ONNXTensorElementDataType> types(kNumOutputs, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED);
    const int64_t quant = ReadIntAttr(info, kOp, d::kAttrs[d::kAttrQuantMode]);
    types[d::kOutExpandedX] = quant != -1 ? ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8 : inputs[d::kInX].type;
    return types;
  }
};

}  // namespace

std::vector<const OrtCustomOp*> MoeInitRoutingV3Ops() {
  static const AscendMoeOp<Def, CpuKernel> cpu_op;
  return {&cpu_op};
}

}  // namespace ascend_moe
