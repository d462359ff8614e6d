"""Torch op for GroupedMatmul (docs/operators.md §4): ``torch.ops.ascend_moe.grouped_matmul``.

The positional op in the ONNX input order that torch_npu-named front ends (``npu_grouped_matmul``
with ``group_type=0`` and ``split_item`` 2 or 3) call:
``grouped_matmul(x, weight, group_list, bias=None, group_list_type=0, transpose_weight=0) -> y``.
Its implementation is the NumPy reference (onnx_schemas) on any device; its fake kernel validates
like it (group_list's values excepted: they are data) and keeps the row count symbolic. Defined by
:func:`define_torch_ops` (called by ``exporters.define_torch_ops``); the export side is in
grouped_matmul_onnx.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

from ._torch_lib import IMPL_KEY, described, from_numpy, library, op_defined, schema_default, to_numpy

D = spec.DEFAULTS
ATTR_ORDER = ("group_list_type", "transpose_weight")
OP_NAME = "ascend_moe::grouped_matmul"

SCHEMA = (
    "(Tensor x, Tensor weight, Tensor group_list, Tensor? bias=None, "
    + ", ".join(f"int {a}={schema_default(D[a])}" for a in ATTR_ORDER)
    + ") -> Tensor"
)


def _attrs(group_list_type=D["group_list_type"], transpose_weight=D["transpose_weight"]) -> dict:
    return {"group_list_type": int(group_list_type), "transpose_weight": int(transpose_weight)}


def _static(desc):
    """``(shape, type)`` with symbolic dims replaced by None (the validators skip unknown dims)."""
    if desc is None:
        return None
    shape, dtype = desc
    return tuple(d if isinstance(d, int) else None for d in shape), dtype


def grouped_matmul(x, weight, group_list, bias=None, group_list_type=D["group_list_type"],
                   transpose_weight=D["transpose_weight"]):
    """docs/operators.md §4.2 through the NumPy reference, on any device."""
    (y,) = spec.reference(to_numpy(x), to_numpy(weight), to_numpy(group_list), to_numpy(bias),
                          **_attrs(group_list_type, transpose_weight))
    return from_numpy(y, x.device)


def _fake(x, weight, group_list, bias=None, group_list_type=D["group_list_type"],
          transpose_weight=D["transpose_weight"]):
    attrs = _attrs(group_list_type, transpose_weight)
    spec.validate_inputs({n: _static(described(t)) for n, t in zip(spec.INPUT_NAMES, (x, weight, group_list, bias))},
                         attrs)
    n = weight.shape[1] if attrs["transpose_weight"] else weight.shape[2]
    return x.new_empty((x.shape[0], n))


def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.grouped_matmul (idempotent)."""
    if op_defined("ascend_moe", "grouped_matmul"):
        return
    lib = library("ascend_moe")
    torch.library.define(OP_NAME, SCHEMA, lib=lib)
    torch.library.impl(OP_NAME, IMPL_KEY, lib=lib)(grouped_matmul)
    torch.library.register_fake(OP_NAME, lib=lib)(_fake)
