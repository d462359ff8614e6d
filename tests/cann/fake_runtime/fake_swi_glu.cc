// Fake aclnnSwiGlu (libopapi.so): the checks of ops-nn activation/swi_glu/docs/aclnnSwiGlu.md and
// op_host/swi_glu_tiling.cpp (x float16 / bfloat16 / float, dim in [-rank, rank), the split
// axis even, out of x's type with that axis halved), with their status codes; computes
// out = silu(A) * B (A, B the halves along dim) in float, rounded once to the type.
#include <cmath>
#include <cstring>
#include <string>

#include "fake_aclnn.h"
#include "ops_src/cpu/half.h"

using namespace fake_cann;

namespace {

float Load(const void* p, int dtype, int64_t i) {
  if (dtype == kFloat) return static_cast<const float*>(p)[i];
  const uint16_t h = static_cast<const uint16_t*>(p)[i];
  return dtype == kFloat16 ? ascend_moe::cpu::Fp16ToFloat(h) : ascend_moe::cpu::Bf16ToFloat(h);
}

void Store(void* p, int dtype, int64_t i, float v) {
  if (dtype == kFloat) {
    static_cast<float*>(p)[i] = v;
    return;
  }
  static_cast<uint16_t*>(p)[i] =
      dtype == kFloat16 ? ascend_moe::cpu::FloatToFp16(v) : ascend_moe::cpu::FloatToBf16(v);
}

}  // namespace

extern "C" {

int aclnnSwiGluGetWorkspaceSize(const void* x, int64_t dim, const void* out, uint64_t* workspace_size,
                                void** executor) {
  ArgCheck c("aclnnSwiGluGetWorkspaceSize");
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  if (!x || !out) c.Fail(kParamNullptr, "x or out is null");
  if (!c.ok()) return c.status();
  c.RequireLive("x", x);
  if (!c.ok()) return c.status();
  const int64_t rank = static_cast<int64_t>(T(x)->dims.size());
  c.RequireKernels();
  if (SocIs310P())  // the 310p config: no bfloat16
    c.Check("x", x, true, {kFloat16, kFloat}, std::vector<int64_t>(rank, -1));
  else
    c.Check("x", x, true, {kFloat16, kBFloat16, kFloat}, std::vector<int64_t>(rank, -1));
  if (!c.ok()) return c.status();
  if (rank == 0 || dim < -rank || dim >= rank) {
    c.Fail(kParamInvalid, "dim " + std::to_string(dim) + " is out of [-x.dim(), x.dim() - 1]");
    return c.status();
  }
  const int64_t axis = dim < 0 ? dim + rank : dim;
  int64_t before = 1, after = 1;
  for (int64_t i = 0; i < axis; ++i) before *= T(x)->dims[i];
  for (int64_t i = axis; i < rank; ++i) after *= T(x)->dims[i];
  if (after % 2 != 0) {
    c.Fail(kTilingError, "The split axis of input x must be an even number, x " + DimsStr(T(x)));
    return c.status();
  }
  std::vector<int64_t> out_dims = T(x)->dims;
  out_dims[axis] /= 2;
  const int dtype = T(x)->dtype;
  c.Check("out", out, true, {dtype}, out_dims);
  if (!c.ok()) return c.status();
  const int64_t half = after / 2;
  auto run = [=]() {
    const void* in = Data(x);
    void* o = Data(out);
    for (int64_t r = 0; r < before; ++r) {
      for (int64_t j = 0; j < half; ++j) {
        const float a = Load(in, dtype, r * after + j), b = Load(in, dtype, r * after + half + j);
        Store(o, dtype, r * half + j, a / (1.f + std::exp(-a)) * b);
      }
    }
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnSwiGlu", 0, {x, out}, run, workspace_size, executor);
}

int aclnnSwiGlu(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnSwiGlu", workspace, workspace_size, executor, stream);
}

}  // extern "C"
