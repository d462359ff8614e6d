// Fake aclnnPermute (libopapi.so): the checks of ops-math conversion/transpose/docs/aclnnPermute.md
// (self of at most 8 dims, dims a permutation of [0, rank) with negative entries counting from the
// end, out of self's type and the permuted shape; A2 / A3 / 950 only), with their status codes;
// moves the elements as bytes.
#include <cstring>
#include <string>
#include <vector>

#include "fake_aclnn.h"
#include "fake_lists.h"

using namespace fake_cann;


extern "C" {

int aclnnPermuteGetWorkspaceSize(const void* self, const void* dims, const void* out, uint64_t* workspace_size,
                                 void** executor) {
  ArgCheck c("aclnnPermuteGetWorkspaceSize");
  if (!workspace_size || !executor) c.Fail(kParamNullptr, "workspaceSize or executor is null");
  if (!self || !dims || !out) c.Fail(kParamNullptr, "self, dims or out is null");
  if (!c.ok()) return c.status();
  c.RequireLive("self", self);
  if (!FakeAclnnIsIntArray(dims)) c.Fail(kParamInvalid, "dims is not a live aclIntArray");
  if (!c.ok()) return c.status();
  c.RequireKernels();
  const int64_t rank = static_cast<int64_t>(T(self)->dims.size());
  c.Check("self", self, true, {kFloat, kFloat16, kBFloat16, kInt8, kUint8, kInt32, kInt64}, std::vector<int64_t>(rank, -1));
  if (!c.ok()) return c.status();
  if (rank > 8) {
    c.Fail(kParamInvalid, "self has more than 8 dims");
    return c.status();
  }
  std::vector<int64_t> perm = static_cast<const IntArray*>(dims)->values;
  std::vector<bool> seen(static_cast<size_t>(rank), false);
  bool valid = static_cast<int64_t>(perm.size()) == rank;
  for (int64_t& d : perm) {
    if (d < -rank || d >= rank) valid = false;
    if (!valid) break;
    d = d < 0 ? d + rank : d;
    valid = !seen[static_cast<size_t>(d)];
    seen[static_cast<size_t>(d)] = true;
  }
  if (!valid) {
    c.Fail(kParamInvalid, "dims is not a permutation of the " + std::to_string(rank) + " dims of self");
    return c.status();
  }
  std::vector<int64_t> out_dims(static_cast<size_t>(rank));
  for (int64_t i = 0; i < rank; ++i) out_dims[i] = T(self)->dims[perm[i]];
  const int dtype = T(self)->dtype;
  c.Check("out", out, true, {dtype}, out_dims);
  if (!c.ok()) return c.status();
  const std::vector<int64_t> in_dims = T(self)->dims;
  auto run = [=]() {
    const auto* in = static_cast<const char*>(Data(self));
    auto* o = static_cast<char*>(Data(out));
    const int64_t bytes = static_cast<int64_t>(ElementBytes(dtype));
    std::vector<int64_t> in_stride(static_cast<size_t>(rank), 1);
    for (int64_t i = rank - 2; i >= 0; --i) in_stride[i] = in_stride[i + 1] * in_dims[i + 1];
    int64_t total = 1;
    for (int64_t d : out_dims) total *= d;
    std::vector<int64_t> at(static_cast<size_t>(rank), 0);  // the output index, last dim fastest
    for (int64_t n = 0; n < total; ++n) {
      int64_t src = 0;
      for (int64_t i = 0; i < rank; ++i) src += at[i] * in_stride[perm[i]];
      std::memcpy(o + n * bytes, in + src * bytes, static_cast<size_t>(bytes));
      for (int64_t i = rank - 1; i >= 0 && ++at[i] == out_dims[i]; --i) at[i] = 0;
    }
    return static_cast<int>(kOk);
  };
  return MakeExecutor("aclnnPermute", 0, {self, out}, run, workspace_size, executor);
}

int aclnnPermute(void* workspace, uint64_t workspace_size, void* executor, void* stream) {
  return RunExecutor("aclnnPermute", workspace, workspace_size, executor, stream);
}

}  // extern "C"
