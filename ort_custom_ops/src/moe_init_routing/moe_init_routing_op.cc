// ascend.moe::MoeInitRouting for ONNX Runtime (docs/operators.md): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rule, the input validation (the
// messages of onnx_schemas.moe_init_routing) and the CPU kernel (ops_src/cpu/expert_sort's
// sort and row copy; ComputeMoeInitRouting is also the CANN kernel's host fallback).
#include <algorithm>
#include <string>

#include "cann_kernel.h"
#include "moe_init_routing_host.h"
#include "op_base.h"

namespace ascend_moe {

namespace d = defs::moe_init_routing;

std::string d::CheckAttrs(const Attrs& a) {
  if (a.active_num < 0) return Str(kName, ": attribute 'active_num' must be >= 0, got ", a.active_num);
  return {};
}

OrtStatusPtr ORT_API_CALL d::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  const Attrs a = InferAttrs(api, ctx, &error);
  const InferredRouting routing = InferRouting(api, ctx, kInX, kInExpertIdx, 2);
  InferDim rows{};  // min(N, active_num) * K
  if (routing.pairs.value >= 0)
    rows.value = std::min(routing.tokens.value, std::max<int64_t>(a.active_num, 0)) * routing.k.value;
  const InferredTensor expanded_x{routing.row_type, {rows, routing.h}, true};
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutExpandedX, expanded_x)) return s;
  for (Out o : {kOutExpandedRowIdx, kOutExpandedExpertIdx}) {
    if (OrtStatusPtr s = SetInferOutput(
            api, ctx, o, InferredTensor{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {routing.pairs}, true})) {
      return s;
    }
  }
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

namespace {

constexpr int64_t kMaxPairs = limits::moe_init_routing::kMaxPairs;

[[noreturn]] void FailInput(d::In input, const std::string& rest) {
  Fail(Str(d::kName, ": input '", d::kInputs[input].name, "' ", rest));
}

}  // namespace

cpu::MoeInitRoutingParams ValidateMoeInitRouting(const InitRoutingInputs& in, const d::Attrs& a) {
  using namespace d;
  const InputView &x = in[kInX], &row = in[kInRowIdx], &e = in[kInExpertIdx];
  if (x.shape.size() != 2) FailInput(kInX, Str("must be 2-D [N, H], got shape ", ShapeStr(x.shape)));
  const int64_t n = x.shape[0], h = x.shape[1];
  if (h < 1) FailInput(kInX, Str("must have H >= 1, got shape ", ShapeStr(x.shape)));
  if (e.shape.size() != 2) FailInput(kInExpertIdx, Str("must be 2-D [N, K], got shape ", ShapeStr(e.shape)));
  if (e.shape[0] != n) {
    FailInput(kInExpertIdx, Str("must have N = ", n, " rows (x.shape[0]), got shape ", ShapeStr(e.shape)));
  }
  const int64_t k = e.shape[1];
  if (k < 1) FailInput(kInExpertIdx, Str("must have K >= 1, got shape ", ShapeStr(e.shape)));
  if (row.shape != e.shape) {
    FailInput(kInRowIdx, Str("must have the shape of expert_idx ", ShapeStr(e.shape), ", got shape ",
                             ShapeStr(row.shape)));
  }
  if (n > kMaxPairs / k)
    FailInput(kInExpertIdx, Str("must have at most ", kMaxPairs, " elements, got ", n * k));
  cpu::MoeInitRoutingParams p = RoutingParams(n, k, h, x.type, e.type);  // e: int32 (the table)
  p.permute = true;
  p.num_out_rows = std::min(n, a.active_num) * k;
  return p;
}

void CheckMoeInitRoutingIndices(const InitRoutingInputs& in, const cpu::MoeInitRoutingParams& p) {
  using namespace d;
  const auto* expert_idx = static_cast<const int32_t*>(in[kInExpertIdx].data);
  const auto* row_idx = static_cast<const int32_t*>(in[kInRowIdx].data);
  const int64_t pairs = p.num_tokens * p.top_k;
  // expert ids first, as the reference checks them
  for (int64_t i = 0; i < pairs; ++i) {
    if (expert_idx[i] < 0 || expert_idx[i] >= limits::moe_init_routing::kMaxExpertId) {
      FailInput(kInExpertIdx, Str("must hold expert ids in [0, ", limits::moe_init_routing::kMaxExpertId,
                                  "), got ", expert_idx[i], " at [", i / p.top_k, ", ", i % p.top_k, "]"));
    }
  }
  const int64_t bad = cpu::FirstBadRowIdx(row_idx, pairs);
  if (bad >= 0) {
    FailInput(kInRowIdx, Str("must be a permutation of [0, N*K) = [0, ", pairs, "), got ", row_idx[bad],
                             " at [", bad / p.top_k, ", ", bad % p.top_k, "]"));
  }
}

void ComputeMoeInitRouting(Ort::KernelContext& ctx, const InitRoutingInputs& in, const d::Attrs& attrs,
                           const HostOutputFn& output) {
  using namespace d;
  const cpu::MoeInitRoutingParams p = ValidateMoeInitRouting(in, attrs);
  const auto* expert_idx = static_cast<const int32_t*>(in[kInExpertIdx].data);
  const auto* row_idx = static_cast<const int32_t*>(in[kInRowIdx].data);
  const int64_t pairs = p.num_tokens * p.top_k;
  CheckMoeInitRoutingIndices(in, p);
  cpu::MoeInitRoutingPlan plan;
  if (plan.Build(p, expert_idx, row_idx) >= 0) Fail(Str(kName, ": internal error: expert ids rejected"));
  cpu::MoeInitRoutingBuffers b;
  b.x = in[kInX].data;
  b.expanded_x = output(kOutExpandedX, {plan.out_rows(), p.cols}, in[kInX].type);
  plan.WriteRowIdx(
      static_cast<int32_t*>(output(kOutExpandedRowIdx, {pairs}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)));
  plan.WriteSortedExperts(expert_idx, static_cast<int32_t*>(output(kOutExpandedExpertIdx, {pairs},
                                                                   ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)));
  ExpandRowsInParallel(ctx, plan, b, plan.out_rows());
}

std::vector<const OrtCustomOp*> MoeInitRoutingOps() {
  return OpKernels<d::Def, CpuKernel<d::Def, RunOnKernelOutputs<d::Def, ComputeMoeInitRouting>>>(
      MoeInitRoutingCannOp());
}

}  // namespace ascend_moe
