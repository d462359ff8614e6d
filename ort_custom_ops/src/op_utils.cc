#include "op_utils.h"

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
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "float";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "float16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "bfloat16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "double";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "int8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "uint8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "int16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "uint16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "int32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "uint32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "int64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "uint64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "bool";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "string";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E4M3FN: return "float8e4m3fn";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT8E5M2: return "float8e5m2";
    default: return "unsupported type";
  }
}

int64_t NumElements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t ReadIntAttr(const OrtKernelInfo* info, const AttrSpec& spec) {
  int64_t value = 0;
  OrtStatus* status = Ort::GetApi().KernelInfoGetAttribute_int64(info, spec.name, &value);
  if (status == nullptr) return value;
  Ort::GetApi().ReleaseStatus(status);
  if (spec.required) Fail(Str("attribute '", spec.name, "' is required"));
  return static_cast<int64_t>(spec.default_value);
}

float ReadFloatAttr(const OrtKernelInfo* info, const AttrSpec& spec) {
  float value = 0.f;
  OrtStatus* status = Ort::GetApi().KernelInfoGetAttribute_float(info, spec.name, &value);
  if (status == nullptr) return value;
  Ort::GetApi().ReleaseStatus(status);
  if (spec.required) Fail(Str("attribute '", spec.name, "' is required"));
  return static_cast<float>(spec.default_value);
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

std::string ManifestJson() {
  std::lock_guard<std::mutex> lock(ManifestMutex());
  std::ostringstream os;
  os.precision(17);
  os << "{\"domain\": \"" << kDomain << "\", \"ops\": [";
  for (size_t i = 0; i < Manifest().size(); ++i) {
    const auto& e = Manifest()[i];
    os << (i ? ", " : "") << "{\"name\": \"" << e.name << "\", \"provider\": \"" << e.provider
       << "\", \"attributes\": [";
    for (size_t j = 0; j < e.num_attrs; ++j) {
      const AttrSpec& a = e.attrs[j];
      os << (j ? ", " : "") << "{\"name\": \"" << a.name << "\", \"kind\": \""
         << (a.kind == AttrSpec::kInt ? "int" : "float") << "\", \"required\": "
         << (a.required ? "true" : "false") << ", \"default\": ";
      if (a.required) os << "null";
      else if (a.kind == AttrSpec::kInt) os << static_cast<int64_t>(a.default_value);
      else os << a.default_value;
      os << "}";
    }
    os << "]}";
  }
  os << "]}";
  return os.str();
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
  if (OrtStatus* s = api.GetTensorElementType(info, &type)) { api.ReleaseStatus(s); return false; }
  if (OrtStatus* s = api.GetDimensionsCount(info, &rank)) { api.ReleaseStatus(s); return false; }
  std::vector<int64_t> dims(rank);
  std::vector<const char*> symbols(rank, nullptr);
  if (rank) {
    if (OrtStatus* s = api.GetDimensions(info, dims.data(), rank)) { api.ReleaseStatus(s); return false; }
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

OrtStatusPtr SetInferOutput(const OrtApi& api, OrtShapeInferContext* ctx, size_t i,
                            const InferredTensor& t) {
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

OrtStatusPtr InferAttrInt(const OrtApi& api, OrtShapeInferContext* ctx, const AttrSpec& spec,
                          int64_t* value) {
  *value = static_cast<int64_t>(spec.default_value);
  const OrtOpAttr* attr = nullptr;
  OrtStatus* s = api.ShapeInferContext_GetAttribute(ctx, spec.name, &attr);
  if (s != nullptr || attr == nullptr) {
    if (s) api.ReleaseStatus(s);
    return nullptr;  // absent: the default
  }
  size_t written = 0;
  return api.ReadOpAttr(attr, ORT_OP_ATTR_INT, value, sizeof(int64_t), &written);
}

}  // namespace ascend_moe
