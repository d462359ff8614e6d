"""Shared pieces of the per-node function-body builders (see onnx_schemas.functions)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper
from onnx.defs import OpSchema

from ._common import DOMAIN, attribute_defaults, check_required_inputs, resolve_attributes

# ReduceMax/ReduceSum take axes as an input from opset 18 on; ScatterElements has "add" since 16.
MIN_OPSET = 18


class BodyBuilder:
    """Accumulates the nodes of a function body; each call returns the new output name."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self._count = 0
        self._consts: dict[tuple, str] = {}  # constants, and shapes read once per tensor

    def _name(self, hint: str) -> str:
        self._count += 1
        return f"{hint}_{self._count}"

    def op(self, op_type: str, *inputs: str, outputs: int | Sequence[str] = 1, **attrs: Any) -> Any:
        """Append a node; returns its output name (or a list for several outputs: hence ``Any``)."""
        names = [self._name(op_type.lower()) for _ in range(outputs)] if isinstance(outputs, int) else list(outputs)
        self.nodes.append(helper.make_node(op_type, list(inputs), names, **attrs))
        return names[0] if len(names) == 1 else names

    def const(self, value: Any, dtype: Any, shape: Sequence[int] | None = None) -> str:
        """A Constant node holding ``value`` as a tensor of numpy ``dtype`` (one node per distinct value)."""
        arr = np.asarray(value, dtype=dtype)
        if shape is not None:
            arr = arr.reshape(shape)
        cache_key = (arr.dtype.str, arr.shape, arr.tobytes())
        if cache_key not in self._consts:
            self._consts[cache_key] = self.op("Constant", value=numpy_helper.from_array(arr, self._name("const")))
        return self._consts[cache_key]

    def shape(self, tensor: str) -> str:
        """``Shape(tensor)``, one node per tensor."""
        key = ("shape", tensor)
        if key not in self._consts:
            self._consts[key] = self.op("Shape", tensor)
        return self._consts[key]

    def dims(self, tensor: str, count: int) -> str:
        """The first ``count`` dims of ``tensor`` as [count] int64, -1 past its rank (so that
        conditions on them are defined for every rank); one set of nodes per tensor and count."""
        key = ("dims", tensor, count)
        if key not in self._consts:
            padded = self.op("Concat", self.shape(tensor), self.const([-1] * count, np.int64), axis=0)
            self._consts[key] = self.op("Slice", padded, self.const([0], np.int64), self.const([count], np.int64))
        return self._consts[key]

    def dim(self, tensor: str, i: int, count: int = 4) -> str:
        """Dim ``i`` of ``tensor`` as a scalar int64, -1 past its rank."""
        return self.op("Gather", self.dims(tensor, max(count, i + 1)), self.const(i, np.int64), axis=0)

    def rank(self, tensor: str) -> str:
        """The rank of ``tensor`` as a scalar int64."""
        return self.op("Size", self.shape(tensor))

    def all_of(self, *conditions: str) -> str:
        """The conjunction of scalar bool conditions."""
        out = conditions[0]
        for c in conditions[1:]:
            out = self.op("And", out, c)
        return out

    def all_equal(self, a: str, b: str) -> str:
        """Whether two non-empty 1-D int64 vectors of one length are equal, as a scalar bool."""
        same = self.op("Cast", self.op("Equal", a, b), to=onnx.TensorProto.INT64)
        return self.op("Equal", self.op("ReduceMin", same, keepdims=0), self.const(1, np.int64))

    def check(self, op_type: str, a: str, b: int | str) -> str:
        """A scalar comparison (``Equal``, ``GreaterOrEqual``, ...) of ``a`` with ``b`` (an int or a name)."""
        return self.op(op_type, a, self.const(b, np.int64) if isinstance(b, int) else b)

    def require(self, tensor: str, condition: str) -> str:
        """``tensor`` itself where the scalar bool ``condition`` holds, else a Reshape that fails
        (standard ONNX has no assertion op): how a body refuses the ranks and dims it can see.
        The result must be what the body goes on with, so that the check is part of the graph.
        The failing shape is every dim plus 1 and a trailing 2: never the tensor's element count."""
        bad = self.op("Cast", self.op("Not", condition), to=onnx.TensorProto.INT64)
        shape = self.op("Add", self.shape(tensor), bad)
        extra = self.op("Slice", self.const([2], np.int64), self.const([0], np.int64),
                        self.op("Unsqueeze", bad, self.const([0], np.int64)))
        return self.op("Reshape", tensor, self.op("Concat", shape, extra, axis=0))

    def empty_float(self, output: str) -> str:
        """An empty [0] float tensor as ``output`` (an optional output that carries nothing)."""
        return self.op("Constant", outputs=[output],
                       value=numpy_helper.from_array(np.zeros(0, np.float32), "empty"))


def check_opset(schema: OpSchema, opset: int) -> None:
    """Reject default-domain opsets the bodies do not support."""
    latest = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= latest:
        raise ValueError(
            f"{schema.name}: function bodies need a default-domain opset in [{MIN_OPSET}, {latest}], got {opset}"
        )


def present_flags(schema: OpSchema, present_inputs: Sequence[bool]) -> dict[str, bool]:
    """``{input name: present}`` for a node, padded with False; required inputs must be present."""
    names = [p.name for p in schema.inputs]
    flags = [bool(p) for p in present_inputs]
    if len(flags) > len(names):
        raise ValueError(f"{schema.name}: present_inputs has {len(flags)} entries, the op has {len(names)} inputs")
    flags += [False] * (len(names) - len(flags))
    check_required_inputs(schema, flags)
    return dict(zip(names, flags))


def start_body(schema: OpSchema, attributes: dict, present_inputs: Sequence[bool], opset: int,
               validate_attributes: Callable[[dict[str, Any]], None]) -> tuple[dict[str, Any], dict[str, bool]]:
    """The checked start of every body builder: the opset supported, the node's attributes resolved
    against the schema's defaults and validated, and ``{input name: present}``."""
    check_opset(schema, opset)
    attrs = resolve_attributes(schema, dict(attributes))
    validate_attributes(attrs)
    return attrs, present_flags(schema, present_inputs)


def make_function(schema: OpSchema, attrs: dict[str, Any], has: dict[str, bool],
                  body: BodyBuilder, opset: int) -> onnx.FunctionProto:
    """The FunctionProto of one specialisation: every formal input and output of ``schema``.

    Attributes are declared as the schema declares them (defaulted ones with their defaults) so
    nodes may carry them or not; the body uses the baked-in values.
    """
    defaults = attribute_defaults(schema)
    present = ",".join(n for n, p in has.items() if p)
    return helper.make_function(
        DOMAIN,
        schema.name,
        [p.name for p in schema.inputs],
        [p.name for p in schema.outputs],
        body.nodes,
        [helper.make_opsetid("", opset)],
        attributes=sorted(n for n, d in defaults.items() if d is None),
        attribute_protos=[helper.make_attribute(n, d) for n, d in sorted(defaults.items()) if d is not None],
        doc_string=(
            f"{schema.name} specialised for {', '.join(f'{n}={attrs[n]}' for n in sorted(attrs))}; "
            f"inputs present: {present}."
        ),
    )
