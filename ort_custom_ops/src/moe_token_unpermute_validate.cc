#include "moe_finalize_routing_v2_validate.h"

#include <algorithm>
#include <iterator>

namespace ascend_moe {

namespace {

constexpr const char* kTokens = "permuted_tokens";
constexpr const char* kSorted = "sorted_indices";
constexpr const char* kProbs = "probs";

}  // namespace

std::string CheckPaddedMode(int64_t padded_mode) {
  if (padded_mode == 0) return {};
  return Str(unpermute_defs::kName, ": attribute '", unpermute_defs::kAttrs[unpermute_defs::kAttrPaddedMode].name,
             "' must be 0 (the Ascend operator has no padded mode), got ", padded_mode);
}

cpu::WeightedGatherParams ValidateMoeTokenUnpermute(const InputView* in, cpu::WeightedGatherBuffers* buffers) {
  using namespace unpermute_defs;
  const char* op = kName;
  CheckTypes(op, kInputs, std::size(kInputs), in);
  const InputView &tokens = in[kInPermutedTokens], &idx = in[kInSortedIndices], &probs = in[kInProbs];
  if (tokens.shape.size() != 2) {
    FailInput(op, kTokens, Str("must be 2-D [P, H], got shape ", ShapeStr(tokens.shape)));
  }
  if (idx.shape.size() != 1) FailInput(op, kSorted, Str("must be 1-D [N*K], got shape ", ShapeStr(idx.shape)));
  int64_t n = idx.shape[0], k = 1;
  if (probs.present) {
    if (probs.shape.size() != 2 || probs.shape[1] < 1) {
      FailInput(op, kProbs, Str("must be 2-D [N, K] with K >= 1, got shape ", ShapeStr(probs.shape)));
    }
    n = probs.shape[0];
    k = probs.shape[1];
    if (idx.shape[0] != n * k) {
      FailInput(op, kSorted, Str("must have N*K = ", n * k, " elements (N = ", n, ", K = ", k,
                                 " from probs), got shape ", ShapeStr(idx.shape)));
    }
  }
  const int64_t p_rows = tokens.shape[0];
  const int64_t limit = std::max(p_rows, n * k);
  const cpu::IndexType idx_type = IndexTypeOf(idx.type);
  const int64_t bad = cpu::FirstIndexOutside(idx.data, idx_type, idx.size, 0, limit);
  if (bad >= 0) {
    FailInput(op, kSorted, Str("must be in [0, max(P, N*K)) = [0, ", limit, "), got ",
                               cpu::IndexAt(idx.data, idx_type, bad), " at [", bad, "]"));
  }
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
  return p;
}

}  // namespace ascend_moe
