"""Torch op for GroupedMatmul (docs/operators.md §4): ``torch.ops.ascend_moe.grouped_matmul``.

The positional op in the ONNX input order that torch_npu-named front ends (``npu_grouped_matmul``
with ``group_type=0`` and ``split_item`` 2 or 3) call:
``grouped_matmul(x, weight, group_list, bias=None, scale=None, offset=None, antiquant_scale=None,
antiquant_offset=None, per_token_scale=None, group_list_type=0, transpose_weight=0,
output_dtype=0) -> y``. Its implementation is the NumPy reference (onnx_schemas) on any device;
its fake kernel validates like it (group_list's values excepted: they are data), keeps the row
count symbolic and gives y's dtype (x's, or output_dtype's for int8 x). Defined by
:func:`define_torch_ops` (called by ``exporters.define_torch_ops``); the export side is in
grouped_matmul_onnx.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

from . import registry
from ._torch_lib import define_op, from_numpy, schema_default, static_inputs, to_numpy

D = spec.DEFAULTS
ATTR_ORDER = ("group_list_type", "transpose_weight", "output_dtype")
TENSOR_INPUTS = spec.INPUT_NAMES[3:]  # the optional ones
OP_NAME = "ascend_moe::grouped_matmul"

SCHEMA = (
    "(Tensor x, Tensor weight, Tensor group_list, "
    + ", ".join(f"Tensor? {n}=None" for n in TENSOR_INPUTS) + ", "
    + ", ".join(f"int {a}={schema_default(D[a])}" for a in ATTR_ORDER)
    + ") -> Tensor"
)
# torch dtypes of y's ONNX element types
TORCH_DTYPES = {"float": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16, "int32": torch.int32}


def _attrs(group_list_type=D["group_list_type"], transpose_weight=D["transpose_weight"],
           output_dtype=D["output_dtype"]) -> dict:
    return {"group_list_type": int(group_list_type), "transpose_weight": int(transpose_weight),
            "output_dtype": int(output_dtype)}


def grouped_matmul(x, weight, group_list, bias=None, scale=None, offset=None, antiquant_scale=None,
                   antiquant_offset=None, per_token_scale=None, group_list_type=D["group_list_type"],
                   transpose_weight=D["transpose_weight"], output_dtype=D["output_dtype"]):
    """docs/operators.md §4.2 through the NumPy reference, on any device."""
    tensors = (x, weight, group_list, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale)
    (y,) = spec.reference(*[to_numpy(t) for t in tensors], **_attrs(group_list_type, transpose_weight, output_dtype))
    return from_numpy(y, x.device)


def _fake(x, weight, group_list, bias=None, scale=None, offset=None, antiquant_scale=None, antiquant_offset=None,
          per_token_scale=None, group_list_type=D["group_list_type"], transpose_weight=D["transpose_weight"],
          output_dtype=D["output_dtype"]):
    attrs = _attrs(group_list_type, transpose_weight, output_dtype)
    tensors = (x, weight, group_list, bias, scale, offset, antiquant_scale, antiquant_offset, per_token_scale)
    *_, y_type = spec.validate_inputs(static_inputs(spec.INPUT_NAMES, tensors), attrs)
    n = weight.shape[1] if attrs["transpose_weight"] else weight.shape[2]
    if weight.dtype == torch.int32 and not attrs["transpose_weight"]:
        n = n * spec.INT4_PER_WORD
    return x.new_empty((x.shape[0], n), dtype=TORCH_DTYPES[y_type])


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.grouped_matmul (idempotent)."""
    define_op(OP_NAME, SCHEMA, grouped_matmul, _fake)
