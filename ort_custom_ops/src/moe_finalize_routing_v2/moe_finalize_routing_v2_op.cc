// ascend.moe::MoeFinalizeRoutingV2 for ONNX Runtime (docs/operators.md §5): what the generated
// definition (op_defs.gen.h) leaves to the op: shape inference, the attribute rule, the shape and
// index validation (docs/operators.md §8.3; the messages of onnx_schemas.moe_finalize_routing_v2;
// shared with the CANN kernel, moe_finalize_routing_v2_cann) and the CPU kernel, ops_src/cpu's
// weighted gather over the output rows.
#include <limits>

#include "cann_kernel.h"
#include "op_base.h"
#include "weighted_gather_ort.h"

namespace ascend_moe {

// y is [N, H] of expanded_x's type: N = scales.shape[0], or expanded_row_idx.shape[0] without
// scales; H = expanded_x.shape[-1].
OrtStatusPtr ORT_API_CALL finalize::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  InferAttrs(api, ctx, &error);
  return InferWeightedGatherShape(api, ctx, kInExpandedX, kInExpandedRowIdx, kInScales, kOutY, error);
}

std::string finalize::CheckAttrs(const Attrs& a) {
  if (a.drop_pad_mode >= 0 && a.drop_pad_mode <= 3) return {};
  return Str(kName, ": attribute '", kAttrs[kAttrDropPadMode].name,
             "' must be 0, 1, 2 or 3 (0, 2: dropless; 1, 3: drop-pad; 0, 1: slot-major index; 2, 3: "
             "token-major index), got ",
             a.drop_pad_mode);
}

namespace {

[[noreturn]] void FailInput(finalize::In input, const std::string& what_and_value) {
  Fail(Str(finalize::kName, ": input '", finalize::kInputs[input].name, "' ", what_and_value));
}

int64_t SaturatingMul(int64_t a, int64_t b) {
  int64_t r;
  return __builtin_mul_overflow(a, b, &r) ? std::numeric_limits<int64_t>::max() : r;
}

std::string DimsStr(int64_t a, int64_t b) { return Str("[", a, ", ", b, "]"); }

}  // namespace

cpu::WeightedGatherParams ValidateMoeFinalizeRoutingV2(const finalize::Inputs& in,
                                                       const finalize::Attrs& attrs,
                                                       cpu::WeightedGatherBuffers* buffers) {
  using namespace finalize;
  const int64_t mode = attrs.drop_pad_mode;
  const InputView &x = in[kInExpandedX], &idx = in[kInExpandedRowIdx], &scales = in[kInScales];
  const InputView &bias = in[kInBias], &experts = in[kInExpertIdx];
  const bool drop_pad = mode == 1 || mode == 3;
  const char* modes = drop_pad ? "1 or 3" : "0 or 2";
  if (x.shape.size() != (drop_pad ? 3u : 2u)) {
    FailInput(kInExpandedX, Str("must be ", drop_pad ? "3-D [E, C, H]" : "2-D [N*K, H]",
                                " when drop_pad_mode is ", modes, ", got shape ", ShapeStr(x.shape)));
  }
  const int64_t h = x.shape.back();
  const int64_t r = drop_pad ? SaturatingMul(x.shape[0], x.shape[1]) : x.shape[0];
  const auto [n, k] = CheckWeightedGatherSlots<Def>(in, kInExpandedRowIdx, kInScales);
  if (!drop_pad && x.shape[0] != n * k) {
    FailInput(kInExpandedX, Str("must have N*K = ", n * k, " rows when drop_pad_mode is 0 or 2, got shape ",
                                ShapeStr(x.shape)));
  }
  for (const In skip : {kInX1, kInX2}) {
    if (in[skip].present && in[skip].shape != std::vector<int64_t>{n, h}) {
      FailInput(skip, Str("must be [N, H] = ", DimsStr(n, h), ", got shape ", ShapeStr(in[skip].shape)));
    }
  }
  if (in[kInX2].present && !in[kInX1].present) FailInput(kInX2, "must be absent when x1 is absent");
  if (bias.present) {
    if (!experts.present) FailInput(kInBias, "needs expert_idx (the expert of each slot), got no expert_idx");
    if (bias.shape.size() != 2 || bias.shape[0] < 1 || bias.shape[1] != h) {
      FailInput(kInBias, Str("must be 2-D [E, H] with E >= 1 and H = ", h,
                             " (expanded_x.shape[-1]), got shape ", ShapeStr(bias.shape)));
    }
    if (drop_pad && bias.shape[0] != x.shape[0]) {
      FailInput(kInBias, Str("must have E = ", x.shape[0],
                             " rows (expanded_x.shape[0]) when drop_pad_mode is "
                             "1 or 3, got shape ",
                             ShapeStr(bias.shape)));
    }
  }
  if (experts.present && experts.shape != std::vector<int64_t>{n, k}) {
    FailInput(kInExpertIdx, Str("must be [N, K] = ", DimsStr(n, k), ", got shape ", ShapeStr(experts.shape)));
  }
  const cpu::IndexType idx_type = IndexTypeOf(idx.type);
  // -1: a slot without a row (dropped, or an expert outside init routing's active range), a zero row
  const int64_t bad = cpu::FirstIndexOutside(idx.data, idx_type, idx.size, -1, r);
  if (bad >= 0) {
    FailInput(kInExpandedRowIdx, Str("must be -1 (no row) or in [0, ", drop_pad ? "E*C" : "N*K", ") = [0, ",
                                     r, ") when drop_pad_mode is ", drop_pad ? "1 or 3" : "0 or 2", ", got ",
                                     cpu::IndexAt(idx.data, idx_type, bad), " at [", bad, "]"));
  }
  cpu::WeightedGatherParams p;
  if (bias.present) {
    p.has_bias = true;
    p.expert_type = IndexTypeOf(experts.type);
    const int64_t e = bias.shape[0];
    const int64_t bad_e = cpu::FirstIndexOutside(experts.data, p.expert_type, experts.size, 0, e);
    if (bad_e >= 0) {
      FailInput(kInExpertIdx, Str("must be in [0, E) = [0, ", e, ") (rows of bias), got ",
                                  cpu::IndexAt(experts.data, p.expert_type, bad_e), " at [", bad_e / k, ", ",
                                  bad_e % k, "]"));
    }
    buffers->bias = bias.data;
    buffers->expert_index = experts.data;
  }
  p.num_out_rows = n;
  p.k = k;
  p.hidden = h;
  p.num_rows = r;
  p.row_type = RowTypeOf(x.type);
  p.index_type = idx_type;
  p.token_major = mode == 2 || mode == 3;
  p.drop_pad_mode = mode;
  if (scales.present) {
    p.has_weights = true;
    p.weight_type = RowTypeOf(scales.type);
    buffers->weights = scales.data;
  }
  for (const In skip : {kInX1, kInX2}) {
    if (in[skip].present) buffers->base[p.num_base++] = in[skip].data;
  }
  buffers->rows = x.data;
  buffers->row_index = idx.data;
  return p;
}

std::vector<const OrtCustomOp*> MoeFinalizeRoutingV2Ops() {
  return OpKernels<finalize::Def, WeightedGatherCpuKernel<finalize::Def, ValidateMoeFinalizeRoutingV2>>(
      MoeFinalizeRoutingV2CannOp());
}

}  // namespace ascend_moe
