"""Helpers shared by the op definitions: domain, attribute declarations, type inference."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import TensorProto, TypeProto, helper
from onnx.defs import OpSchema

DOMAIN = "ascend.moe"
OPSET_VERSION = 1

_FP = OpSchema.FormalParameterOption


def attribute(name: str, default: Any, doc: str) -> OpSchema.Attribute:
    """Declare an attribute; ``default=None`` makes it required (INT unless default is a float)."""
    if default is None:
        return OpSchema.Attribute(name, OpSchema.AttrType.INT, doc, required=True)
    return OpSchema.Attribute(name, helper.make_attribute(name, default), doc)


def tensor_input(name: str, type_str: str, doc: str, optional: bool = False):
    """Declare a formal input or output parameter."""
    return OpSchema.FormalParameter(
        name, type_str, doc, param_option=_FP.Optional if optional else _FP.Single
    )


def attribute_defaults(schema: OpSchema) -> dict[str, int | float | None]:
    """Return ``{name: default}`` for every attribute of ``schema`` (None for required ones)."""
    out: dict[str, int | float | None] = {}
    for name, attr in schema.attributes.items():
        if attr.required:
            out[name] = None
            continue
        proto = onnx.AttributeProto()
        proto.ParseFromString(attr._default_value)
        out[name] = helper.get_attribute_value(proto)
    return out


def attribute_names(schema: OpSchema) -> list[str]:
    """Attribute names of ``schema`` in declaration order."""
    return list(schema.attributes.keys())


def resolve_attributes(schema: OpSchema, given: dict[str, Any]) -> dict[str, Any]:
    """Fill defaults into ``given``; reject unknown names and missing required attributes."""
    defaults = attribute_defaults(schema)
    unknown = set(given) - set(defaults)
    if unknown:
        raise ValueError(f"{schema.name}: unknown attribute(s) {sorted(unknown)}")
    out = {}
    for name, default in defaults.items():
        if name in given and given[name] is not None:
            out[name] = given[name]
        elif default is None:
            raise ValueError(f"{schema.name}: attribute '{name}' is required")
        else:
            out[name] = default
    return out


# ---- type-and-shape inference ------------------------------------------------------------------


def input_type(ctx, i: int) -> TypeProto | None:
    """Type of input ``i`` of an inference context, or None when absent / unknown."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    t = ctx.get_input_type(i)
    if t is None or not t.HasField("tensor_type"):
        return None
    return t


def int_attribute(ctx, name: str, default: int) -> int:
    """Integer attribute of an inference context, or ``default``."""
    a = ctx.get_attribute(name)
    return default if a is None else int(helper.get_attribute_value(a))


def make_type(elem_type: int, dims: Sequence[Any] | None) -> TypeProto:
    """Tensor type; each dim is an int, a symbolic name, a copied TensorShapeProto.Dimension or None."""
    t = TypeProto()
    t.tensor_type.elem_type = elem_type
    if dims is None:
        return t
    shape = t.tensor_type.shape
    shape.SetInParent()
    for d in dims:
        nd = shape.dim.add()
        if isinstance(d, onnx.TensorShapeProto.Dimension):
            nd.CopyFrom(d)
        elif isinstance(d, (int, np.integer)):
            nd.dim_value = int(d)
        elif isinstance(d, str):
            nd.dim_param = d
    return t


def input_dims(t: TypeProto | None) -> list | None:
    """The dimensions of a tensor type, or None when the rank is unknown."""
    if t is None or not t.tensor_type.HasField("shape"):
        return None
    return list(t.tensor_type.shape.dim)


def fail_inference(op: str, message: str):
    """Raise a shape-inference error naming the op."""
    raise onnx.shape_inference.InferenceError(f"{op}: {message}")


FLOAT = TensorProto.FLOAT
INT32 = TensorProto.INT32
