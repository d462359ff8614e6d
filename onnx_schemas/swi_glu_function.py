"""Pure-ONNX function body of SwiGlu (docs/operators.md §11): Split in two halves along dim, then
a / (1 + Exp(-a)) * b in float32, cast back to x's type (one rounding, as the kernels do)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
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
    # an even size along dim (docs/operators.md §11.3): Split would give halves 1 and 0 for 1
    size = op("Gather", op("Shape", x), g.const(int(attrs["dim"]), np.int64), axis=0)
    x = g.require(x, op("Equal", op("Mod", size, g.const(2, np.int64)), g.const(0, np.int64)))
    a, b = op("Split", op("Cast", x, to=TensorProto.FLOAT), outputs=2, axis=int(attrs["dim"]), num_outputs=2)
    # a / (1 + exp(-a)) as the kernels compute it (ONNX Runtime's Sigmoid is an approximation
    # several hundred ulps off for large negative a)
    one = g.const(1, np.float32)
    y = op("Mul", op("Div", a, op("Add", one, op("Exp", op("Neg", a)))), b)
    op("CastLike", y, x, outputs=[swi_glu.OUTPUT_NAMES[0]])
    return make_function(schema, attrs, has, g, opset)
