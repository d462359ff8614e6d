// Fake of CANN's single-operator API (part of libascendcl.so): tensor descriptors, data buffers,
// operator attributes and aclopCompileAndExecute, which ONNX Runtime's CANN EP calls for every
// standard op it places on the NPU. Each launch is checked as the operator compiler would (static
// ND descriptors, buffers in device memory and as large as their descriptors, the op type's
// operand count, dtypes, shapes and attributes: fake_aclop_ops.cc) and then queued on the stream
// through fake_cann::Enqueue, where its host implementation computes on the fake's mappings.
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <string>

#include "fake_aclop.h"
#include "fake_cann.h"

namespace fake_cann::aclop {

size_t TypeBytes(int dtype) {
  switch (dtype) {
    case kFloat:
    case kInt32:
    case kUint32:
      return 4;
    case kFloat16:
    case kBFloat16:
    case kInt16:
    case kUint16:
      return 2;
    case kInt8:
    case kUint8:
    case kBool:
      return 1;
    case kInt64:
    case kUint64:
    case kDouble:
      return 8;
    default:
      return 0;
  }
}

int64_t Numel(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

std::string DimsText(const std::vector<int64_t>& dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace fake_cann::aclop

namespace {

using namespace fake_cann::aclop;  // NOLINT(build/namespaces): the fake's own names

fake_cann::LiveHandles& Handles() {  // descriptors, buffers and attributes not yet destroyed
  static auto* handles = new fake_cann::LiveHandles;
  return *handles;
}
void Track(const void* p) { Handles().Track(p); }
bool Untrack(const void* p) { return Handles().Untrack(p); }
bool IsLive(const void* p) { return Handles().IsLive(p); }

template <class T>
const T* Live(const void* p, uint32_t magic) {
  if (!p || !IsLive(p)) return nullptr;
  auto* t = static_cast<const T*>(p);
  return t->magic == magic ? t : nullptr;
}

int Fail(const std::string& type, int code, const std::string& message) {
  const std::string m = "aclopCompileAndExecute(\"" + type + "\"): " + message;
  FakeAclError(m.c_str());
  return code;
}

int SetAttr(void* attr, const char* name, AttrValue value) {
  auto* a = const_cast<Attr*>(Live<Attr>(attr, kAttrMagic));
  if (!a || !name) {
    FakeAclError("aclopSetAttr*: the attribute handle is not a live aclopAttr, or the name is null");
    return kInvalidParam;
  }
  a->values[name] = std::move(value);
  return 0;
}

// The operand descriptors and buffers of one side of a launch, checked; `descs` gets copies.
int CollectOperands(const std::string& type, const char* side, int n, const void* const* descs,
                    const void* const* buffers, std::vector<Desc>* out, std::vector<const Buffer*>* bufs) {
  if (n < 0 || (n > 0 && (!descs || !buffers))) {
    return Fail(
        type, kInvalidParam,
        std::string(side) + ": count " + std::to_string(n) + " with null descriptor or buffer arrays");
  }
  for (int i = 0; i < n; ++i) {
    const std::string what = std::string(side) + " " + std::to_string(i);
    const Desc* d = Live<Desc>(descs[i], kDescMagic);
    const Buffer* b = Live<Buffer>(buffers[i], kBufferMagic);
    if (!d) return Fail(type, kInvalidParam, what + ": not a live aclTensorDesc");
    if (!b) return Fail(type, kInvalidParam, what + ": not a live aclDataBuffer");
    if (d->format != kFormatNd) {
      return Fail(type, kFormatNotMatch,
                  what + ": format " + std::to_string(d->format) + ", the operator takes ND (2)");
    }
    if (TypeBytes(d->dtype) == 0) {
      return Fail(type, kUnsupportedType, what + ": unknown data type " + std::to_string(d->dtype));
    }
    for (int64_t x : d->dims) {
      if (x < 0) {
        return Fail(type, kInvalidParam,
                    what + ": dims " + DimsText(d->dims) + " (TensorDesc must be static when executing)");
      }
    }
    const size_t bytes = static_cast<size_t>(Numel(d->dims)) * TypeBytes(d->dtype);
    if (d->is_const && d->const_data.size() < bytes) {
      return Fail(type, kInvalidParam,
                  what + ": constant holds " + std::to_string(d->const_data.size()) + " bytes, " +
                      DimsText(d->dims) + " needs " + std::to_string(bytes));
    }
    if (b->size < bytes) {
      return Fail(type, kInvalidParam,
                  what + ": buffer of " + std::to_string(b->size) + " bytes for a " + DimsText(d->dims) +
                      " " + fake_cann::TypeName(d->dtype) + " descriptor (" + std::to_string(bytes) +
                      " bytes)");
    }
    if (bytes && !d->is_const && !FakeAclDeviceAccess(b->data, bytes)) {
      return Fail(type, kInvalidParam,
                  what + ": data " + std::to_string(reinterpret_cast<uintptr_t>(b->data)) + " + " +
                      std::to_string(bytes) + " bytes is not inside one device allocation");
    }
    out->push_back(*d);
    bufs->push_back(b);
  }
  return 0;
}

void Trace(const Call& c) {
  static const bool on = [] {
    const char* v = std::getenv("FAKE_ACL_TRACE");
    return v && std::strcmp(v, "0") != 0;
  }();
  if (!on) return;
  std::string s = "[fake-acl] aclop " + c.type + "(";
  for (const auto& d : c.in) s += fake_cann::TypeName(d.dtype) + DimsText(d.dims) + " ";
  s += "->";
  for (const auto& d : c.out) s += " " + fake_cann::TypeName(d.dtype) + DimsText(d.dims);
  for (const auto& [name, v] : c.attrs) {
    s += "; " + name + "=";
    if (v.kind == AttrValue::kFloat)
      s += std::to_string(v.f);
    else if (v.kind == AttrValue::kString)
      s += v.s;
    else if (v.kind == AttrValue::kListInt)
      s += DimsText(v.list);
    else
      s += std::to_string(v.i);
  }
  std::fprintf(stderr, "%s)\n", s.c_str());
}

}  // namespace

extern "C" {

void* aclCreateTensorDesc(int dtype, int ndims, const int64_t* dims, int format) {
  if (ndims < 0 || (ndims > 0 && !dims)) {
    FakeAclError("aclCreateTensorDesc: negative rank or null dims");
    return nullptr;
  }
  auto* d = new Desc{kDescMagic, dtype, std::vector<int64_t>(dims, dims + ndims), format, false, {}};
  Track(d);
  return d;
}
void aclDestroyTensorDesc(const void* d) {
  if (!Live<Desc>(d, kDescMagic) || !Untrack(d)) {
    FakeAclError("aclDestroyTensorDesc: not a live descriptor (destroyed twice?)");
    return;
  }
  delete static_cast<const Desc*>(d);
}
int aclSetTensorConst(void* desc, void* data, size_t length) {
  auto* d = const_cast<Desc*>(Live<Desc>(desc, kDescMagic));
  if (!d || (length && !data)) {
    FakeAclError("aclSetTensorConst: not a live descriptor, or null data");
    return kInvalidParam;
  }
  d->is_const = true;
  d->const_data.assign(static_cast<char*>(data), static_cast<char*>(data) + length);
  return 0;
}
size_t aclGetTensorDescNumDims(const void* d) {
  const Desc* t = Live<Desc>(d, kDescMagic);
  return t ? t->dims.size() : 0;
}
int aclGetTensorDescDimV2(const void* d, size_t i, int64_t* v) {
  const Desc* t = Live<Desc>(d, kDescMagic);
  if (!t || !v || i >= t->dims.size()) return kInvalidParam;
  *v = t->dims[i];
  return 0;
}
size_t aclDataTypeSize(int dtype) { return TypeBytes(dtype); }
size_t aclGetTensorDescSize(const void* d) {
  const Desc* t = Live<Desc>(d, kDescMagic);
  return t ? static_cast<size_t>(Numel(t->dims)) * TypeBytes(t->dtype) : 0;
}

void* aclCreateDataBuffer(void* data, size_t size) {
  auto* b = new Buffer{kBufferMagic, data, size};
  Track(b);
  return b;
}
int aclDestroyDataBuffer(const void* b) {
  if (!Live<Buffer>(b, kBufferMagic) || !Untrack(b)) {
    FakeAclError("aclDestroyDataBuffer: not a live data buffer (destroyed twice?)");
    return kInvalidParam;
  }
  delete static_cast<const Buffer*>(b);
  return 0;
}
void* aclGetDataBufferAddr(const void* b) {
  const Buffer* t = Live<Buffer>(b, kBufferMagic);
  return t ? t->data : nullptr;
}

void* aclopCreateAttr() {
  auto* a = new Attr{kAttrMagic, {}};
  Track(a);
  return a;
}
void aclopDestroyAttr(const void* a) {
  if (!Live<Attr>(a, kAttrMagic) || !Untrack(a)) {
    FakeAclError("aclopDestroyAttr: not a live attribute set (destroyed twice?)");
    return;
  }
  delete static_cast<const Attr*>(a);
}
int aclopSetAttrBool(void* a, const char* name, uint8_t v) {
  AttrValue x(AttrValue::kBool);
  x.i = v != 0;
  return SetAttr(a, name, x);
}
int aclopSetAttrInt(void* a, const char* name, int64_t v) {
  AttrValue x(AttrValue::kInt);
  x.i = v;
  return SetAttr(a, name, x);
}
int aclopSetAttrFloat(void* a, const char* name, float v) {
  AttrValue x(AttrValue::kFloat);
  x.f = v;
  return SetAttr(a, name, x);
}
int aclopSetAttrString(void* a, const char* name, const char* v) {
  AttrValue x(AttrValue::kString);
  x.s = v ? v : "";
  return SetAttr(a, name, x);
}
int aclopSetAttrListInt(void* a, const char* name, int n, const int64_t* v) {
  if (n < 0 || (n > 0 && !v)) {
    FakeAclError("aclopSetAttrListInt: negative count or null values");
    return kInvalidParam;
  }
  AttrValue x(AttrValue::kListInt);
  x.list.assign(v, v + n);
  return SetAttr(a, name, x);
}

// Checks the launch, then queues the host implementation on `stream`. Device addresses are
// resolved when the work runs: a buffer freed before then fails the run, as on the device.
int aclopCompileAndExecute(const char* op_type, int n_in, const void* const* in_desc,
                           const void* const* in_buf, int n_out, const void* const* out_desc,
                           void* const* out_buf, const void* attr, int engine, int compile_flag,
                           const char* /*op_path*/, void* stream) {
  FakeAclCountCall("aclopCompileAndExecute");
  const std::string type = op_type ? op_type : "";
  if (type.empty()) return Fail(type, kInvalidParam, "null or empty op type");
  FakeAclCountCall(("aclop:" + type).c_str());
  if (engine < 0 || engine > 2 || compile_flag < 0 || compile_flag > 2) {
    return Fail(type, kInvalidParam,
                "engine type " + std::to_string(engine) + " / compile flag " + std::to_string(compile_flag) +
                    " out of range");
  }
  if (stream && !FakeAclIsStream(stream)) return Fail(type, kInvalidParam, "not a live stream");
  const Attr* a = nullptr;
  if (attr && !(a = Live<Attr>(attr, kAttrMagic))) {
    return Fail(type, kInvalidParam, "attr is not a live aclopAttr");
  }
  Call call{type, {}, {}, a ? a->values : std::map<std::string, AttrValue>{}, {}, {}};
  std::vector<const Buffer*> ibuf, obuf;
  if (int rc = CollectOperands(type, "input", n_in, in_desc, in_buf, &call.in, &ibuf)) return rc;
  if (int rc = CollectOperands(type, "output", n_out, out_desc, out_buf, &call.out, &obuf)) return rc;
  for (const Desc& d : call.out) {
    if (d.is_const) return Fail(type, kOutputNotMatch, "an output descriptor is a constant");
  }
  Trace(call);
  const OpDef* op = FindOp(type);
  if (!op) {
    return Fail(type, kOpNotFound,
                "no host implementation of this operator type in the fake "
                "(it has: " +
                    KnownOps() + ")");
  }
  if (n_in != op->inputs) {
    return Fail(type, kInputNotMatch,
                "takes " + std::to_string(op->inputs) + " inputs, got " + std::to_string(n_in));
  }
  if (n_out != op->outputs) {
    return Fail(type, kOutputNotMatch,
                "takes " + std::to_string(op->outputs) + " outputs, got " + std::to_string(n_out));
  }
  const Failure f = op->check(call);
  if (!f.ok()) return Fail(type, f.code, f.message);
  std::vector<void*> in_ptr, out_ptr;
  for (const Buffer* b : ibuf) in_ptr.push_back(b->data);
  for (const Buffer* b : obuf) out_ptr.push_back(b->data);
  return fake_cann::Enqueue(stream, [op, call, in_ptr, out_ptr]() mutable {
    // Inputs are read into copies first: an output may share memory with an input.
    std::vector<std::vector<char>> copies(call.in.size());
    for (size_t i = 0; i < call.in.size(); ++i) {
      const Desc& d = call.in[i];
      const size_t bytes = static_cast<size_t>(Numel(d.dims)) * TypeBytes(d.dtype);
      const void* p = d.is_const ? d.const_data.data() : FakeAclDeviceAccess(in_ptr[i], bytes);
      if (bytes && !p)
        return Fail(call.type, kInvalidParam,
                    "input " + std::to_string(i) + " was freed before the operator ran");
      copies[i].assign(static_cast<const char*>(p), static_cast<const char*>(p) + bytes);
      call.in_data.push_back(copies[i].data());
    }
    for (size_t i = 0; i < call.out.size(); ++i) {
      const Desc& d = call.out[i];
      const size_t bytes = static_cast<size_t>(Numel(d.dims)) * TypeBytes(d.dtype);
      void* p = FakeAclDeviceAccess(out_ptr[i], bytes);
      if (bytes && !p)
        return Fail(call.type, kInvalidParam,
                    "output " + std::to_string(i) + " was freed before the operator ran");
      call.out_data.push_back(static_cast<char*>(p));
    }
    op->run(call);
    return 0;
  });
}

}  // extern "C"
