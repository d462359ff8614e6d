"""torch_npu's dtype attributes (``torch_npu.hifloat8``, ``torch_npu.float4_e2m1fn_x2``, ...).

torch_npu exports every entry of its ``_C._cd.DType`` as a module attribute: an int, the ACL data
type plus 256, which torch_npu functions take in their ``*_dtype`` arguments for element types
torch has no dtype for (hifloat8, float4 pairs) or that the NPU names itself (float8 e8m0 scales).
Model code reads them at import; the values are torch_npu's, so code comparing them agrees.
"""

from __future__ import annotations

# torch_npu's offset of these ints from ACL's aclDataType values (csrc/custom_dtype/Init.h)
ACL_OFFSET = 256

# name -> aclDataType (CANN's acl_base.h), in torch_npu's DType order
ACL_DATA_TYPES = {
    "float32": 0, "float16": 1, "int8": 2, "int32": 3, "uint8": 4, "int16": 6, "uint16": 7, "uint32": 8,
    "int64": 9, "uint64": 10, "float64": 11, "bool": 12, "string": 13, "complex64": 16, "complex128": 17,
    "bfloat16": 27, "int4": 29, "uint1": 30, "complex32": 33, "hifloat8": 34, "float8_e5m2": 35,
    "float8_e4m3fn": 36, "float8_e8m0fnu": 37, "float6_e3m2": 38, "float6_e2m3": 39, "float4_e2m1fn_x2": 40,
    "float4_e1m2fn_x2": 41,
}

DTYPES = {name: ACL_OFFSET + acl for name, acl in ACL_DATA_TYPES.items()}

NAMES = {value: name for name, value in DTYPES.items()}


def name_of(value: object) -> str | None:
    """The torch_npu dtype name of ``value`` (one of these ints), else None."""
    return NAMES.get(value) if isinstance(value, int) and not isinstance(value, bool) else None
