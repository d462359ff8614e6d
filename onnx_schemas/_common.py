"""Helpers shared by the op definitions: domain, attribute declarations, type inference."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, NoReturn

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, TypeProto, helper
from onnx.defs import OpSchema
from onnx.reference.op_run import OpRun
from onnx.shape_inference import InferenceContext

DOMAIN = "ascend.moe"
OPSET_VERSION = 1

# A dimension as the validators see it: an int, None (or a dim_param name) when ONNX inference does
# not know it, or a torch SymInt while tracing (this package does not import torch).
Dim = Any

_FP = OpSchema.FormalParameterOption

# The limits of the ops that sort (token, slot) pairs by expert (generated into attr_defaults.gen.h):
# the pair positions they return are int32, and ids are sorted through int64 keys id * P + p.
MAX_PAIRS = 2**31 - 1
MAX_EXPERT_ID = 2**31 - 1
EXPERT_SORT_LIMITS = {"MAX_PAIRS": MAX_PAIRS, "MAX_EXPERT_ID": MAX_EXPERT_ID}


def op_schema(op_type: str, **fields: Any) -> OpSchema:
    """The schema of ``op_type`` in this package's domain and opset version; ``fields`` are
    OpSchema's keywords (doc, inputs, outputs, type_constraints, attributes)."""
    return OpSchema(op_type, DOMAIN, OPSET_VERSION, **fields)


def attribute(name: str, default: Any, doc: str) -> OpSchema.Attribute:
    """Declare an attribute; ``default=None`` makes it required (INT unless default is a float)."""
    if default is None:
        return OpSchema.Attribute(name, OpSchema.AttrType.INT, doc, required=True)
    return OpSchema.Attribute(name, helper.make_attribute(name, default), doc)


def tensor_input(name: str, type_str: str, doc: str, optional: bool = False) -> OpSchema.FormalParameter:
    """Declare a formal input or output parameter."""
    return OpSchema.FormalParameter(
        name, type_str, doc, param_option=_FP.Optional if optional else _FP.Single
    )


def input_names(schema: OpSchema) -> tuple[str, ...]:
    """The schema's input names, in order."""
    return tuple(p.name for p in schema.inputs)


def output_names(schema: OpSchema) -> tuple[str, ...]:
    """The schema's output names, in order."""
    return tuple(p.name for p in schema.outputs)


def reference_op(op_type: str, reference: Callable[..., tuple]) -> type[OpRun]:
    """An ``onnx.reference`` op class (``ReferenceEvaluator(model, new_ops=[...])``) that runs
    ``reference(*inputs, **attributes)``: inputs in schema order (absent ones None or left off),
    every node attribute passed on, so the reference rejects unknown names and kinds itself."""

    def _run(self: OpRun, *inputs: Any, **attributes: Any) -> tuple:
        return reference(*inputs, **run_attributes(self, attributes))

    # onnx.reference matches classes by name (the op type) and domain
    return type(op_type, (OpRun,), {"op_domain": DOMAIN, "_run": _run,
                                     "__doc__": f"onnx.reference implementation of {DOMAIN}::{op_type}."})


def attribute_defaults(schema: OpSchema) -> dict[str, int | float | None]:
    """Return ``{name: default}`` for every attribute of ``schema`` (None for required ones)."""
    out: dict[str, int | float | None] = {}
    for name, attr in schema.attributes.items():
        out[name] = None if attr.required else helper.get_attribute_value(attr.default_value)
    return out


def attribute_names(schema: OpSchema) -> list[str]:
    """Attribute names of ``schema`` in declaration order."""
    return list(schema.attributes.keys())


def fmt(value: Any) -> str:
    """A value as the C++ library prints it in messages (floats as %g, 6 significant digits)."""
    if isinstance(value, (float, np.floating)):
        return format(float(value), "g")
    return str(value)


def _kind_and_value(value: Any) -> tuple[int | None, str]:
    """The ONNX attribute kind of ``value`` (an ``AttributeProto``'s own, or the one
    ``helper.make_node`` would store a Python value as) and its text for messages: ``INT 2``,
    ``FLOAT 2.5``, ``STRING '1'``, ``INTS [1, 2]``, ``INTS []``, ``TENSOR``, ``GRAPH``, ..."""
    if isinstance(value, onnx.AttributeProto):
        kind = value.type
        value = helper.get_attribute_value(value) if kind != onnx.AttributeProto.UNDEFINED else None
    else:
        try:
            kind = helper.make_attribute("a", value).type
        except (TypeError, ValueError):
            return None, f"a value of Python type {type(value).__name__}"
    name = onnx.AttributeProto.AttributeType.Name(kind)
    A = onnx.AttributeProto
    if kind in (A.INT, A.FLOAT):
        return kind, f"{name} {fmt(value)}"
    if kind == A.STRING:
        text = value.decode() if isinstance(value, bytes) else str(value)
        return kind, f"{name} '{text}'"
    if kind in (A.INTS, A.FLOATS):
        return kind, f"{name} [{', '.join(fmt(v) for v in value)}]"
    return kind, name


_KIND_NAMES = {OpSchema.AttrType.INT: "INT", OpSchema.AttrType.FLOAT: "FLOAT"}
_ATTR_PROTO_KIND = {OpSchema.AttrType.INT: onnx.AttributeProto.INT,
                    OpSchema.AttrType.FLOAT: onnx.AttributeProto.FLOAT}


def resolve_attributes(schema: OpSchema, given: dict[str, Any]) -> dict[str, Any]:
    """Check ``given`` (Python values or a node's ``AttributeProto``s) against the schema and fill
    in defaults: unknown names, values of another kind (as a node would store them: ``'1'`` is
    a STRING, ``[1]`` INTS, ``1.0`` a FLOAT) and
    missing required attributes raise ValueError with the C++ library's messages."""
    unknown = sorted(set(given) - set(schema.attributes))
    if unknown:
        raise ValueError(f"{schema.name}: attribute '{unknown[0]}' is not an attribute of "
                         f"{schema.name} (known: {', '.join(sorted(schema.attributes))})")
    out = {}
    for name, attr in schema.attributes.items():
        want = _KIND_NAMES[attr.type]
        value = given.get(name)
        if value is None:
            if attr.required:
                raise ValueError(f"{schema.name}: attribute '{name}' is required ({want}), got none")
            out[name] = helper.get_attribute_value(attr.default_value)
            continue
        kind, text = _kind_and_value(value)
        if kind != _ATTR_PROTO_KIND[attr.type]:
            raise ValueError(f"{schema.name}: attribute '{name}' must be {want}, got {text}")
        if isinstance(value, onnx.AttributeProto):
            value = helper.get_attribute_value(value)
        out[name] = int(value) if want == "INT" else float(value)
    return out


def check_required_inputs(schema: OpSchema, present: Sequence[bool]) -> None:
    """A node's required inputs are all there (an empty name is an absent input): ValueError with
    the kernels' message for the first one missing."""
    flags = list(present) + [False] * (len(schema.inputs) - len(present))
    for param, flag in zip(schema.inputs, flags):
        if param.option == OpSchema.FormalParameterOption.Single and not flag:
            raise ValueError(f"{schema.name}: input '{param.name}' is required, got none")


def run_attributes(op_run: OpRun, attributes: dict[str, Any]) -> dict[str, Any]:
    """The attributes of an ``onnx.reference`` op's node for :func:`resolve_attributes`: the
    node's own ``AttributeProto``s (their kinds, which the evaluator's Python values lose for
    TENSOR, GRAPH, empty lists, ...), the evaluator's values for attributes that refer to an
    enclosing function's."""
    protos = {a.name: a for a in op_run.onnx_node.attribute if not a.ref_attr_name}
    return {**{n: v for n, v in attributes.items() if n not in protos and n != "attributes"}, **protos}


def allowed_types(schema: OpSchema, type_param: str) -> tuple[str, ...]:
    """ONNX names of the element types a type parameter allows: ('float', 'float16', ...)."""
    for c in schema.type_constraints:
        if c.type_param_str == type_param:
            return tuple(t[len("tensor("):-1] for t in c.allowed_type_strs)
    raise KeyError(f"{schema.name} has no type parameter {type_param!r}")


def type_list(types: Sequence[str]) -> str:
    """'float, float16 or bfloat16', as the C++ library writes allowed types."""
    return types[0] if len(types) == 1 else f"{', '.join(types[:-1])} or {types[-1]}"



def check_types(schema: OpSchema, inputs: dict[str, tuple | None]) -> None:
    """Element types in input order, as the C++ library checks them at session creation: each in
    its type constraint, and like the first earlier input sharing its type parameter."""
    first: dict[str, tuple[str, str]] = {}
    for p in schema.inputs:
        desc = inputs.get(p.name)
        if desc is None:
            continue
        dtype = desc[1]
        if p.type_str in first and first[p.type_str][1] != dtype:
            name, want = first[p.type_str]
            raise ValueError(f"{schema.name}: input '{p.name}' must have the type of {name} ({want}), got {dtype}")
        allowed = allowed_types(schema, p.type_str)
        if dtype not in allowed:
            raise ValueError(f"{schema.name}: input '{p.name}' must be {type_list(allowed)}, got {dtype}")
        first.setdefault(p.type_str, (p.name, dtype))

def onnx_type_name(dtype: npt.DTypeLike) -> str:
    """ONNX element type name ('float', 'double', 'bfloat16', ...) of a NumPy dtype, as the C++
    library names types; the NumPy name when ONNX has no such type."""
    np_dtype = np.dtype(dtype)
    try:
        elem = helper.np_dtype_to_tensor_dtype(np_dtype)
    except (KeyError, TypeError, ValueError):
        return np_dtype.name
    return onnx.TensorProto.DataType.Name(elem).lower()


# ---- type-and-shape inference ------------------------------------------------------------------


def input_type(ctx: InferenceContext, i: int) -> TypeProto | None:
    """Type of input ``i`` of an inference context, or None when absent / unknown."""
    if i >= ctx.get_num_inputs() or not ctx.has_input(i):
        return None
    t = ctx.get_input_type(i)
    if t is None or not t.HasField("tensor_type"):
        return None
    return t


def int_attribute(ctx: InferenceContext, op: str, name: str, default: int) -> int:
    """INT attribute of an inference context, or ``default``; another kind fails inference."""
    a = ctx.get_attribute(name)
    if a is None:
        return default
    if a.type != onnx.AttributeProto.INT:
        _, text = _kind_and_value(helper.get_attribute_value(a))
        fail_inference(op, f"attribute '{name}' must be INT, got {text}")
    return int(a.i)


def inferred_int_attributes(ctx: InferenceContext, op: str, defaults: dict[str, Any],
                            validate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """The INT attributes ``defaults`` names, read from an inference context and checked by the
    op's ``validate`` (its ValueError becomes an inference error with the same message)."""
    attrs = {n: int_attribute(ctx, op, n, d) for n, d in defaults.items()}
    try:
        validate(attrs)
    except ValueError as e:
        fail_inference(op, str(e).split(": ", 1)[1])
    return attrs


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


def token_rows(op_type: str, name: str, desc: tuple, types: Sequence[str], layout: str = "[N, H]") -> tuple:
    """``(rows, H)`` of a 2-D input of token rows given as ``(shape, onnx type name)``: its type one
    of ``types``, rank 2 and H >= 1 (unknown dims not checked), else ValueError in the words of
    the kernels (``layout`` names the dims)."""
    shape, type_name = desc
    if type_name not in types:
        raise ValueError(f"{op_type}: input '{name}' must be {type_list(types)}, got {type_name}")
    if len(shape) != 2:
        raise ValueError(f"{op_type}: input '{name}' must be 2-D {layout}, got shape {shape_text(shape)}")
    if known(shape[1]) and shape[1] < 1:
        raise ValueError(f"{op_type}: input '{name}' must have H >= 1, got shape {shape_text(shape)}")
    return shape[0], shape[1]


def check_rank(op_type: str, name: str, dims: list | None, *layouts: str) -> None:
    """Fail shape inference unless ``dims`` (None: rank unknown, not checked) has the rank of one
    of ``layouts`` (``"[M, K]"`` is rank 2), in the words of the op's own checks:
    ``input 'x' must be 2-D [M, K], got rank 3``."""
    if dims is None:
        return
    ranks = [layout.count(",") + 1 for layout in layouts]
    if len(dims) not in ranks:
        want = " or ".join(f"{r}-D {layout}" for r, layout in zip(ranks, layouts))
        fail_inference(op_type, f"input '{name}' must be {want}, got rank {len(dims)}")


def known(*dims: Dim) -> bool:
    """Whether every dimension is a concrete number (torch fake tensors may pass None or symbols)."""
    return all(isinstance(d, (int, np.integer)) for d in dims)


def shape_text(shape: Sequence[Dim]) -> str:
    """A shape for a message: ``[4, ?, 7]`` (None for a dimension not known)."""
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def fail_inference(op: str, message: str) -> NoReturn:
    """Raise a shape-inference error naming the op."""
    raise onnx.shape_inference.InferenceError(f"{op}: {message}")


FLOAT = TensorProto.FLOAT
INT32 = TensorProto.INT32


def walk_graphs(graph: onnx.GraphProto) -> Iterator[onnx.GraphProto]:
    """``graph`` and every subgraph nested in its nodes' attributes (If, Loop, Scan, ...)."""
    yield graph
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from walk_graphs(a.g)
            elif a.type == onnx.AttributeProto.GRAPHS:
                for sub in a.graphs:
                    yield from walk_graphs(sub)
