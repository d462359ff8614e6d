"""Pure-ONNX function body of MoeTokenPermute (docs/operators.md), specialised for one node.

Stable sort through unique int64 keys ``id * P + p`` (P = number of pairs, ids < 2**31) and
TopK(largest=0) with one sentinel key appended, so that TopK never runs over an empty axis (ONNX
Runtime <= 1.30 dies on it at 0 tokens). The rows are one Gather (bit for bit for every token type).
Ranks and dims of tokens and indices that break §6.3 make a Reshape fail (``BodyBuilder.require``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ._function_body import BodyBuilder, make_function, start_body
from .moe_token_permute import INPUT_NAMES, OUTPUT_NAMES, SCHEMA, validate_attributes

I64_MAX = np.iinfo(np.int64).max


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeTokenPermute`` body for one node's attributes."""
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    tokens, indices = INPUT_NAMES
    out_tokens, out_sorted = OUTPUT_NAMES
    g = BodyBuilder()

    def op(op_type: str, *inputs: str, output: str | None = None, **kw: Any) -> str:
        return g.op(op_type, *inputs, outputs=1 if output is None else [output], **kw)

    const = g.const
    zero, one = const(0, np.int64), const(1, np.int64)
    # tokens [N, H >= 1], indices [N] or [N, K >= 1] (docs/operators.md §6.3): the shapes a body sees
    t_dims, i_dims = g.dims(tokens, 3), g.dims(indices, 3)
    at = [const(i, np.int64) for i in range(3)]

    def dim(dims: str, i: int) -> str:
        return op("Gather", dims, at[i], axis=0)

    i_rank = g.rank(indices)
    shapes_ok = g.all_of(
        op("Equal", g.rank(tokens), const(2, np.int64)), op("GreaterOrEqual", dim(t_dims, 1), const(1, np.int64)),
        op("Equal", dim(i_dims, 0), dim(t_dims, 0)),
        op("Or", op("Equal", i_rank, const(1, np.int64)),
           op("And", op("Equal", i_rank, const(2, np.int64)),
              op("GreaterOrEqual", dim(i_dims, 1), const(1, np.int64)))))
    indices = g.require(indices, shapes_ok)
    flat = op("Reshape", op("Cast", indices, to=TensorProto.INT64), const([-1], np.int64))  # [P]
    p_1d = op("Shape", flat)
    n_1d = op("Shape", tokens, start=0, end=1)
    # K = P / N, taken as 1 at N = 0 (no pairs then; ONNX Runtime rejects an integer divisor 0)
    k_1d = op("Max", op("Div", p_1d, op("Max", n_1d, const([1], np.int64))), const([1], np.int64))
    positions = op("Range", zero, op("Squeeze", p_1d, const([0], np.int64)), one)
    keys = op("Add", op("Mul", flat, p_1d), positions)
    padded = op("Concat", keys, const([I64_MAX], np.int64), axis=0)
    _, order_padded = g.op("TopK", padded, op("Add", p_1d, one), outputs=2, largest=0, sorted=1)
    order = op("Slice", order_padded, const([0], np.int64), p_1d)
    n = attrs["num_out_tokens"]
    if n > 0:
        rows_1d = op("Min", p_1d, const([n], np.int64))
    elif n == 0:
        rows_1d = p_1d
    else:
        rows_1d = op("Max", op("Add", p_1d, const([n], np.int64)), const([0], np.int64))
    src = op("Div", op("Slice", order, const([0], np.int64), rows_1d), k_1d)
    op("Gather", tokens, src, axis=0, output=out_tokens)
    inverse = op("ScatterElements", op("ConstantOfShape", p_1d, value=numpy_helper.from_array(np.array([0], np.int64))),
                 order, positions, axis=0)
    op("Cast", inverse, to=TensorProto.INT32, output=out_sorted)
    return make_function(SCHEMA, attrs, has, g, opset)
