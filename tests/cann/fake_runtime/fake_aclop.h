// CANN's single-operator API as the fake serves it (aclopCompileAndExecute and the descriptors,
// buffers and attributes it takes): what fake_aclop.cc (the API, its checks and the launch) and
// fake_aclop_ops.cc (the table of operator types with their host implementations) share.
// ONNX Runtime's CANN EP (enable_cann_graph=0) runs every standard op it places on the NPU this way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace fake_cann::aclop {

// aclError codes of the single-operator API (CANN's acl_base.h).
enum Error : int {
  kInvalidParam = 100000,     // ACL_ERROR_INVALID_PARAM
  kInputNotMatch = 100021,    // ACL_ERROR_OP_INPUT_NOT_MATCH
  kOutputNotMatch = 100022,   // ACL_ERROR_OP_OUTPUT_NOT_MATCH
  kAttrNotMatch = 100023,     // ACL_ERROR_OP_ATTR_NOT_MATCH
  kOpNotFound = 100024,       // ACL_ERROR_OP_NOT_FOUND
  kUnsupportedType = 100026,  // ACL_ERROR_UNSUPPORTED_DATA_TYPE
  kFormatNotMatch = 100027,   // ACL_ERROR_FORMAT_NOT_MATCH
};

// aclDataType values beyond fake_cann::DataType (CANN's acl_base.h).
enum MoreTypes : int { kInt16 = 6, kUint16 = 7, kUint32 = 8, kUint64 = 10, kDouble = 11 };
inline constexpr int kFormatNd = 2;  // ACL_FORMAT_ND

size_t TypeBytes(int dtype);  // 0: not a numeric aclDataType the fake knows

// aclTensorDesc: what aclCreateTensorDesc was given, and the host data of aclSetTensorConst.
struct Desc {
  uint32_t magic;
  int dtype;
  std::vector<int64_t> dims;
  int format;
  bool is_const = false;
  std::vector<char> const_data;
};
inline constexpr uint32_t kDescMagic = 0xde5c0a11;

// aclDataBuffer.
struct Buffer {
  uint32_t magic;
  void* data;
  size_t size;
};
inline constexpr uint32_t kBufferMagic = 0xb0ffe211;

// One attribute of aclopAttr, as the aclopSetAttr* call that set it.
struct AttrValue {
  enum Kind { kBool, kInt, kFloat, kString, kListInt };
  explicit AttrValue(Kind k = kBool) : kind(k) {}
  Kind kind;
  int64_t i = 0;  // bool and int
  float f = 0;
  std::string s;
  std::vector<int64_t> list;
};
struct Attr {
  uint32_t magic;
  std::map<std::string, AttrValue> values;
};
inline constexpr uint32_t kAttrMagic = 0xa7712011;

int64_t Numel(const std::vector<int64_t>& dims);
std::string DimsText(const std::vector<int64_t>& dims);

// One launch as a host implementation sees it: descriptors and attributes (checked by the op's
// `check`), and at run time the fake's readable / writable addresses of every operand.
struct Call {
  std::string type;
  std::vector<Desc> in, out;
  std::map<std::string, AttrValue> attrs;
  std::vector<const char*> in_data;
  std::vector<char*> out_data;
};

// A failed check: the aclError and the message aclGetRecentErrMsg returns.
struct Failure {
  int code = 0;
  std::string message;
  bool ok() const { return code == 0; }
};

// One operator type: how many inputs / outputs it takes, what the operator compiler checks of its
// descriptors and attributes, and the host implementation (writes every output).
struct OpDef {
  const char* type;
  int inputs;
  int outputs;
  Failure (*check)(const Call& call);
  void (*run)(const Call& call);
};

// The table (fake_aclop_ops.cc): null for an operator type the fake has no host implementation of.
const OpDef* FindOp(const std::string& type);
std::string KnownOps();  // comma-separated, for the error message

}  // namespace fake_cann::aclop
