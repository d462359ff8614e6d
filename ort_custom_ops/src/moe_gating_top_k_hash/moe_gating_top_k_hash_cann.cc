// MoeGatingTopKHash kernel for the CANN execution provider: validates on the host (input_ids is a
// host input; a constant tid2eid is copied to the host once), then runs ops_src/cann on the EP's
// stream. Registered beside the CPU kernel.
#include "cann_kernel.h"
#include "moe_gating_top_k_hash_validate.h"

#include <cstring>
#include <vector>

#include "ops_src/cann/moe_gating_top_k_hash.h"

namespace ascend_moe {

using namespace gating_defs;

namespace {

// Whether table row `id` (host copy, k columns) has an entry out of [0, E); the first one.
bool TableRowBad(const unsigned char* table, ONNXTensorElementDataType type, int64_t k, int64_t E, int64_t id,
                 int64_t* column, int64_t* value) {
  for (int64_t c = 0; c < k; ++c) {
    const int64_t v = type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32
                          ? reinterpret_cast<const int32_t*>(table)[id * k + c]
                          : reinterpret_cast<const int64_t*>(table)[id * k + c];
    if (v < 0 || v >= E) {
      *column = c;
      *value = v;
      return true;
    }
  }
  return false;
}

// Host copy of tid2eid when it is a constant initializer (read once at kernel creation).
struct ConstantTable {
  explicit ConstantTable(const OrtKernelInfo* info);
  bool constant = false;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  std::vector<unsigned char> host;
};

// Token ids are checked on the host against the table before a native hash call.
struct MoeGatingCannOptions : CannOptions<kInInputIds> {
  static constexpr const char* kFallback = "CANN host fallback (CPU kernel)";
  using State = ConstantTable;
};

ConstantTable::ConstantTable(const OrtKernelInfo* info) {
  Ort::ConstKernelInfo ki(info);
  if (ki.GetInputCount() <= kInTid2eid) return;
  int is_constant = 0;
  Ort::ConstValue table{nullptr};
  try {
    table = ki.GetTensorConstantInput(kInTid2eid, &is_constant);
  } catch (const Ort::Exception&) {
    return;  // absent input
  }
  if (!is_constant || !table) return;
  const auto info_of_table = table.GetTensorTypeAndShapeInfo();
  type = info_of_table.GetElementType();
  shape = info_of_table.GetShape();
  const size_t elem = type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32   ? 4
                      : type == ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64 ? 8
                                                                    : 0;
  if (elem == 0) return;  // a wrong type is reported by validation at run time
  host.resize(info_of_table.GetElementCount() * elem);
  const void* data = table.GetTensorRawData();
  if (table.GetTensorMemoryInfo().GetDeviceType() == OrtMemoryInfoDeviceType_CPU) {
    if (!host.empty()) std::memcpy(host.data(), data, host.size());
  } else {
    cann::CopySync(host.data(), data, host.size(), cann::kDeviceToHost);
  }
  constant = true;
}

// The NPU checks neither ids nor table entries (docs/operators.md §1.3): they are checked here
// before a native hash call, as the CPU kernel reports them.
void CheckIdsAndTable(CannCall<MoeGatingDef, MoeGatingCannOptions>& call, const cann::DeviceContext& device,
                      const MoeGatingProblem& p, const cann::MoeGatingDeviceArgs& args) {
  const InputView& tid2eid = call.in[kInTid2eid];
  const unsigned char* table = call.state.host.data();
  std::vector<unsigned char> downloaded;
  if (!call.state.constant) {
    call.node.WarnOnce(Str(kName,
                           ": tid2eid is not a constant initializer: it is copied to "
                           "the host on every call to check its entries"));
    downloaded.resize(tid2eid.size * (p.table_type == cpu::GatingIntType::kInt32 ? 4 : 8));
    cann::Synchronize(device);
    cann::CopySync(downloaded.data(), tid2eid.data, downloaded.size(), cann::kDeviceToHost);
    table = downloaded.data();
  }
  const int64_t k = p.params.k, E = p.params.experts;
  const cpu::MoeGatingTopKHashError error =
      cann::CheckHashRows(args, [&](int64_t id, int64_t* column, int64_t* value) {
        return TableRowBad(table, tid2eid.type, k, E, id, column, value);
      });
  if (!error.ok()) Fail(cpu::DescribeMoeGatingTopKHashError(error, p.params, args.in.table_rows));
}

void RunMoeGatingCann(CannCall<MoeGatingDef, MoeGatingCannOptions>& call) {
  const MoeGatingProblem p = ValidateMoeGatingInputs(call.in, call.attrs);
  cann::MoeGatingDeviceArgs args;
  args.params = p.params;
  args.additional = p.additional;
  args.in = MoeGatingKernelInputs(call.in, p);  // input_ids in host memory
  args.out = AllocateMoeGatingOutputs(call.ctx, p, call.in[kInX].type);
  cpu::MoeGatingTopKHashError error;
  call.RunPath(cann::ChooseMoeGatingPath(args), kInX, [&](const auto& device, auto* path) {
    if (path->call && args.in.hash && args.params.rows > 0) CheckIdsAndTable(call, device, p, args);
    error = cann::LaunchMoeGating(device, args, path);
  });
  if (!error.ok()) Fail(cpu::DescribeMoeGatingTopKHashError(error, p.params, args.in.table_rows));
}

}  // namespace

const OrtCustomOp* MoeGatingTopKHashCannOp() {
  return CannKernelOp<MoeGatingDef, MoeGatingCannOptions, RunMoeGatingCann>();
}

}  // namespace ascend_moe
