"""Pure-ONNX function body of GroupedMatmul (docs/operators.md §4.2), specialised for one node.

What runs where the custom-op library is not loaded: each row's group is the number of group ends
at or before it, the row's weight matrix is gathered ([M, K, N]) and applied with a batched
MatMul; rows past the last group become zero. Float weights multiply in float32. Antiquant
weights are dequantized first as (w + antiquant_offset) * antiquant_scale in float32 (int4 words
are unpacked with integer arithmetic: the body cannot see the weight's element type, so it
compares the weight's last dimension with the logical one, 8 per word or 1). W8A8 (a scale, or
output_dtype 6) multiplies in float64, exact for int8 sums, then dequantizes in float64 as the
reference does. Correct for any valid input, but its memory grows with M times one weight
matrix, and neither element types nor group_list values are validated (bad values give the
runtime's own errors or wrong rows).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ._function_body import BodyBuilder, make_function, start_body
from .grouped_matmul import COUNT, INPUT_NAMES, OUTPUT_DTYPES, OUTPUT_NAMES, SCHEMA, validate_attributes

_T = onnx.TensorProto


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::GroupedMatmul`` body for one node's attributes and inputs."""
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    x, weight, group_list, bias, scale, _offset, a_scale, a_offset, per_token_scale = INPUT_NAMES
    (y,) = OUTPUT_NAMES
    g = BodyBuilder()
    op, const = g.op, g.const
    i64 = np.int64
    w8a8 = has[scale] or OUTPUT_DTYPES[attrs["output_dtype"]] == "int32"
    compute = _T.DOUBLE if w8a8 else _T.FLOAT

    # the ranks and dims the body sees (docs/operators.md §4.3): x [M, K], group_list [E] with E =
    # weight.shape[0], weight of rank 3, antiquant_offset of antiquant_scale's shape
    checks = [g.check("Equal", g.rank(x), 2), g.check("Equal", g.rank(weight), 3),
              g.check("Equal", g.rank(group_list), 1),
              g.check("Equal", g.dim(group_list, 0), g.dim(weight, 0))]
    if has[a_scale] and has[a_offset]:
        checks.append(g.all_equal(g.dims(a_offset, 4), g.dims(a_scale, 4)))
    if has[_offset]:  # reserved, always refused (its message names its type, which a body does not know)
        checks.append(g.const(False, np.bool_))
    if has[a_scale] and attrs["transpose_weight"]:  # int4 words along K: K / G even
        k_words, k = g.dim(weight, 2), g.dim(x, 1)
        groups = op("Where", g.check("Equal", g.rank(a_scale), 3), g.dim(a_scale, 1), const(1, i64))
        int4 = op("Less", k_words, k)
        odd = op("Equal", op("Mod", op("Div", k, op("Max", groups, const(1, i64))), const(2, i64)), const(1, i64))
        checks.append(op("Not", op("And", int4, odd)))
    x = g.require(x, g.all_of(*checks))
    ends = op("Cast", group_list, to=_T.INT64)
    if attrs["group_list_type"] == COUNT:
        ends = op("CumSum", ends, const(0, i64))
    rows = op("Range", const(0, i64), op("Squeeze", op("Shape", x, start=0, end=1), const([0], i64)),
              const(1, i64))
    # group of row r = number of ends <= r (keepdims=1: ReduceSum over the E axis, never empty)
    at_or_before = op("LessOrEqual", op("Unsqueeze", ends, const([0], i64)), op("Unsqueeze", rows, const([1], i64)))
    group = op("ReduceSum", op("Cast", at_or_before, to=_T.INT64), const([1], i64), keepdims=1)
    num_groups = op("Shape", weight, start=0, end=1)
    in_some_group = op("Less", group, num_groups)  # [M, 1]
    index = op("Squeeze", op("Min", group, op("Sub", num_groups, const([1], i64))), const([1], i64))
    if has[a_scale]:
        w_all = _dequantized_weight(g, x, weight, a_scale, a_offset if has[a_offset] else None,
                                    attrs["transpose_weight"])
        w_rows = op("Gather", w_all, index, axis=0)
    else:
        w_rows = op("Cast", op("Gather", weight, index, axis=0), to=compute)
        if attrs["transpose_weight"]:
            w_rows = op("Transpose", w_rows, perm=[0, 2, 1])
    x_rows = op("Unsqueeze", op("Cast", x, to=compute), const([1], i64))  # [M, 1, K]
    out = op("Squeeze", op("MatMul", x_rows, w_rows), const([1], i64))  # [M, N]
    if has[bias]:
        out = op("Add", out, op("Cast", op("Gather", bias, index, axis=0), to=compute))
    if has[scale]:
        out = op("Mul", out, op("Cast", op("Gather", scale, index, axis=0), to=compute))
    if has[per_token_scale]:
        out = op("Mul", out, op("Unsqueeze", op("Cast", per_token_scale, to=compute), const([1], i64)))
    zero = const(0.0, np.float64 if w8a8 else np.float32)
    out = op("Where", in_some_group, out, zero)
    if w8a8:
        out_type = getattr(_T, str(OUTPUT_DTYPES[attrs["output_dtype"]]).upper())
        if out_type != _T.INT32:
            out = op("Cast", out, to=_T.FLOAT)  # float64 -> float32 -> y: the reference's two roundings
        op("Cast", out, to=out_type, outputs=[y])
    else:
        op("CastLike", out, x, outputs=[y])
    return make_function(SCHEMA, attrs, has, g, opset)


def _dequantized_weight(g: BodyBuilder, x: str, weight: str, a_scale: str, a_offset: str | None,
                        transpose: int) -> str:
    """(w + antiquant_offset) * antiquant_scale as float32 [E, K, N]; int4 words (8 per int32)
    unpacked where the weight's last dimension is an eighth of the logical one."""
    op, const = g.op, g.const
    i64 = np.int64
    n = op("Shape", a_scale, start=-1)
    logical = op("Shape", x, start=1, end=2) if transpose else n  # K along [E, N, K], N along [E, K, N]
    per_word = op("Div", logical, op("Shape", weight, start=2, end=3))  # 8 (int4 words) or 1
    bits = op("Div", const([32], i64), per_word)
    shifts = op("Range", const(0, i64), const(32, i64), op("Squeeze", bits, const([0], i64)))  # [per_word]
    two = const(2.0, np.float64)
    divisor = op("Cast", op("Pow", two, op("Cast", shifts, to=_T.DOUBLE)), to=_T.INT64)
    modulus = op("Cast", op("Pow", two, op("Cast", bits, to=_T.DOUBLE)), to=_T.INT64)
    word = op("Mod", op("Add", op("Cast", weight, to=_T.INT64), const(2**32, i64)), const(2**32, i64))
    field = op("Mod", op("Div", op("Unsqueeze", word, const([-1], i64)), divisor), modulus)  # [E, a, b, per_word]
    signed = op("Sub", field, op("Mul", modulus, op("Cast", op("GreaterOrEqual", op("Mul", field, const(2, i64)),
                                                                   modulus), to=_T.INT64)))
    dims = op("Concat", op("Shape", weight, start=0, end=2), op("Mul", op("Shape", weight, start=2, end=3), per_word),
              axis=0)
    w = op("Cast", op("Reshape", signed, dims), to=_T.FLOAT)
    if transpose:
        w = op("Transpose", w, perm=[0, 2, 1])  # [E, K, N]
    k = op("Shape", w, start=1, end=2)

    def per_row_of_k(t: str) -> str:  # [E, N] or [E, G, N] -> [E, K, N], each group K / G rows
        grouped = op("Reshape", op("Cast", t, to=_T.FLOAT), op("Concat", op("Shape", t, start=0, end=1),
                                                                 const([-1], i64), n, axis=0))  # [E, G, N]
        step = op("Div", k, op("Shape", grouped, start=1, end=2))
        shape4 = op("Concat", op("Shape", grouped, start=0, end=2), step, n, axis=0)
        expanded = op("Expand", op("Unsqueeze", grouped, const([2], i64)), shape4)
        return op("Reshape", expanded, op("Concat", op("Shape", w, start=0, end=1), k, n, axis=0))

    if a_offset is not None:
        w = op("Add", w, per_row_of_k(a_offset))
    return op("Mul", w, per_row_of_k(a_scale))
