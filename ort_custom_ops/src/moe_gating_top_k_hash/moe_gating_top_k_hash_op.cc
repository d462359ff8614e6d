// ascend.moe::MoeGatingTopKHash for ONNX Runtime (docs/operators.md §1): what the generated
// definition (op_defs.gen.h) leaves to the op: shape inference, and the CPU kernel, which
// validates (moe_gating_top_k_hash_validate, shared with the CANN kernel) and runs ops_src/cpu
// over the rows on the session's intra-op thread pool. A kernel for another execution provider
// registers beside it through AscendMoeOp<MoeGatingDef, ThatKernel>.
#include <algorithm>
#include <mutex>
#include <utility>

#include "cann_kernel.h"
#include "moe_gating_top_k_hash_validate.h"
#include "op_base.h"
#include "ops_src/cpu/moe_gating_top_k_hash/moe_gating_top_k_hash.h"

namespace ascend_moe {

using namespace gating_defs;

// Output types and shapes (docs/operators.md §1.1): y = x.shape[:-1] + [k] of x's type, expert_idx the same
// dims in int32, out = x.shape (float) when out_flag = 1, else [0]. Symbolic dims keep their
// names. The context cannot tell how many outputs the node has, and ORT < 1.32 aborts when an
// output the node lacks is set: there, the optional `out` is left to ORT (its type, float, is
// fixed by the op's declaration), so two-output nodes run on every supported version.
// A rank-1 x gets the outputs of that formula; the run rejects it with the validation's message.
OrtStatusPtr ORT_API_CALL gating_defs::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  const int64_t k = InferAttrInt(api, ctx, kAttrs[kAttrK]);
  const int64_t out_flag = InferAttrInt(api, ctx, kAttrs[kAttrOutFlag]);

  InferredTensor x{};
  if (!GetInferInput(api, ctx, kInX, &x)) return nullptr;  // nothing known
  if (x.dims.empty()) {
    // x of unknown rank (or rank 0). The C API cannot declare "x's type, unknown rank", and ORT
    // would type an unset y like the node's last input (int32 with a hash table, bool with a
    // mask): y gets x's type and a placeholder shape, and kernel creation refuses the node
    // (MoeGatingDef::CheckGraphInputs), so no session ever runs with the placeholder.
    return SetInferOutput(api, ctx, kOutY, InferredTensor{x.type, {}, true});
  }
  InferredTensor y{x.type, {x.dims.begin(), x.dims.end() - 1}, true};
  y.dims.push_back(InferDim{k >= 1 ? k : -1, {}});
  InferredTensor idx = y;
  idx.type = ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32;
  InferredTensor out{ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, {InferDim{0, {}}}, true};
  if (out_flag == 1) out.dims = x.dims;
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutY, y)) return s;
  if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutExpertIdx, idx)) return s;
  if (RuntimeAtLeast(1, 32, 0)) {
    if (OrtStatusPtr s = SetInferOutput(api, ctx, kOutOut, out)) return s;
  }
  if (x.dims.size() == 1) {
    const std::string error = Str(kName, ": input 'x' must have rank >= 2, got rank 1");
    return api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
  }
  return nullptr;
}

namespace {

// Elements of x per parallel chunk: rows cost about the same, so chunks of ~16K logits keep the
// scheduling overhead small while giving the threads enough pieces to balance.
constexpr int64_t kChunkElements = 16384;

// Runs the CPU kernel over all rows; reports the first data error (a bad token id before a bad
// table entry, then the lowest row), if any.
void RunMoeGatingCpu(Ort::KernelContext& ctx, const MoeGatingProblem& p,
                     const cpu::MoeGatingTopKHashInputs& inputs,
                     const cpu::MoeGatingTopKHashOutputs& outputs) {
  const cpu::MoeGatingTopKHashParams& params = p.params;
  std::mutex mu;
  cpu::MoeGatingTopKHashError first;
  const int64_t grain = std::max<int64_t>(1, kChunkElements / params.experts);
  ParallelForRange(ctx, params.rows, grain, [&](int64_t begin, int64_t end) {
    const cpu::MoeGatingTopKHashError error = cpu::MoeGatingTopKHashRows(params, inputs, outputs, begin, end);
    if (error.ok()) return;
    std::lock_guard<std::mutex> lock(mu);
    auto rank = [](const cpu::MoeGatingTopKHashError& e) {
      return std::make_pair(e.kind == cpu::MoeGatingTopKHashError::kTokenIdOutOfRange ? 0 : 1, e.row);
    };
    if (first.ok() || rank(error) < rank(first)) first = error;
  });
  if (!first.ok()) {
    Fail(cpu::DescribeMoeGatingTopKHashError(first, params, inputs.table_rows));
  }
}

void RunMoeGatingTopKHashCpu(Ort::KernelContext& ctx, const gating_defs::Inputs& views,
                             const gating_defs::Attrs& attrs) {
  const MoeGatingProblem p = ValidateMoeGatingInputs(views, attrs);
  RunMoeGatingCpu(ctx, p, MoeGatingKernelInputs(views, p),
                  AllocateMoeGatingOutputs(ctx, p, views[kInX].type));
}

}  // namespace

std::vector<const OrtCustomOp*> MoeGatingTopKHashOps() {
  return OpKernels<MoeGatingDef, CpuKernel<MoeGatingDef, &RunMoeGatingTopKHashCpu>>(
      MoeGatingTopKHashCannOp());
}

}  // namespace ascend_moe
