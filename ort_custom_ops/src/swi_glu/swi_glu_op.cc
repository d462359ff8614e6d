// ascend.moe::SwiGlu for ONNX Runtime (docs/operators.md §11): shape inference, the validation
// (the messages of onnx_schemas.swi_glu), the CPU kernel, and the CANN kernel: aclnnSwiGlu on the
// EP's stream where the chip and the operator allow, or the CPU kernel on host copies.
#include <algorithm>
#include <string>
#include <vector>

#include "cann_kernel.h"
#include "op_base.h"
#include "ops_src/cann/swi_glu.h"
#include "ops_src/cpu/swi_glu.h"

namespace ascend_moe {

namespace swiglu = defs::swi_glu;

// y is x's type and shape with the dim axis halved (unknown when that axis is).
OrtStatusPtr ORT_API_CALL swiglu::InferShapes(const OrtCustomOp*, OrtShapeInferContext* ctx) {
  const OrtApi& api = Ort::GetApi();
  const int64_t dim = InferAttrInt(api, ctx, kAttrs[kAttrDim]);
  InferredTensor x{};
  if (!GetInferInput(api, ctx, kInX, &x)) return nullptr;
  // x of unknown rank (or rank 0, refused at run time): y is left unset, so that ORT types it like
  // the node's last input, x. Declaring it would declare a scalar (the C API always writes a
  // shape), which ORT's optimisers then trust.
  if (!x.rank_known || x.dims.empty()) return nullptr;
  InferredTensor y = x;
  const int64_t rank = static_cast<int64_t>(x.dims.size());
  if (dim < -rank || dim >= rank) {  // refused at run time: x's rank, unknown dims
    for (auto& d : y.dims) d = InferDim{};
  } else {
    InferDim& d = y.dims[dim < 0 ? dim + rank : dim];
    d = d.value >= 0 ? InferDim{d.value / 2, {}} : InferDim{};
  }
  return SetInferOutput(api, ctx, kOutY, y);
}

std::string swiglu::CheckAttrs(const Attrs&) { return {}; }  // dim is checked against x's rank

namespace {

// Checks dim against x's rank and the even split; returns the kernel parameters and fills
// `y_shape` (x's shape with the axis halved) and `axis` (dim made non-negative).
cpu::SwiGluParams ValidateSwiGlu(const InputView& x, const swiglu::Attrs& attrs,
                                 std::vector<int64_t>* y_shape, int64_t* axis) {
  using namespace swiglu;
  const int64_t rank = static_cast<int64_t>(x.shape.size());
  const std::string input = Str(kName, ": input '", kInputs[kInX].name, "' ");
  if (rank == 0) Fail(input + "must have rank >= 1, got shape []");
  if (attrs.dim < -rank || attrs.dim >= rank) {
    Fail(Str(kName, ": attribute '", kAttrs[kAttrDim].name, "' must be in [-", rank, ", ", rank,
             ") (x has rank ", rank, "), got ", attrs.dim));
  }
  *axis = attrs.dim < 0 ? attrs.dim + rank : attrs.dim;
  if (x.shape[*axis] % 2 != 0) {
    Fail(Str(input, "must have an even size along dim ", attrs.dim, ", got shape ", ShapeStr(x.shape)));
  }
  cpu::SwiGluParams p;
  p.type = x.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16    ? cpu::SwiGluType::kFloat16
           : x.type == ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16 ? cpu::SwiGluType::kBFloat16
                                                              : cpu::SwiGluType::kFloat32;
  p.outer = 1;
  for (int64_t i = 0; i < *axis; ++i) p.outer *= x.shape[i];
  p.inner = x.shape[*axis] / 2;
  for (int64_t i = *axis + 1; i < rank; ++i) p.inner *= x.shape[i];
  *y_shape = x.shape;
  (*y_shape)[*axis] /= 2;
  return p;
}

// Runs the CPU kernel over the outer rows on the session's intra-op pool.
void RunSwiGlu(Ort::KernelContext& ctx, const cpu::SwiGluParams& p, const void* x, void* y) {
  if (p.outer == 0 || p.inner == 0) return;
  constexpr int64_t kElementsPerChunk = 16384;
  const int64_t grain = std::max<int64_t>(1, kElementsPerChunk / p.inner);
  ParallelForRange(ctx, p.outer, grain,
                   [&](int64_t begin, int64_t end) { cpu::SwiGluRows(p, x, y, begin, end); });
}

void RunSwiGluCpu(Ort::KernelContext& ctx, const swiglu::Def::Inputs& in, const swiglu::Def::Attrs& attrs) {
  using namespace swiglu;
  std::vector<int64_t> y_shape;
  int64_t axis = 0;
  const cpu::SwiGluParams p = ValidateSwiGlu(in[kInX], attrs, &y_shape, &axis);
  void* y = GetCheckedOutput(ctx, kName, kOutputs, kOutY, y_shape, in[kInX].type, /*required=*/true);
  RunSwiGlu(ctx, p, in[kInX].data, y);
}

void RunSwiGluCann(CannCall<swiglu::Def, CannOptions<>>& call) {
  using namespace swiglu;
  const InputView& x = call.in[kInX];
  std::vector<int64_t> y_shape;
  int64_t axis = 0;
  const cpu::SwiGluParams p = ValidateSwiGlu(x, call.attrs, &y_shape, &axis);
  void* y = call.Output(kOutY, y_shape, x.type);
  if (p.outer == 0 || p.inner == 0) return;  // empty
  cann::SwiGluDeviceArgs a;
  AclTypeOf(x.type, &a.type);
  a.x_dims = x.shape;
  a.dim = call.attrs.dim;
  a.x = x.data;
  a.out = y;
  const std::string blocker = call.node.Blocker(cann::SwiGluNativeBlocker(a), cann::kAclnnSwiGlu);
  CannDevice device(call.ctx, kInX);
  auto on_host = [&]() {
    call.OnHostCopies(device.context(), [&](const Inputs& host, const auto& output) {
      RunSwiGlu(call.ctx, p, host[kInX].data, output(kOutY, y_shape, x.type));
    });
  };
  call.node.Run(blocker, [&]() { cann::LaunchSwiGlu(device.context(), a); }, on_host);
}

}  // namespace

std::vector<const OrtCustomOp*> SwiGluOps() {
  return OpKernels<swiglu::Def, CpuKernel<swiglu::Def, &RunSwiGluCpu>>(
      CannKernelOp<swiglu::Def, CannOptions<>, RunSwiGluCann>());
}

}  // namespace ascend_moe
