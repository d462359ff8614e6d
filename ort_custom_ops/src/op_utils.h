// Shared plumbing for the ascend.moe custom ops: errors, attribute tables, input views and
// output shape inference through the raw C API (the 1.21 C++ SetOutputShape wrapper fails on
// newer runtimes). Knows nothing of any particular op.
#pragma once

#define ORT_API_MANUAL_INIT
#include <onnxruntime_cxx_api.h>
#undef ORT_API_MANUAL_INIT

#include <array>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

namespace ascend_moe {

inline constexpr const char* kCpuProvider = "CPUExecutionProvider";
inline constexpr const char* kCannProvider = "CANNExecutionProvider";

// Invalid input or attribute: reaches Python as an ONNXRuntimeError carrying `message`.
[[noreturn]] inline void Fail(const std::string& message) {
  throw Ort::Exception(std::string(message), ORT_INVALID_ARGUMENT);
}

// Formats its arguments with operator<< into one string.
template <typename... Args>
std::string Str(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  return os.str();
}

std::string ShapeStr(const std::vector<int64_t>& shape);
const char* TypeName(ONNXTensorElementDataType type);

// One attribute of an op: its ONNX name, kind and default. The tables are generated from the
// ONNX schemas (op_defs.gen.h); the kernels read attributes through them and the library's
// manifest (AscendMoeOpsManifest) publishes them.
struct AttrSpec {
  enum Kind { kInt, kFloat };
  const char* name;
  Kind kind;
  bool required;
  double default_value;  // unused when required
};

// One input or output of an op (generated from the ONNX schema): name, type parameter (inputs
// sharing one must have the same type; empty for a fixed type), optional, allowed element types.
struct ParamSpec {
  const char* name;
  const char* type_param;
  bool optional;
  const ONNXTensorElementDataType* types;
  size_t num_types;
};

// Attribute values read through the table; an attribute of another kind (a STRING, INTS, ... or
// a FLOAT where an INT is declared) fails with a message naming it, its kind and its value,
// instead of being taken for absent. Absent optional attributes take the table's default.
int64_t ReadIntAttr(const OrtKernelInfo* info, const char* op, const AttrSpec& spec);
float ReadFloatAttr(const OrtKernelInfo* info, const char* op, const AttrSpec& spec);

// "float, float16 or bfloat16": the allowed types of an input, for messages.
std::string TypeList(const ParamSpec& spec);

// The message for the first input whose element type the op does not accept (not in the
// schema's list, or unlike an earlier input with the same type parameter); empty when all are
// accepted. types[i] is UNDEFINED for absent or unknown inputs.
std::string CheckInputTypes(const char* op, const ParamSpec* specs, size_t n,
                            const ONNXTensorElementDataType* types);

// "<op>: output '<name>' must be <expected> for these inputs, but the graph types it <got>".
std::string OutputTypeMismatch(const char* op, const ParamSpec& output, ONNXTensorElementDataType expected,
                               ONNXTensorElementDataType got);

// The element type the kernels write to output `out`: its one allowed type, else the type of
// the first present input with the same type parameter, else (no such input: MoeReRouting's
// permute_per_token_scales without scales) its first allowed type. `input_types` as for
// CheckInputTypes.
ONNXTensorElementDataType ExpectedOutputType(const ParamSpec& out, const ParamSpec* inputs, size_t num_inputs,
                                             const ONNXTensorElementDataType* input_types);

// Output `index` of the call with `shape`, checked to have element type `expected` (the graph
// decides an output's type; kernel creation already refused graphs typing it otherwise, this
// keeps the kernel from ever writing past a buffer). Null when the node omits the output
// (a trailing or "" optional output) and `required` is false.
void* GetCheckedOutput(Ort::KernelContext& ctx, const char* op, const ParamSpec* outputs, size_t index,
                       const std::vector<int64_t>& shape, ONNXTensorElementDataType expected, bool required);

// What a kernel sees of one input: absent inputs have present == false.
struct InputView {
  bool present = false;
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  std::vector<int64_t> shape;
  int64_t size = 0;
  const void* data = nullptr;
};
InputView GetInputView(Ort::KernelContext& ctx, size_t index);
int64_t NumElements(const std::vector<int64_t>& shape);
// Every input of a call, in the order of the op's table (generated from its schema), checked
// against it: fails with the message of the first input the table does not accept (a required
// one absent, an element type not allowed, or unlike an earlier input with the same type
// parameter). Kernel creation already refused such graphs; this keeps every kernel's reads
// within what the table promises.
[[noreturn]] void FailRequiredInput(const char* op, const ParamSpec& spec);
template <size_t N>
std::array<InputView, N> GetInputViews(Ort::KernelContext& ctx, const char* op, const ParamSpec (&specs)[N]) {
  std::array<InputView, N> views;
  std::array<ONNXTensorElementDataType, N> types;
  for (size_t i = 0; i < N; ++i) {
    views[i] = GetInputView(ctx, i);
    if (!views[i].present && !specs[i].optional) FailRequiredInput(op, specs[i]);
    types[i] = views[i].type;
  }
  const std::string error = CheckInputTypes(op, specs, N, types.data());
  if (!error.empty()) Fail(error);
  return views;
}

// An op's tables (op_defs.gen.h): its attributes, inputs and outputs, each with its size.
struct OpTables {
  const AttrSpec* attrs;
  size_t num_attrs;
  const ParamSpec* inputs;
  size_t num_inputs;
  const ParamSpec* outputs;
  size_t num_outputs;
};

// Describes one op for the manifest.
struct OpManifestEntry {
  const char* name;
  const char* provider;
  int since_version;
  OpTables tables;
};
void RegisterManifestEntry(const OpManifestEntry& entry);
// JSON of every registered op: {"domain", "ops": [{"name", "provider", "since_version",
// "inputs": [...], "outputs": [...], "attributes": [...]}]}.
std::string ManifestJson(const char* domain);

// The ONNX Runtime version of this process ("major.minor.patch"), recorded by RegisterCustomOps;
// lets shape inference avoid what older runtimes mishandle.
void SetRuntimeVersion(int major, int minor, int patch);
bool RuntimeAtLeast(int major, int minor, int patch);

// Output shape inference through the raw C API. A dim is a value >= 0 or a symbolic name.
struct InferDim {
  int64_t value = -1;
  std::string symbol;  // used when value < 0; empty means unknown
};
struct InferredTensor {
  ONNXTensorElementDataType type;
  std::vector<InferDim> dims;
  bool rank_known = true;
};
// Input index `i` of a shape-inference context, as type + dims (symbolic names kept).
// Returns false when the input is absent (no input at `i`, or one without a type: omitted
// through an empty name).
bool GetInferInput(const OrtApi& api, OrtShapeInferContext* ctx, size_t i, InferredTensor* out);
OrtStatusPtr SetInferOutput(const OrtApi& api, OrtShapeInferContext* ctx, size_t i, const InferredTensor& t);
// An INT attribute at shape inference, or its default when absent or unreadable (a wrong kind
// is reported by the kernel's constructor, which runs at session creation too).
int64_t InferAttrInt(const OrtApi& api, OrtShapeInferContext* ctx, const AttrSpec& spec);
// Element type and rank of a node's input or output as the graph declares it at kernel creation
// (session creation). Absent ones (omitted, or "") have type UNDEFINED. rank == 0 means rank 0
// or unknown: the 1.21 C API cannot tell them apart.
struct GraphTensor {
  ONNXTensorElementDataType type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
  size_t rank = 0;
};
std::vector<GraphTensor> KernelInputs(const OrtKernelInfo* info, size_t n);
std::vector<GraphTensor> KernelOutputs(const OrtKernelInfo* info, size_t n);
// Fail kernel creation (session creation) when a required input is absent (named by its schema
// position: ORT sees every input as optional), when an input's element type is not accepted, or when
// the graph types an output otherwise than the kernel will write it (ORT types an output the
// library's shape inference left unset like the node's last input).
void CheckKernelInputTypes(const char* op, const ParamSpec* specs, size_t n,
                           const std::vector<GraphTensor>& inputs);
// `overrides` (optional, one per output): the type an op's attributes decide (UNDEFINED: none).
void CheckKernelOutputTypes(const OrtKernelInfo* info, const char* op, const ParamSpec* inputs,
                            size_t num_inputs, const std::vector<GraphTensor>& input_infos,
                            const ParamSpec* outputs, size_t num_outputs,
                            const ONNXTensorElementDataType* overrides = nullptr);
// Fails shape inference when an input's element type is not accepted.
OrtStatusPtr InferCheckInputTypes(const OrtApi& api, OrtShapeInferContext* ctx, const char* op,
                                  const ParamSpec* specs, size_t n);

// Runs fn(begin, end) over [0, n) in chunks of at least `grain` on the session's intra-op pool.
// Exceptions thrown inside a chunk are rethrown on the calling thread (first one wins).
template <typename Fn>
void ParallelForRange(Ort::KernelContext& ctx, int64_t n, int64_t grain, Fn&& fn);

}  // namespace ascend_moe

#include "op_utils_inl.h"
