// ascend.moe::MoeTokenUnpermute for ONNX Runtime (docs/operators.md §6): shape inference, the
// attribute rule, the shape and index validation (docs/operators.md §6.3; the messages of
// onnx_schemas.moe_token_unpermute) and the CPU kernel, MoeFinalizeRoutingV2's weighted gather with
// token-major indices (the validation is shared with the CANN kernel, moe_token_unpermute_cann).
#include <algorithm>

#include "cann_kernel.h"
#include "op_base.h"
#include "weighted_gather_ort.h"

namespace ascend_moe {

// unpermuted_tokens is [N, H] of permuted_tokens' type: N = probs.shape[0], or
// sorted_indices.shape[0] without probs; H = permuted_tokens.shape[-1].
OrtStatusPtr ORT_API_CALL unpermute::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  std::string error;
  InferAttrs(api, ctx, &error);
  return InferWeightedGatherShape(api, ctx, kInPermutedTokens, kInSortedIndices, kInProbs,
                                  kOutUnpermutedTokens, error);
}

std::string unpermute::CheckAttrs(const Attrs& a) {
  if (a.padded_mode == 0) return {};
  return Str(kName, ": attribute '", kAttrs[kAttrPaddedMode].name,
             "' must be 0 (the Ascend operator has no padded mode), got ", a.padded_mode);
}

namespace {

[[noreturn]] void FailInput(unpermute::In input, const std::string& what_and_value) {
  Fail(Str(unpermute::kName, ": input '", unpermute::kInputs[input].name, "' ", what_and_value));
}

}  // namespace

cpu::WeightedGatherParams ValidateMoeTokenUnpermute(const unpermute::Inputs& in,
                                                    const unpermute::Attrs& /*attrs*/,
                                                    cpu::WeightedGatherBuffers* buffers) {
  using namespace unpermute;
  const InputView &tokens = in[kInPermutedTokens], &idx = in[kInSortedIndices], &probs = in[kInProbs];
  if (tokens.shape.size() != 2) {
    FailInput(kInPermutedTokens, Str("must be 2-D [P, H], got shape ", ShapeStr(tokens.shape)));
  }
  const auto [n, k] = CheckWeightedGatherSlots<Def>(in, kInSortedIndices, kInProbs);
  const int64_t p_rows = tokens.shape[0];
  const cpu::IndexType idx_type = IndexTypeOf(idx.type);
  cpu::WeightedGatherParams p;
  p.num_out_rows = n;
  p.k = k;
  p.hidden = tokens.shape[1];
  p.num_rows = p_rows;  // indices in [P, max(P, N*K)) read a zero row
  p.row_type = RowTypeOf(tokens.type);
  p.index_type = idx_type;
  p.token_major = true;
  p.skip_zero_weight = true;
  if (probs.present) {
    p.has_weights = true;
    p.weight_type = RowTypeOf(probs.type);
    buffers->weights = probs.data;
  }
  buffers->rows = tokens.data;
  buffers->row_index = idx.data;
  // Slots of probability 0 are not read, so their index is not checked (as on Ascend).
  const int64_t limit = std::max(p_rows, n * k);
  const int64_t bad = cpu::FirstReadSlotOutside(p, *buffers, 0, limit);
  if (bad >= 0) {
    FailInput(kInSortedIndices,
              Str("must be in [0, max(P, N*K)) = [0, ", limit, ") where probs is not 0, got ",
                  cpu::IndexAt(idx.data, idx_type, bad), " at [", bad, "]"));
  }
  return p;
}

std::vector<const OrtCustomOp*> MoeTokenUnpermuteOps() {
  return OpKernels<unpermute::Def, WeightedGatherCpuKernel<unpermute::Def, ValidateMoeTokenUnpermute>>(
      MoeTokenUnpermuteCannOp());
}

}  // namespace ascend_moe
