"""Pure-ONNX function body of GroupedMatmul (docs/operators.md §4.2), specialised for one node.

What runs where the custom-op library is not loaded: each row's group is the number of group ends
at or before it, the row's weight matrix is gathered ([M, K, N]) and applied with a batched
MatMul in float32; rows past the last group become zero. Correct for any valid input, but its
memory grows with M times one weight matrix, and group_list values are not validated (bad values
give the runtime's own errors or wrong rows).
"""

from __future__ import annotations

from typing import Sequence

import numpy as np
import onnx

from ._common import resolve_attributes
from ._function_body import BodyBuilder, check_opset, make_function, present_flags
from .grouped_matmul import COUNT, INPUT_NAMES, OUTPUT_NAMES, SCHEMA, validate_attributes


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::GroupedMatmul`` body for one node's attributes and inputs."""
    check_opset(SCHEMA, opset)
    attrs = resolve_attributes(SCHEMA, dict(attributes))
    validate_attributes(attrs)
    has = present_flags(SCHEMA, present_inputs)
    x, weight, group_list, bias = INPUT_NAMES
    (y,) = OUTPUT_NAMES
    g = BodyBuilder()
    op, const = g.op, g.const
    i64 = np.int64

    ends = op("Cast", group_list, to=onnx.TensorProto.INT64)
    if attrs["group_list_type"] == COUNT:
        ends = op("CumSum", ends, const(0, i64))
    rows = op("Range", const(0, i64), op("Squeeze", op("Shape", x, start=0, end=1), const([0], i64)),
              const(1, i64))
    # group of row r = number of ends <= r (keepdims=1: ReduceSum over the E axis, never empty)
    at_or_before = op("LessOrEqual", op("Unsqueeze", ends, const([0], i64)), op("Unsqueeze", rows, const([1], i64)))
    group = op("ReduceSum", op("Cast", at_or_before, to=onnx.TensorProto.INT64), const([1], i64), keepdims=1)
    num_groups = op("Shape", weight, start=0, end=1)
    in_some_group = op("Less", group, num_groups)  # [M, 1]
    index = op("Squeeze", op("Min", group, op("Sub", num_groups, const([1], i64))), const([1], i64))
    w_rows = op("Cast", op("Gather", weight, index, axis=0), to=onnx.TensorProto.FLOAT)
    if attrs["transpose_weight"]:
        w_rows = op("Transpose", w_rows, perm=[0, 2, 1])
    x_rows = op("Unsqueeze", op("Cast", x, to=onnx.TensorProto.FLOAT), const([1], i64))  # [M, 1, K]
    out = op("Squeeze", op("MatMul", x_rows, w_rows), const([1], i64))  # [M, N]
    if has[bias]:
        out = op("Add", out, op("Cast", op("Gather", bias, index, axis=0), to=onnx.TensorProto.FLOAT))
    out = op("Where", in_some_group, out, const(0.0, np.float32))
    op("CastLike", out, x, outputs=[y])
    return make_function(SCHEMA, attrs, has, g, opset)
