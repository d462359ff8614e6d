"""Pure-ONNX function body of MoeInitRouting (docs/operators.md), specialised for one node.

The stable sort is TopK(largest=0) over unique keys ``expert * P + p`` with a sentinel appended (no
TopK over an empty axis at 0 tokens, which kills ONNX Runtime <= 1.30). Invalid row_idx / expert
ids are not reported by the body (the library's kernel and the reference report them).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ._function_body import BodyBuilder, make_function, start_body
from .moe_init_routing import INPUT_NAMES, OUTPUT_NAMES, SCHEMA, validate_attributes

I64_MAX = np.iinfo(np.int64).max


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeInitRouting`` body for one node's attributes."""
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    x, row_idx, expert_idx = INPUT_NAMES
    out_x, out_row_idx, out_experts = OUTPUT_NAMES
    g = BodyBuilder()

    def op(op_type: str, *inputs: str, output: str | None = None, **kw: Any) -> str:
        return g.op(op_type, *inputs, outputs=1 if output is None else [output], **kw)

    const = g.const
    zero, one, start = const(0, np.int64), const(1, np.int64), const([0], np.int64)
    # The ranks and dims the body sees (docs/operators.md §10.3): x [N, H >= 1], expert_idx
    # [N, K >= 1], row_idx of its shape
    checks = [g.check("Equal", g.rank(x), 2), g.check("GreaterOrEqual", g.dim(x, 1), 1),
              g.check("Equal", g.rank(expert_idx), 2), g.check("Equal", g.dim(expert_idx, 0), g.dim(x, 0)),
              g.check("GreaterOrEqual", g.dim(expert_idx, 1), 1),
              g.all_equal(g.dims(row_idx, 3), g.dims(expert_idx, 3))]
    expert_idx = g.require(expert_idx, g.all_of(*checks))
    flat = op("Reshape", op("Cast", expert_idx, to=TensorProto.INT64), const([-1], np.int64))
    rows_flat = op("Reshape", op("Cast", row_idx, to=TensorProto.INT64), const([-1], np.int64))
    p_1d = op("Shape", flat)
    n_1d = op("Shape", x, start=0, end=1)
    k_1d = op("Shape", expert_idx, start=1, end=2)
    positions = op("Range", zero, op("Squeeze", p_1d, start), one)
    keys = op("Add", op("Mul", flat, p_1d), positions)
    padded = op("Concat", keys, const([I64_MAX], np.int64), axis=0)
    _, order_padded = g.op("TopK", padded, op("Add", p_1d, one), outputs=2, largest=0, sorted=1)
    order = op("Slice", order_padded, start, p_1d)
    dst_to_src = op("Gather", rows_flat, order, axis=0)
    zeros = op("ConstantOfShape", p_1d, value=numpy_helper.from_array(np.array([0], np.int64)))
    op("Cast", op("ScatterElements", zeros, dst_to_src, positions, axis=0), to=TensorProto.INT32,
       output=out_row_idx)
    op("Cast", op("Gather", flat, order, axis=0), to=TensorProto.INT32, output=out_experts)
    rows = op("Mul", op("Min", n_1d, const([attrs["active_num"]], np.int64)), k_1d)
    src = op("Mod", op("Slice", dst_to_src, start, rows), op("Max", n_1d, const([1], np.int64)))
    op("Gather", x, src, axis=0, output=out_x)
    return make_function(SCHEMA, attrs, has, g, opset)
