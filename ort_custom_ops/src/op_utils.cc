#include "op_utils.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>

namespace ascend_moe {

std::string ShapeStr(const std::vector<int64_t>& shape) {
  std::ostringstream os;
  os << '[';
  for (size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

const char* TypeName(ONNXTensorElementDataType type) {
  switch (type) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT:
      return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16:
      return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16:
      return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE:
      return "double";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8:
      return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8:
      return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16:
      return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16:
      return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32:
      return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32:
      return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64:
      return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64:
      return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL:
      return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING:
      return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN:
      return "float8e4m3fn";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2:
      return "float8e5m2";
    default:
      return "unsupported type";
  }
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

namespace {

// Text of a float as C++ streams print it by default (%g, 6 digits): the Python validators
// format floats the same way so that both sides give identical messages.
std::string FloatStr(double v) { return Str(v); }

// Whether the node has attribute `name` as an INT (value in *i) / FLOAT (value in *f).
bool GetInt(const OrtKernelInfo* info, const char* name, int64_t* i) {
  OrtStatus* s = Ort::GetApi().KernelInfoGetAttribute_int64(info, name, i);
  if (s == nullptr) return true;
  Ort::GetApi().ReleaseStatus(s);
  return false;
}
bool GetFloat(const OrtKernelInfo* info, const char* name, float* f) {
  OrtStatus* s = Ort::GetApi().KernelInfoGetAttribute_float(info, name, f);
  if (s == nullptr) return true;
  Ort::GetApi().ReleaseStatus(s);
  return false;
}

// The kinds ORT's custom-op API cannot tell apart (it reads each as empty INTS and FLOATS lists).
constexpr const char* kUnreadableAttrKind =
    "an attribute of a kind the ONNX Runtime custom-op API cannot read (an empty INTS or FLOATS, "
    "STRINGS, TENSORS, GRAPH, GRAPHS, SPARSE_TENSOR, SPARSE_TENSORS, TYPE_PROTO or TYPE_PROTOS)";

// "STRING '1'", "INTS [1, 2]", ...: the kind and value of an attribute the node has but not as
// `expected`; empty when the node has no such attribute of a kind the API can read.
std::string OtherKind(const OrtKernelInfo* info, const char* name, AttrSpec::Kind expected) {
  const OrtApi& api = Ort::GetApi();
  int64_t i = 0;
  float f = 0.f;
  if (expected != AttrSpec::kInt && GetInt(info, name, &i)) return Str("INT ", i);
  if (expected != AttrSpec::kFloat && GetFloat(info, name, &f)) return Str("FLOAT ", FloatStr(f));
  size_t size = 0;
  if (OrtStatus* s = api.KernelInfoGetAttribute_string(info, name, nullptr, &size)) {
    api.ReleaseStatus(s);
  } else {
    std::string text(size, '\0');
    if (OrtStatus* s2 = api.KernelInfoGetAttribute_string(info, name, text.data(), &size)) {
      api.ReleaseStatus(s2);
    }
    text.resize(size ? size - 1 : 0);  // size counts the terminating NUL
    return Str("STRING '", text, "'");
  }
  // ORT reads a FLOATS attribute as an empty INTS list and the reverse: the non-empty one wins.
  size_t num_ints = 0, num_floats = 0;
  bool has_ints = false, has_floats = false;
  if (OrtStatus* s = api.KernelInfoGetAttributeArray_int64(info, name, nullptr, &num_ints)) {
    api.ReleaseStatus(s);
  } else {
    has_ints = true;
  }
  if (OrtStatus* s = api.KernelInfoGetAttributeArray_float(info, name, nullptr, &num_floats)) {
    api.ReleaseStatus(s);
  } else {
    has_floats = true;
  }
  if (has_ints && (num_ints > 0 || !has_floats)) {
    std::vector<int64_t> v(num_ints);
    if (num_ints) Ort::ThrowOnError(api.KernelInfoGetAttributeArray_int64(info, name, v.data(), &num_ints));
    return Str("INTS ", ShapeStr(v));
  }
  if (has_floats && num_floats > 0) {
    std::vector<float> v(num_floats);
    Ort::ThrowOnError(api.KernelInfoGetAttributeArray_float(info, name, v.data(), &num_floats));
    std::string text = "FLOATS [";
    for (size_t j = 0; j < v.size(); ++j) text += (j ? ", " : "") + FloatStr(v[j]);
    return text + "]";
  }
  if (!has_ints && !has_floats) return {};
  // ORT reads every attribute kind as an (empty) INTS and FLOATS list; of the other kinds the
  // custom-op API reads only TENSOR (its Python twin, onnx_schemas._common, names every kind).
  OrtAllocator* allocator = nullptr;
  OrtValue* tensor = nullptr;
  if (OrtStatus* s = api.GetAllocatorWithDefaultOptions(&allocator)) {
    api.ReleaseStatus(s);
  } else if (OrtStatus* s2 = api.KernelInfoGetAttribute_tensor(info, name, allocator, &tensor)) {
    api.ReleaseStatus(s2);
  } else {
    api.ReleaseValue(tensor);
    return "TENSOR";
  }
  return kUnreadableAttrKind;
}

const char* KindName(AttrSpec::Kind kind) { return kind == AttrSpec::kInt ? "INT" : "FLOAT"; }

// Fails when the attribute has another kind, or is required and absent.
[[noreturn]] void FailAbsentOrOtherKind(const OrtKernelInfo* info, const char* op, const AttrSpec& spec) {
  const std::string other = OtherKind(info, spec.name, spec.kind);
  if (!other.empty()) {
    Fail(Str(op, ": attribute '", spec.name, "' must be ", KindName(spec.kind), ", got ", other));
  }
  Fail(Str(op, ": attribute '", spec.name, "' is required (", KindName(spec.kind), "), got none"));
}

// The attribute's value read by `get`, else its default; fails when it is required or of
// another kind.
template <typename T>
T ReadAttr(const OrtKernelInfo* info, const char* op, const AttrSpec& spec,
           bool (*get)(const OrtKernelInfo*, const char*, T*)) {
  T value{};
  if (get(info, spec.name, &value)) return value;
  if (spec.required || !OtherKind(info, spec.name, spec.kind).empty()) {
    FailAbsentOrOtherKind(info, op, spec);
  }
  return static_cast<T>(spec.default_value);
}

}  // namespace

int64_t ReadIntAttr(const OrtKernelInfo* info, const char* op, const AttrSpec& spec) {
  return ReadAttr<int64_t>(info, op, spec, GetInt);
}

float ReadFloatAttr(const OrtKernelInfo* info, const char* op, const AttrSpec& spec) {
  return ReadAttr<float>(info, op, spec, GetFloat);
}

std::string TypeList(const ParamSpec& spec) {
  std::string text;
  for (size_t i = 0; i < spec.num_types; ++i) {
    if (i) text += i + 1 == spec.num_types ? " or " : ", ";
    text += TypeName(spec.types[i]);
  }
  return text;
}

std::string CheckInputTypes(const char* op, const ParamSpec* specs, size_t n,
                            const ONNXTensorElementDataType* types) {
  for (size_t i = 0; i < n; ++i) {
    if (types[i] == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) continue;
    const ParamSpec& spec = specs[i];
    // An input sharing its type parameter with an earlier present input must match it.
    for (size_t j = 0; j < i && spec.type_param[0] != '\0'; ++j) {
      if (types[j] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED &&
          std::string(specs[j].type_param) == spec.type_param && types[j] != types[i]) {
        return Str(op, ": input '", spec.name, "' must have the type of ", specs[j].name, " (",
                   TypeName(types[j]), "), got ", TypeName(types[i]));
      }
    }
    if (std::find(spec.types, spec.types + spec.num_types, types[i]) == spec.types + spec.num_types) {
      return Str(op, ": input '", spec.name, "' must be ", TypeList(spec), ", got ", TypeName(types[i]));
    }
  }
  return {};
}

std::string OutputTypeMismatch(const char* op, const ParamSpec& output, ONNXTensorElementDataType expected,
                               ONNXTensorElementDataType got) {
  return Str(op, ": output '", output.name, "' must be ", TypeName(expected),
             " for these inputs, but the graph types it ", TypeName(got));
}

ONNXTensorElementDataType ExpectedOutputType(const ParamSpec& out, const ParamSpec* inputs, size_t num_inputs,
                                             const ONNXTensorElementDataType* input_types) {
  if (out.num_types == 1 || out.type_param[0] == '\0') return out.types[0];
  for (size_t i = 0; i < num_inputs; ++i) {
    if (input_types[i] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED &&
        std::string(inputs[i].type_param) == out.type_param) {
      return input_types[i];
    }
  }
  return out.types[0];
}

void* GetCheckedOutput(Ort::KernelContext& ctx, const char* op, const ParamSpec* outputs, size_t index,
                       const std::vector<int64_t>& shape, ONNXTensorElementDataType expected, bool required) {
  Ort::UnownedValue value{nullptr};
  if (index < ctx.GetOutputCount()) value = ctx.GetOutput(index, shape);
  if (!value) {
    if (required) Fail(Str(op, ": output '", outputs[index].name, "' is required, got none"));
    return nullptr;
  }
  const ONNXTensorElementDataType type = value.GetTensorTypeAndShapeInfo().GetElementType();
  if (type != expected) Fail(OutputTypeMismatch(op, outputs[index], expected, type));
  return value.GetTensorMutableRawData();  // null when empty
}

InputView GetInputView(Ort::KernelContext& ctx, size_t index) {
  InputView view;
  if (index >= ctx.GetInputCount()) return view;
  Ort::ConstValue value = ctx.GetInput(index);
  if (!value) return view;
  auto info = value.GetTensorTypeAndShapeInfo();
  view.present = true;
  view.type = info.GetElementType();
  view.shape = info.GetShape();
  view.size = static_cast<int64_t>(info.GetElementCount());
  view.data = value.GetTensorRawData();
  return view;
}

void FailRequiredInput(const char* op, const ParamSpec& spec) {
  Fail(Str(op, ": input '", spec.name, "' is required, got none"));
}

namespace {
std::vector<OpManifestEntry>& Manifest() {
  static std::vector<OpManifestEntry> entries;
  return entries;
}
std::mutex& ManifestMutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

void RegisterManifestEntry(const OpManifestEntry& entry) {
  std::lock_guard<std::mutex> lock(ManifestMutex());
  for (const auto& e : Manifest()) {
    if (std::string(e.name) == entry.name && std::string(e.provider) == entry.provider) return;
  }
  Manifest().push_back(entry);
}

namespace {
void ParamsJson(std::ostream& os, const ParamSpec* params, size_t n) {
  os << '[';
  for (size_t i = 0; i < n; ++i) {
    const ParamSpec& p = params[i];
    os << (i ? ", " : "") << "{\"name\": \"" << p.name
       << "\", \"optional\": " << (p.optional ? "true" : "false") << ", \"types\": [";
    for (size_t t = 0; t < p.num_types; ++t) os << (t ? ", " : "") << '"' << TypeName(p.types[t]) << '"';
    os << "]}";
  }
  os << ']';
}
}  // namespace

std::string ManifestJson(const char* domain) {
  std::lock_guard<std::mutex> lock(ManifestMutex());
  std::ostringstream os;
  os.precision(17);
  os << "{\"domain\": \"" << domain << "\", \"ops\": [";
  for (size_t i = 0; i < Manifest().size(); ++i) {
    const auto& e = Manifest()[i];
    os << (i ? ", " : "") << "{\"name\": \"" << e.name << "\", \"provider\": \"" << e.provider
       << "\", \"since_version\": " << e.since_version << ", \"inputs\": ";
    ParamsJson(os, e.tables.inputs, e.tables.num_inputs);
    os << ", \"outputs\": ";
    ParamsJson(os, e.tables.outputs, e.tables.num_outputs);
    os << ", \"attributes\": [";
    for (size_t j = 0; j < e.tables.num_attrs; ++j) {
      const AttrSpec& a = e.tables.attrs[j];
      os << (j ? ", " : "") << "{\"name\": \"" << a.name << "\", \"kind\": \""
         << (a.kind == AttrSpec::kInt ? "int" : "float")
         << "\", \"required\": " << (a.required ? "true" : "false") << ", \"default\": ";
      if (a.required)
        os << "null";
      else if (a.kind == AttrSpec::kInt)
        os << static_cast<int64_t>(a.default_value);
      else
        os << a.default_value;
      os << "}";
    }
    os << "]}";
  }
  os << "]}";
  return os.str();
}

namespace {
std::atomic<int> runtime_version{0};  // major * 1000000 + minor * 1000 + patch; 0 = not recorded
}  // namespace

void SetRuntimeVersion(int major, int minor, int patch) {
  runtime_version.store(major * 1000000 + minor * 1000 + patch);
}

bool RuntimeAtLeast(int major, int minor, int patch) {
  return runtime_version.load() >= major * 1000000 + minor * 1000 + patch;
}

bool GetInferInput(const OrtApi& api, OrtShapeInferContext* ctx, size_t i, InferredTensor* out) {
  size_t count = 0;
  if (OrtStatus* s = api.ShapeInferContext_GetInputCount(ctx, &count)) {
    api.ReleaseStatus(s);
    return false;
  }
  if (i >= count) return false;
  OrtTensorTypeAndShapeInfo* info = nullptr;  // owned by the context: never released here
  if (OrtStatus* s = api.ShapeInferContext_GetInputTypeShape(ctx, i, &info)) {
    api.ReleaseStatus(s);
    return false;
  }
  if (info == nullptr) return false;
  ONNXTensorElementDataType type{};
  size_t rank = 0;
  if (OrtStatus* s = api.GetTensorElementType(info, &type)) {
    api.ReleaseStatus(s);
    return false;
  }
  if (OrtStatus* s = api.GetDimensionsCount(info, &rank)) {
    api.ReleaseStatus(s);
    return false;
  }
  // An optional input omitted through an empty name reaches shape inference without a type.
  if (type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) return false;
  std::vector<int64_t> dims(rank);
  std::vector<const char*> symbols(rank, nullptr);
  if (rank) {
    if (OrtStatus* s = api.GetDimensions(info, dims.data(), rank)) {
      api.ReleaseStatus(s);
      return false;
    }
    if (OrtStatus* s = api.GetSymbolicDimensions(info, symbols.data(), rank)) {
      api.ReleaseStatus(s);
      std::fill(symbols.begin(), symbols.end(), nullptr);
    }
  }
  out->type = type;
  out->rank_known = true;
  out->dims.clear();
  for (size_t d = 0; d < rank; ++d) {
    InferDim dim;
    dim.value = dims[d];
    if (dims[d] < 0 && symbols[d] != nullptr) dim.symbol = symbols[d];
    out->dims.push_back(dim);
  }
  return true;
}

OrtStatusPtr SetInferOutput(const OrtApi& api, OrtShapeInferContext* ctx, size_t i, const InferredTensor& t) {
  OrtTensorTypeAndShapeInfo* info = nullptr;
  if (OrtStatus* s = api.CreateTensorTypeAndShapeInfo(&info)) return s;
  OrtStatusPtr status = api.SetTensorElementType(info, t.type);
  if (status == nullptr && t.rank_known) {
    // The C API turns an unknown dim without a name into dim_value -1 (and ORT then warns on
    // every run that the shape does not match): give each such dim a fresh name instead.
    static std::atomic<uint64_t> next_unknown{0};
    std::vector<std::string> fresh;
    fresh.reserve(t.dims.size());
    std::vector<int64_t> dims;
    std::vector<const char*> symbols;
    for (const auto& d : t.dims) {
      dims.push_back(d.value >= 0 ? d.value : -1);
      if (d.value >= 0) {
        symbols.push_back("");
      } else if (!d.symbol.empty()) {
        symbols.push_back(d.symbol.c_str());
      } else {
        fresh.push_back(Str("ascend_moe_unk_", next_unknown.fetch_add(1)));
        symbols.push_back(fresh.back().c_str());
      }
    }
    status = api.SetDimensions(info, dims.data(), dims.size());
    if (status == nullptr && !symbols.empty())
      status = api.SetSymbolicDimensions(info, symbols.data(), symbols.size());
  }
  if (status == nullptr) status = api.ShapeInferContext_SetOutputTypeShape(ctx, i, info);
  api.ReleaseTensorTypeAndShapeInfo(info);
  return status;
}

int64_t InferAttrInt(const OrtApi& api, OrtShapeInferContext* ctx, const AttrSpec& spec) {
  int64_t value = static_cast<int64_t>(spec.default_value);
  const OrtOpAttr* attr = nullptr;
  OrtStatus* s = api.ShapeInferContext_GetAttribute(ctx, spec.name, &attr);
  if (s != nullptr || attr == nullptr) {
    if (s) api.ReleaseStatus(s);
    return value;  // absent: the default
  }
  int64_t read = 0;
  size_t written = 0;
  if (OrtStatus* r = api.ReadOpAttr(attr, ORT_OP_ATTR_INT, &read, sizeof(int64_t), &written)) {
    api.ReleaseStatus(r);
    return value;
  }
  return read;
}

namespace {

// Type and rank of `type_info` (null: absent); releases it.
GraphTensor ReadGraphTensor(const OrtApi& api, OrtTypeInfo* type_info) {
  GraphTensor t;
  if (type_info == nullptr) return t;
  const OrtTensorTypeAndShapeInfo* tensor = nullptr;  // owned by type_info
  if (OrtStatus* s = api.CastTypeInfoToTensorInfo(type_info, &tensor)) api.ReleaseStatus(s);
  if (tensor != nullptr) {
    if (OrtStatus* s = api.GetTensorElementType(tensor, &t.type)) {
      api.ReleaseStatus(s);
      t.type = ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    }
    if (OrtStatus* s = api.GetDimensionsCount(tensor, &t.rank)) {
      api.ReleaseStatus(s);
      t.rank = 0;
    }
  }
  api.ReleaseTypeInfo(type_info);
  return t;
}

template <typename CountFn, typename InfoFn>
std::vector<GraphTensor> ReadGraphTensors(size_t n, CountFn count_fn, InfoFn info_fn) {
  const OrtApi& api = Ort::GetApi();
  size_t count = 0;
  Ort::ThrowOnError(count_fn(&count));
  std::vector<GraphTensor> out(n);
  for (size_t i = 0; i < n && i < count; ++i) {
    OrtTypeInfo* type_info = nullptr;
    if (OrtStatus* s = info_fn(i, &type_info)) {
      api.ReleaseStatus(s);  // an absent optional input or output has no type
      continue;
    }
    out[i] = ReadGraphTensor(api, type_info);
  }
  return out;
}

std::vector<ONNXTensorElementDataType> TypesOf(const std::vector<GraphTensor>& tensors) {
  std::vector<ONNXTensorElementDataType> types;
  for (const auto& t : tensors) types.push_back(t.type);
  return types;
}

}  // namespace

std::vector<GraphTensor> KernelInputs(const OrtKernelInfo* info, size_t n) {
  const OrtApi& api = Ort::GetApi();
  return ReadGraphTensors(
      n, [&](size_t* c) { return api.KernelInfo_GetInputCount(info, c); },
      [&](size_t i, OrtTypeInfo** t) { return api.KernelInfo_GetInputTypeInfo(info, i, t); });
}

std::vector<GraphTensor> KernelOutputs(const OrtKernelInfo* info, size_t n) {
  const OrtApi& api = Ort::GetApi();
  return ReadGraphTensors(
      n, [&](size_t* c) { return api.KernelInfo_GetOutputCount(info, c); },
      [&](size_t i, OrtTypeInfo** t) { return api.KernelInfo_GetOutputTypeInfo(info, i, t); });
}

void CheckKernelInputTypes(const char* op, const ParamSpec* specs, size_t n,
                           const std::vector<GraphTensor>& inputs) {
  // ORT sees every input as optional (op_base.h): a required input left out or named "" arrives
  // here absent (no type), and is named by its schema position.
  for (size_t i = 0; i < n; ++i) {
    const bool absent = i >= inputs.size() || inputs[i].type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    if (!specs[i].optional && absent) FailRequiredInput(op, specs[i]);
  }
  const std::string error = CheckInputTypes(op, specs, n, TypesOf(inputs).data());
  if (!error.empty()) Fail(error);
}

void CheckKernelOutputTypes(const OrtKernelInfo* info, const char* op, const ParamSpec* inputs,
                            size_t num_inputs, const std::vector<GraphTensor>& input_infos,
                            const ParamSpec* outputs, size_t num_outputs,
                            const ONNXTensorElementDataType* overrides) {
  const std::vector<ONNXTensorElementDataType> input_types = TypesOf(input_infos);
  const std::vector<GraphTensor> graph = KernelOutputs(info, num_outputs);
  for (size_t i = 0; i < num_outputs; ++i) {
    if (graph[i].type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED) continue;  // omitted
    const bool overridden = overrides != nullptr && overrides[i] != ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
    const ONNXTensorElementDataType expected =
        overridden ? overrides[i] : ExpectedOutputType(outputs[i], inputs, num_inputs, input_types.data());
    if (graph[i].type != expected) Fail(OutputTypeMismatch(op, outputs[i], expected, graph[i].type));
  }
}

OrtStatusPtr InferCheckInputTypes(const OrtApi& api, OrtShapeInferContext* ctx, const char* op,
                                  const ParamSpec* specs, size_t n) {
  std::vector<ONNXTensorElementDataType> types(n, ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED);
  for (size_t i = 0; i < n; ++i) {
    InferredTensor t{};
    if (GetInferInput(api, ctx, i, &t)) types[i] = t.type;
  }
  const std::string error = CheckInputTypes(op, specs, n, types.data());
  return error.empty() ? nullptr : api.CreateStatus(ORT_INVALID_ARGUMENT, error.c_str());
}

}  // namespace ascend_moe
