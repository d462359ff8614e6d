// The operator types the fake's aclopCompileAndExecute serves: every type ONNX Runtime's CANN EP
// (1.24.4, enable_cann_graph=0) sends for the standard ops an exported MoE layer places on the
// NPU, plus the rest of the EP's elementwise set (onnxruntime/core/providers/cann: MatMul ->
// "BatchMatMul" with adj_x1/adj_x2, Gemm -> "GEMM" with transpose_a/transpose_b and alpha/beta
// inputs, Add/Sub/Mul/Div by name after "BroadcastToD" (attr shape) of a smaller operand, Cast
// with dst_type, the unary ops by name (Log/Exp with base/scale/shift), Transpose -> "TransposeD"
// with perm, Flatten with axis, Fill with a constant dims input). Each entry checks the descriptors and
// attributes as the operator's prototype does and computes on the host: float types in float32 (double for
// double), integers in int64; matrix products accumulate in double and round once.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "fake_aclop.h"
#include "fake_cann.h"
#include "ops_src/cpu/half.h"

namespace fake_cann::aclop {
namespace {

using ascend_moe::cpu::Bf16ToFloat;
using ascend_moe::cpu::FloatToBf16;
using ascend_moe::cpu::FloatToFp16;
using ascend_moe::cpu::Fp16ToFloat;
using Dims = std::vector<int64_t>;

// ---- element access ----------------------------------------------------------------------------

bool IsInt(int t) {
  return t == kInt8 || t == kUint8 || t == kInt16 || t == kUint16 || t == kInt32 || t == kUint32 ||
         t == kInt64 || t == kUint64 || t == kBool;
}

template <class T>
T Get(const char* p, int64_t i) {
  T v;
  std::memcpy(&v, p + i * static_cast<int64_t>(sizeof(T)), sizeof(T));
  return v;
}
template <class T>
void Put(char* p, int64_t i, T v) {
  std::memcpy(p + i * static_cast<int64_t>(sizeof(T)), &v, sizeof(T));
}

double LoadReal(int t, const char* p, int64_t i) {
  switch (t) {
    case kFloat:
      return Get<float>(p, i);
    case kFloat16:
      return Fp16ToFloat(Get<uint16_t>(p, i));
    case kBFloat16:
      return Bf16ToFloat(Get<uint16_t>(p, i));
    case kDouble:
      return Get<double>(p, i);
    default:
      return 0;
  }
}
// Float types round to float32 first: the value stored is what a float32 computation gives.
void StoreReal(int t, char* p, int64_t i, double v) {
  switch (t) {
    case kFloat:
      Put<float>(p, i, static_cast<float>(v));
      break;
    case kFloat16:
      Put<uint16_t>(p, i, FloatToFp16(static_cast<float>(v)));
      break;
    case kBFloat16:
      Put<uint16_t>(p, i, FloatToBf16(static_cast<float>(v)));
      break;
    case kDouble:
      Put<double>(p, i, v);
      break;
    default:
      break;
  }
}
int64_t LoadInt(int t, const char* p, int64_t i) {
  switch (t) {
    case kInt8:
      return Get<int8_t>(p, i);
    case kUint8:
    case kBool:
      return Get<uint8_t>(p, i);
    case kInt16:
      return Get<int16_t>(p, i);
    case kUint16:
      return Get<uint16_t>(p, i);
    case kInt32:
      return Get<int32_t>(p, i);
    case kUint32:
      return Get<uint32_t>(p, i);
    case kInt64:
      return Get<int64_t>(p, i);
    case kUint64:
      return static_cast<int64_t>(Get<uint64_t>(p, i));
    default:
      return 0;
  }
}
void StoreInt(int t, char* p, int64_t i, int64_t v) {  // wraps to the type's width
  switch (t) {
    case kInt8:
      Put<int8_t>(p, i, static_cast<int8_t>(v));
      break;
    case kUint8:
      Put<uint8_t>(p, i, static_cast<uint8_t>(v));
      break;
    case kBool:
      Put<uint8_t>(p, i, v != 0);
      break;
    case kInt16:
      Put<int16_t>(p, i, static_cast<int16_t>(v));
      break;
    case kUint16:
      Put<uint16_t>(p, i, static_cast<uint16_t>(v));
      break;
    case kInt32:
      Put<int32_t>(p, i, static_cast<int32_t>(v));
      break;
    case kUint32:
      Put<uint32_t>(p, i, static_cast<uint32_t>(v));
      break;
    case kInt64:
      Put<int64_t>(p, i, v);
      break;
    case kUint64:
      Put<uint64_t>(p, i, static_cast<uint64_t>(v));
      break;
    default:
      break;
  }
}
// A real operation in the precision of dtype `t`: float32 for the float types, else double.
double InType(int t, double v) { return t == kDouble ? v : static_cast<double>(static_cast<float>(v)); }

// ---- shapes ------------------------------------------------------------------------------------

// numpy broadcasting of a and b; false when they do not broadcast.
bool Broadcast(const Dims& a, const Dims& b, Dims* out) {
  const size_t r = std::max(a.size(), b.size());
  out->assign(r, 1);
  for (size_t i = 0; i < r; ++i) {
    const int64_t x = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t y = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (x != y && x != 1 && y != 1) return false;
    (*out)[i] = x == 1 ? y : x;
  }
  return true;
}
bool BroadcastsTo(const Dims& in, const Dims& to) {
  Dims r;
  return in.size() <= to.size() && Broadcast(in, to, &r) && r == to;
}
// For each element of `to` (row-major), the index of the element of `in` it reads.
std::vector<int64_t> SourceIndex(const Dims& in, const Dims& to) {
  const size_t r = to.size(), lead = r - in.size();
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t i = r; i-- > lead;) {
    stride[i] = in[i - lead] == 1 ? 0 : s;
    s *= in[i - lead];
  }
  const int64_t n = Numel(to);
  std::vector<int64_t> idx(static_cast<size_t>(n));
  std::vector<int64_t> pos(r, 0);
  int64_t src = 0;
  for (int64_t k = 0; k < n; ++k) {
    idx[static_cast<size_t>(k)] = src;
    for (size_t d = r; d-- > 0;) {  // odometer step
      if (++pos[d] < to[d]) {
        src += stride[d];
        break;
      }
      src -= stride[d] * (pos[d] - 1);
      pos[d] = 0;
    }
  }
  return idx;
}

// ---- checks ------------------------------------------------------------------------------------

Failure Ok() { return {}; }
Failure Bad(int code, const std::string& m) { return {code, m}; }
std::string TypeText(int t) { return fake_cann::TypeName(t); }

const AttrValue* FindAttr(const Call& c, const char* name) {
  auto it = c.attrs.find(name);
  return it == c.attrs.end() ? nullptr : &it->second;
}
// An attribute of `kind`; `*f` is set when it is required and missing, or of another kind.
const AttrValue* NeedAttr(const Call& c, const char* name, AttrValue::Kind kind, bool required, Failure* f) {
  const AttrValue* a = FindAttr(c, name);
  if (!a) {
    if (required) *f = Bad(kAttrNotMatch, std::string("attribute '") + name + "' is required");
    return nullptr;
  }
  if (a->kind != kind) {
    *f = Bad(kAttrNotMatch, std::string("attribute '") + name + "' was set with another aclopSetAttr type");
    return nullptr;
  }
  return a;
}
bool OneOf(int t, std::initializer_list<int> types) {
  for (int x : types) {
    if (x == t) return true;
  }
  return false;
}
std::string TypesText(std::initializer_list<int> types) {
  std::string s;
  for (int x : types) s += (s.empty() ? "" : "/") + TypeText(x);
  return s;
}
Failure NeedType(const char* what, int t, std::initializer_list<int> types) {
  if (OneOf(t, types)) return Ok();
  return Bad(kUnsupportedType, std::string(what) + " must be " + TypesText(types) + ", got " + TypeText(t));
}
Failure NeedOutput(const Call& c, const Dims& dims, int dtype) {
  if (c.out[0].dtype != dtype) {
    return Bad(kOutputNotMatch,
               "output y is " + TypeText(c.out[0].dtype) + ", the operator gives " + TypeText(dtype));
  }
  if (c.out[0].dims != dims) {
    return Bad(kOutputNotMatch,
               "output y is " + DimsText(c.out[0].dims) + ", the operator gives " + DimsText(dims));
  }
  return Ok();
}

constexpr std::initializer_list<int> kRealTypes = {kFloat, kFloat16, kBFloat16, kDouble};
constexpr std::initializer_list<int> kNumericTypes = {kFloat, kFloat16, kBFloat16, kDouble, kInt8,  kUint8,
                                                      kInt16, kUint16,  kInt32,    kUint32, kInt64, kUint64};

// ---- matrix products ---------------------------------------------------------------------------

// BatchMatMul: x1 [..., M, K] (adj_x1: [..., K, M]) times x2 [..., K, N] (adj_x2: [..., N, K]),
// batch dims broadcast; ranks 2..8.
struct MatShape {
  Dims batch;
  int64_t m, k, n;
};
Failure MatMulShape(const Call& c, bool adj1, bool adj2, MatShape* s) {
  const Dims& a = c.in[0].dims;
  const Dims& b = c.in[1].dims;
  if (a.size() < 2 || a.size() > 8 || b.size() < 2 || b.size() > 8) {
    return Bad(kInputNotMatch, "x1 " + DimsText(a) + " and x2 " + DimsText(b) + " must have rank 2 to 8");
  }
  const int64_t m = adj1 ? a[a.size() - 1] : a[a.size() - 2], k1 = adj1 ? a[a.size() - 2] : a[a.size() - 1];
  const int64_t k2 = adj2 ? b[b.size() - 1] : b[b.size() - 2], n = adj2 ? b[b.size() - 2] : b[b.size() - 1];
  if (k1 != k2) {
    return Bad(kInputNotMatch, "x1 " + DimsText(a) + " and x2 " + DimsText(b) + " disagree on K (" +
                                   std::to_string(k1) + " vs " + std::to_string(k2) + ")");
  }
  if (!Broadcast(Dims(a.begin(), a.end() - 2), Dims(b.begin(), b.end() - 2), &s->batch)) {
    return Bad(kInputNotMatch,
               "batch dims of x1 " + DimsText(a) + " and x2 " + DimsText(b) + " do not broadcast");
  }
  s->m = m, s->k = k1, s->n = n;
  return Ok();
}
Dims MatOut(const MatShape& s) {
  Dims d = s.batch;
  d.push_back(s.m);
  d.push_back(s.n);
  return d;
}
bool AttrBool(const Call& c, const char* name) {
  const AttrValue* a = FindAttr(c, name);
  return a && a->i != 0;
}

Failure CheckBatchMatMul(const Call& c) {
  Failure f;
  NeedAttr(c, "adj_x1", AttrValue::kBool, false, &f);
  NeedAttr(c, "adj_x2", AttrValue::kBool, false, &f);
  if (!f.ok()) return f;
  const std::initializer_list<int> types = {kFloat, kFloat16, kBFloat16, kInt32};
  if (!(f = NeedType("x1", c.in[0].dtype, types)).ok()) return f;
  if (c.in[1].dtype != c.in[0].dtype) {
    return Bad(kInputNotMatch, "x2 is " + TypeText(c.in[1].dtype) + ", x1 " + TypeText(c.in[0].dtype));
  }
  MatShape s;
  if (!(f = MatMulShape(c, AttrBool(c, "adj_x1"), AttrBool(c, "adj_x2"), &s)).ok()) return f;
  return NeedOutput(c, MatOut(s), c.in[0].dtype);
}

// y[b, i, j] = alpha * sum_k a[b, i, k] * b[b, k, j] + beta * c (c broadcast to y), accumulated
// in double (integers in int64) and rounded once.
void Product(const Call& c, bool adj1, bool adj2, double alpha, double beta, int c_input) {
  MatShape s;
  MatMulShape(c, adj1, adj2, &s);
  const Dims& ad = c.in[0].dims;
  const Dims& bd = c.in[1].dims;
  const Dims y = MatOut(s);
  const int t = c.in[0].dtype, yt = c.out[0].dtype;
  const std::vector<int64_t> abatch = SourceIndex(Dims(ad.begin(), ad.end() - 2), s.batch);
  const std::vector<int64_t> bbatch = SourceIndex(Dims(bd.begin(), bd.end() - 2), s.batch);
  std::vector<int64_t> cidx;
  if (c_input >= 0) cidx = SourceIndex(c.in[static_cast<size_t>(c_input)].dims, y);
  const int64_t mk = s.m * s.k, kn = s.k * s.n;
  for (size_t bi = 0; bi < abatch.size(); ++bi) {
    const int64_t a0 = abatch[bi] * mk, b0 = bbatch[bi] * kn;
    for (int64_t i = 0; i < s.m; ++i) {
      for (int64_t j = 0; j < s.n; ++j) {
        const int64_t o = static_cast<int64_t>(bi) * s.m * s.n + i * s.n + j;
        if (IsInt(t)) {
          int64_t acc = 0;
          for (int64_t k = 0; k < s.k; ++k) {
            acc += LoadInt(t, c.in_data[0], a0 + (adj1 ? k * s.m + i : i * s.k + k)) *
                   LoadInt(t, c.in_data[1], b0 + (adj2 ? j * s.k + k : k * s.n + j));
          }
          StoreInt(yt, c.out_data[0], o, acc);
          continue;
        }
        double acc = 0;
        for (int64_t k = 0; k < s.k; ++k) {
          acc += LoadReal(t, c.in_data[0], a0 + (adj1 ? k * s.m + i : i * s.k + k)) *
                 LoadReal(t, c.in_data[1], b0 + (adj2 ? j * s.k + k : k * s.n + j));
        }
        acc *= alpha;
        if (c_input >= 0)
          acc += beta * LoadReal(c.in[static_cast<size_t>(c_input)].dtype,
                                 c.in_data[static_cast<size_t>(c_input)], cidx[static_cast<size_t>(o)]);
        StoreReal(yt, c.out_data[0], o, acc);
      }
    }
  }
}
void RunBatchMatMul(const Call& c) { Product(c, AttrBool(c, "adj_x1"), AttrBool(c, "adj_x2"), 1, 0, -1); }

// GEMM: a, b, c, alpha [1], beta [1] -> alpha * op(a) op(b) + beta * c (2-D).
Failure CheckGemm(const Call& c) {
  Failure f;
  NeedAttr(c, "transpose_a", AttrValue::kBool, false, &f);
  NeedAttr(c, "transpose_b", AttrValue::kBool, false, &f);
  if (!f.ok()) return f;
  if (!(f = NeedType("a", c.in[0].dtype, {kFloat, kFloat16})).ok()) return f;
  for (int i : {1, 2}) {
    if (c.in[static_cast<size_t>(i)].dtype != c.in[0].dtype) {
      return Bad(kInputNotMatch, "input " + std::to_string(i) + " is " +
                                     TypeText(c.in[static_cast<size_t>(i)].dtype) + ", a " +
                                     TypeText(c.in[0].dtype));
    }
  }
  for (int i : {3, 4}) {
    const Desc& d = c.in[static_cast<size_t>(i)];
    if (!OneOf(d.dtype, {kFloat, kFloat16}) || Numel(d.dims) != 1) {
      return Bad(kInputNotMatch, std::string(i == 3 ? "alpha" : "beta") + " must be one float, got " +
                                     TypeText(d.dtype) + DimsText(d.dims));
    }
  }
  if (c.in[0].dims.size() != 2 || c.in[1].dims.size() != 2) {
    return Bad(kInputNotMatch,
               "a " + DimsText(c.in[0].dims) + " and b " + DimsText(c.in[1].dims) + " must be 2-D");
  }
  MatShape s;
  if (!(f = MatMulShape(c, AttrBool(c, "transpose_a"), AttrBool(c, "transpose_b"), &s)).ok()) return f;
  if (!BroadcastsTo(c.in[2].dims, MatOut(s))) {
    return Bad(kInputNotMatch,
               "c " + DimsText(c.in[2].dims) + " does not broadcast to " + DimsText(MatOut(s)));
  }
  return NeedOutput(c, MatOut(s), c.in[0].dtype);
}
void RunGemm(const Call& c) {
  const double alpha = LoadReal(c.in[3].dtype, c.in_data[3], 0),
               beta = LoadReal(c.in[4].dtype, c.in_data[4], 0);
  Product(c, AttrBool(c, "transpose_a"), AttrBool(c, "transpose_b"), alpha, beta, 2);
}

// ---- elementwise -------------------------------------------------------------------------------

Failure CheckBinary(const Call& c) {
  Failure f;
  if (!(f = NeedType("x1", c.in[0].dtype, kNumericTypes)).ok()) return f;
  if (c.in[1].dtype != c.in[0].dtype) {
    return Bad(kInputNotMatch, "x2 is " + TypeText(c.in[1].dtype) + ", x1 " + TypeText(c.in[0].dtype));
  }
  Dims y;
  if (!Broadcast(c.in[0].dims, c.in[1].dims, &y)) {
    return Bad(kInputNotMatch,
               "x1 " + DimsText(c.in[0].dims) + " and x2 " + DimsText(c.in[1].dims) + " do not broadcast");
  }
  return NeedOutput(c, y, c.in[0].dtype);
}
template <class RealOp, class IntOp>
void Binary(const Call& c, RealOp real, IntOp integer) {
  const Dims& y = c.out[0].dims;
  const int t = c.in[0].dtype;
  const std::vector<int64_t> ia = SourceIndex(c.in[0].dims, y), ib = SourceIndex(c.in[1].dims, y);
  for (size_t o = 0; o < ia.size(); ++o) {
    const auto i = static_cast<int64_t>(o);
    if (IsInt(t)) {
      StoreInt(t, c.out_data[0], i,
               integer(LoadInt(t, c.in_data[0], ia[o]), LoadInt(t, c.in_data[1], ib[o])));
    } else {
      StoreReal(t, c.out_data[0], i,
                InType(t, real(LoadReal(t, c.in_data[0], ia[o]), LoadReal(t, c.in_data[1], ib[o]))));
    }
  }
}
int64_t IntDiv(int64_t a, int64_t b) { return b == 0 ? 0 : a / b; }  // the device gives no trap
void RunAdd(const Call& c) { Binary(c, std::plus<double>(), std::plus<int64_t>()); }
void RunSub(const Call& c) { Binary(c, std::minus<double>(), std::minus<int64_t>()); }
void RunMul(const Call& c) { Binary(c, std::multiplies<double>(), std::multiplies<int64_t>()); }
void RunDiv(const Call& c) { Binary(c, std::divides<double>(), IntDiv); }

// Unary ops: same dtype and dims out; `types` the dtypes the op takes.
Failure CheckUnaryOf(const Call& c, std::initializer_list<int> types) {
  Failure f;
  if (!(f = NeedType("x", c.in[0].dtype, types)).ok()) return f;
  return NeedOutput(c, c.in[0].dims, c.in[0].dtype);
}
Failure CheckUnaryReal(const Call& c) { return CheckUnaryOf(c, kRealTypes); }
Failure CheckUnarySigned(const Call& c) {
  return CheckUnaryOf(c, {kFloat, kFloat16, kBFloat16, kDouble, kInt8, kInt16, kInt32, kInt64});
}
template <class RealOp, class IntOp>
void Unary(const Call& c, RealOp real, IntOp integer) {
  const int t = c.in[0].dtype;
  const int64_t n = Numel(c.in[0].dims);
  for (int64_t i = 0; i < n; ++i) {
    if (IsInt(t)) {
      StoreInt(t, c.out_data[0], i, integer(LoadInt(t, c.in_data[0], i)));
    } else {
      const double x = LoadReal(t, c.in_data[0], i);
      StoreReal(t, c.out_data[0], i,
                t == kDouble ? real(x) : static_cast<double>(real(static_cast<float>(x))));
    }
  }
}
template <class F>
void UnaryReal(const Call& c, F f) {
  Unary(c, f, [](int64_t v) { return v; });
}
void RunAbs(const Call& c) {
  Unary(c, [](auto x) { return std::fabs(x); }, [](int64_t v) { return v < 0 ? -v : v; });
}
void RunNeg(const Call& c) {
  Unary(c, [](auto x) { return -x; }, [](int64_t v) { return -v; });
}
void RunRelu(const Call& c) {
  Unary(
      c, [](auto x) { return std::isnan(x) || x > 0 ? x : decltype(x)(0); },
      [](int64_t v) { return v > 0 ? v : 0; });
}
void RunFloor(const Call& c) {
  UnaryReal(c, [](auto x) { return std::floor(x); });
}
void RunCeil(const Call& c) {
  UnaryReal(c, [](auto x) { return std::ceil(x); });
}
void RunRound(const Call& c) {
  UnaryReal(c, [](auto x) { return std::nearbyint(x); });
}  // half to even
void RunReciprocal(const Call& c) {
  UnaryReal(c, [](auto x) { return 1 / x; });
}
void RunSqrt(const Call& c) {
  UnaryReal(c, [](auto x) { return std::sqrt(x); });
}
void RunErf(const Call& c) {
  UnaryReal(c, [](auto x) { return std::erf(x); });
}
void RunSin(const Call& c) {
  UnaryReal(c, [](auto x) { return std::sin(x); });
}
void RunCos(const Call& c) {
  UnaryReal(c, [](auto x) { return std::cos(x); });
}

// Exp / Log: y = base^(scale * x + shift), y = log_base(scale * x + shift); base -1 is e.
Failure CheckExpLog(const Call& c) {
  Failure f;
  const AttrValue* base = NeedAttr(c, "base", AttrValue::kFloat, false, &f);
  NeedAttr(c, "scale", AttrValue::kFloat, false, &f);
  NeedAttr(c, "shift", AttrValue::kFloat, false, &f);
  if (!f.ok()) return f;
  if (base && !(base->f == -1.0f || base->f > 0)) {
    return Bad(kAttrNotMatch, "attribute 'base' must be -1 (e) or > 0, got " + std::to_string(base->f));
  }
  return CheckUnaryReal(c);
}
float AttrFloat(const Call& c, const char* name, float dflt) {
  const AttrValue* a = FindAttr(c, name);
  return a ? a->f : dflt;
}
void RunExp(const Call& c) {
  const float base = AttrFloat(c, "base", -1), scale = AttrFloat(c, "scale", 1),
              shift = AttrFloat(c, "shift", 0);
  const float ln = base == -1.0f ? 1.0f : std::log(base);
  UnaryReal(c, [=](auto x) { return std::exp((scale * x + shift) * ln); });
}
void RunLog(const Call& c) {
  const float base = AttrFloat(c, "base", -1), scale = AttrFloat(c, "scale", 1),
              shift = AttrFloat(c, "shift", 0);
  const float ln = base == -1.0f ? 1.0f : std::log(base);
  UnaryReal(c, [=](auto x) { return std::log(scale * x + shift) / ln; });
}

// ---- conversions and layout --------------------------------------------------------------------

Failure CheckCast(const Call& c) {
  Failure f;
  const AttrValue* dst = NeedAttr(c, "dst_type", AttrValue::kInt, true, &f);
  if (!f.ok()) return f;
  if (!OneOf(c.in[0].dtype, kNumericTypes) && c.in[0].dtype != kBool) {
    return Bad(kUnsupportedType, "x must be numeric or bool, got " + TypeText(c.in[0].dtype));
  }
  if (dst->i != c.out[0].dtype) {
    return Bad(kAttrNotMatch, "attribute 'dst_type' " + std::to_string(dst->i) +
                                  " is not the output's type " + TypeText(c.out[0].dtype));
  }
  return NeedOutput(c, c.in[0].dims, c.out[0].dtype);
}
void RunCast(const Call& c) {
  const int from = c.in[0].dtype, to = c.out[0].dtype;
  const int64_t n = Numel(c.in[0].dims);
  for (int64_t i = 0; i < n; ++i) {
    if (IsInt(from) && IsInt(to)) {
      StoreInt(to, c.out_data[0], i, LoadInt(from, c.in_data[0], i));
    } else if (IsInt(from)) {
      StoreReal(to, c.out_data[0], i, static_cast<double>(LoadInt(from, c.in_data[0], i)));
    } else if (IsInt(to)) {  // toward zero; bool: non-zero
      const double v = LoadReal(from, c.in_data[0], i);
      StoreInt(to, c.out_data[0], i, to == kBool ? v != 0 : static_cast<int64_t>(std::trunc(v)));
    } else {
      StoreReal(to, c.out_data[0], i, LoadReal(from, c.in_data[0], i));
    }
  }
}

Failure CheckBroadcastTo(const Call& c) {
  Failure f;
  const AttrValue* shape = NeedAttr(c, "shape", AttrValue::kListInt, true, &f);
  if (!f.ok()) return f;
  if (shape->list != c.out[0].dims) {
    return Bad(kAttrNotMatch, "attribute 'shape' " + DimsText(shape->list) + " is not the output's " +
                                  DimsText(c.out[0].dims));
  }
  if (!BroadcastsTo(c.in[0].dims, shape->list)) {
    return Bad(kInputNotMatch,
               "x " + DimsText(c.in[0].dims) + " does not broadcast to " + DimsText(shape->list));
  }
  return NeedOutput(c, shape->list, c.in[0].dtype);
}
void Gather(const Call& c, const std::vector<int64_t>& src) {  // out[i] = in[src[i]]
  const size_t b = TypeBytes(c.in[0].dtype);
  for (size_t i = 0; i < src.size(); ++i) {
    std::memcpy(c.out_data[0] + i * b, c.in_data[0] + static_cast<size_t>(src[i]) * b, b);
  }
}
void RunBroadcastTo(const Call& c) { Gather(c, SourceIndex(c.in[0].dims, c.out[0].dims)); }

Failure CheckTranspose(const Call& c) {
  Failure f;
  const AttrValue* perm = NeedAttr(c, "perm", AttrValue::kListInt, true, &f);
  if (!f.ok()) return f;
  const Dims& x = c.in[0].dims;
  std::vector<int64_t> sorted = perm->list;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int64_t> iota(x.size());
  std::iota(iota.begin(), iota.end(), 0);
  if (sorted != iota) {
    return Bad(kAttrNotMatch, "attribute 'perm' " + DimsText(perm->list) + " is not a permutation of rank " +
                                  std::to_string(x.size()));
  }
  Dims y;
  for (int64_t p : perm->list) y.push_back(x[static_cast<size_t>(p)]);
  return NeedOutput(c, y, c.in[0].dtype);
}
void RunTranspose(const Call& c) {
  const Dims& x = c.in[0].dims;
  const std::vector<int64_t>& perm = FindAttr(c, "perm")->list;
  const size_t r = x.size();
  std::vector<int64_t> xstride(r, 1);
  for (size_t i = r; i-- > 1;) xstride[i - 1] = xstride[i] * x[i];
  const Dims& y = c.out[0].dims;
  std::vector<int64_t> src(static_cast<size_t>(Numel(y))), pos(r, 0);
  for (size_t o = 0; o < src.size(); ++o) {
    int64_t s = 0;
    for (size_t d = 0; d < r; ++d) s += pos[d] * xstride[static_cast<size_t>(perm[d])];
    src[o] = s;
    for (size_t d = r; d-- > 0;) {
      if (++pos[d] < y[d]) break;
      pos[d] = 0;
    }
  }
  Gather(c, src);
}

// Flatten: x to 2-D at attribute axis (default 1; negative counts from the end).
Failure CheckFlatten(const Call& c) {
  Failure f;
  const AttrValue* axis = NeedAttr(c, "axis", AttrValue::kInt, false, &f);
  if (!f.ok()) return f;
  const auto r = static_cast<int64_t>(c.in[0].dims.size());
  int64_t a = axis ? axis->i : 1;
  if (a < -r || a > r) {
    return Bad(kAttrNotMatch, "attribute 'axis' " + std::to_string(a) + " is outside [" + std::to_string(-r) +
                                  ", " + std::to_string(r) + "]");
  }
  if (a < 0) a += r;
  const Dims& x = c.in[0].dims;
  const int64_t outer = Numel(Dims(x.begin(), x.begin() + a));
  return NeedOutput(c, {outer, Numel(x) / std::max<int64_t>(outer, 1)}, c.in[0].dtype);
}
void RunFlatten(const Call& c) {
  std::memcpy(c.out_data[0], c.in_data[0],
              static_cast<size_t>(Numel(c.in[0].dims)) * TypeBytes(c.in[0].dtype));
}

// Fill: dims (a constant int32/int64 vector, the output's shape) and value [1] -> y.
Failure CheckFill(const Call& c) {
  const Desc& dims = c.in[0];
  if (!dims.is_const || !OneOf(dims.dtype, {kInt32, kInt64}) || dims.dims.size() != 1) {
    return Bad(kInputNotMatch, "dims must be a constant 1-D int32/int64 tensor, got " + TypeText(dims.dtype) +
                                   DimsText(dims.dims) + (dims.is_const ? "" : " (not constant)"));
  }
  Dims shape;
  for (int64_t i = 0; i < Numel(dims.dims); ++i)
    shape.push_back(LoadInt(dims.dtype, dims.const_data.data(), i));
  if (Numel(c.in[1].dims) != 1)
    return Bad(kInputNotMatch, "value must hold one element, got " + DimsText(c.in[1].dims));
  return NeedOutput(c, shape, c.in[1].dtype);
}
void RunFill(const Call& c) { Gather(c, std::vector<int64_t>(static_cast<size_t>(Numel(c.out[0].dims)), 0)); }

// ---- the table ---------------------------------------------------------------------------------

const OpDef kOps[] = {
    {"BatchMatMul", 2, 1, CheckBatchMatMul, RunBatchMatMul},
    {"GEMM", 5, 1, CheckGemm, RunGemm},
    {"Add", 2, 1, CheckBinary, RunAdd},
    {"Sub", 2, 1, CheckBinary, RunSub},
    {"Mul", 2, 1, CheckBinary, RunMul},
    {"Div", 2, 1, CheckBinary, RunDiv},
    {"Abs", 1, 1, CheckUnarySigned, RunAbs},
    {"Neg", 1, 1, CheckUnarySigned, RunNeg},
    {"Relu", 1, 1, CheckUnarySigned, RunRelu},
    {"Floor", 1, 1, CheckUnaryReal, RunFloor},
    {"Ceil", 1, 1, CheckUnaryReal, RunCeil},
    {"Round", 1, 1, CheckUnaryReal, RunRound},
    {"Reciprocal", 1, 1, CheckUnaryReal, RunReciprocal},
    {"Sqrt", 1, 1, CheckUnaryReal, RunSqrt},
    {"Erf", 1, 1, CheckUnaryReal, RunErf},
    {"Sin", 1, 1, CheckUnaryReal, RunSin},
    {"Cos", 1, 1, CheckUnaryReal, RunCos},
    {"Exp", 1, 1, CheckExpLog, RunExp},
    {"Log", 1, 1, CheckExpLog, RunLog},
    {"Cast", 1, 1, CheckCast, RunCast},
    {"BroadcastToD", 1, 1, CheckBroadcastTo, RunBroadcastTo},
    {"TransposeD", 1, 1, CheckTranspose, RunTranspose},
    {"Flatten", 1, 1, CheckFlatten, RunFlatten},
    {"Fill", 2, 1, CheckFill, RunFill},
};

}  // namespace

const OpDef* FindOp(const std::string& type) {
  for (const OpDef& op : kOps) {
    if (type == op.type) return &op;
  }
  return nullptr;
}

std::string KnownOps() {
  std::string s;
  for (const OpDef& op : kOps) s += (s.empty() ? "" : ", ") + std::string(op.type);
  return s;
}

}  // namespace fake_cann::aclop
