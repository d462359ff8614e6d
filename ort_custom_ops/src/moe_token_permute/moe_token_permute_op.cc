// ascend.moe::MoeTokenPermute for ONNX Runtime (docs/operators.md): what the generated definition
// (op_defs.gen.h) leaves to the op: shape inference, the attribute rule, the input validation (the
// messages of onnx_schemas.moe_token_permute) and the CPU kernel (ops_src/cpu/expert_sort's sort
// and row copy; ComputeMoeTokenPermute is also the CANN kernel's host fallback).
#include <algorithm>
#include <iterator>
#include <string>

#include "cann_kernel.h"
#include "moe_token_permute_host.h"
#include "op_base.h"

namespace ascend_moe {

namespace d = defs::moe_token_permute;

std::string d::CheckAttrs(const Attrs& a) {
  if (a.padded_mode != 0) {
    return Str(kName, ": attribute 'padded_mode' must be 0 (padded mode is not supported), got ",
               a.padded_mode);
  }
  return {};
}

namespace {

constexpr const char* kOp = d::kName;
constexpr int64_t kMaxPairs = limits::moe_token_permute::kMaxPairs;
using Attrs = d::Attrs;

int64_t OutRows(int64_t pairs, int64_t num_out_tokens) {
  if (num_out_tokens > 0) return std::min(num_out_tokens, pairs);
  return std::max<int64_t>(pairs + num_out_tokens, 0);
}

[[noreturn]] void FailInput(const char* name, const std::string& rest) {
  Fail(Str(kOp, ": input '", name, "' ", rest));
}

}  // namespace

cpu::MoeInitRoutingParams ValidateMoeTokenPermute(const InputView& tokens, const InputView& idx,
                                                  const Attrs& a) {
  if (tokens.shape.size() != 2)
    FailInput("tokens", Str("must be 2-D [N, H], got shape ", ShapeStr(tokens.shape)));
  const int64_t n = tokens.shape[0], h = tokens.shape[1];
  if (h < 1) FailInput("tokens", Str("must have H >= 1, got shape ", ShapeStr(tokens.shape)));
  if (idx.shape.size() != 1 && idx.shape.size() != 2) {
    FailInput("indices", Str("must be 1-D [N] or 2-D [N, K], got shape ", ShapeStr(idx.shape)));
  }
  if (idx.shape[0] != n) {
    FailInput("indices",
              Str("must have N = ", n, " rows (tokens.shape[0]), got shape ", ShapeStr(idx.shape)));
  }
  const int64_t k = idx.shape.size() == 2 ? idx.shape[1] : 1;
  if (k < 1) FailInput("indices", Str("must have K >= 1, got shape ", ShapeStr(idx.shape)));
  if (n > kMaxPairs / k) {
    FailInput("indices",
              Str("must have at most ", kMaxPairs, " elements (sorted_indices is int32), got ", n * k));
  }
  cpu::MoeInitRoutingParams p = RoutingParams(n, k, h, tokens.type, idx.type);
  p.permute = true;
  p.num_out_rows = OutRows(n * k, a.num_out_tokens);
  return p;
}

OrtStatusPtr ORT_API_CALL d::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  const Attrs a = InferAttrs(api, ctx, &error);
  const InferredRouting routing = InferRouting(api, ctx, d::kInTokens, d::kInIndices, 1);  // [N, K] or [N]
  InferDim rows{};
  if (routing.pairs.value >= 0) rows.value = OutRows(routing.pairs.value, a.num_out_tokens);
  const InferredTensor permuted{routing.row_type, {rows, routing.h}, true};
  if (OrtStatusPtr s = SetInferOutput(api, ctx, d::kOutPermutedTokens, permuted)) return s;
  const InferredTensor sorted{ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32, {routing.pairs}, true};
  if (OrtStatusPtr s = SetInferOutput(api, ctx, d::kOutSortedIndices, sorted)) return s;
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

void ComputeMoeTokenPermute(Ort::KernelContext& ctx, const TokenPermuteInputs& in, const Attrs& attrs,
                            const HostOutputFn& output) {
  const InputView &tokens = in[d::kInTokens], &idx = in[d::kInIndices];
  const cpu::MoeInitRoutingParams p = ValidateMoeTokenPermute(tokens, idx, attrs);
  cpu::MoeInitRoutingPlan plan;
  const int64_t bad = plan.Build(p, idx.data);
  if (bad >= 0) {
    const int64_t v =
        p.idx_int64 ? static_cast<const int64_t*>(idx.data)[bad] : static_cast<const int32_t*>(idx.data)[bad];
    FailInput("indices", Str("must hold expert ids in [0, 2147483647), got ", v, " at [", bad / p.top_k, ", ",
                             bad % p.top_k, "]"));
  }
  cpu::MoeInitRoutingBuffers b;
  b.x = tokens.data;
  b.expanded_x = output(d::kOutPermutedTokens, {plan.out_rows(), p.cols}, tokens.type);
  plan.WriteRowIdx(static_cast<int32_t*>(
      output(d::kOutSortedIndices, {p.num_tokens * p.top_k}, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)));
  ExpandRowsInParallel(ctx, plan, b, plan.out_rows());
}

std::vector<const OrtCustomOp*> MoeTokenPermuteOps() {
  return OpKernels<d::Def, CpuKernel<d::Def, RunOnKernelOutputs<d::Def, ComputeMoeTokenPermute>>>(
      MoeTokenPermuteCannOp());
}

}  // namespace ascend_moe
