"""Pure-ONNX function body of SwiGlu (docs/operators.md §10): Split in two halves along dim, then
a * Sigmoid(a) * b in float32, cast back to x's type (one rounding, as the kernels do)."""

from __future__ import annotations

from typing import Sequence

import onnx
from onnx import TensorProto

from . import swi_glu
from ._common import resolve_attributes
from ._function_body import BodyBuilder, check_opset, make_function, present_flags


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """The ``ascend.moe::SwiGlu`` body for one node's attributes."""
    schema = swi_glu.SCHEMA
    check_opset(schema, opset)
    attrs = resolve_attributes(schema, dict(attributes))
    has = present_flags(schema, present_inputs)
    (x,) = swi_glu.INPUT_NAMES
    g = BodyBuilder()
    op = g.op
    a, b = op("Split", op("Cast", x, to=TensorProto.FLOAT), outputs=2, axis=int(attrs["dim"]), num_outputs=2)
    y = op("Mul", op("Mul", a, op("Sigmoid", a)), b)
    op("CastLike", y, x, outputs=[swi_glu.OUTPUT_NAMES[0]])
    return make_function(schema, attrs, has, g, opset)
