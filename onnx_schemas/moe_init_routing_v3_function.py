"""Pure-ONNX function body of MoeInitRoutingV3 (docs/operators.md), specialised for one node.

The stable sort uses unique keys ``key(p) = e'(p) * P + p`` over the P = N*K flat pair positions,
where ``e'`` is the expert's offset in the active range (range size for inactive experts), sorted by
TopK(largest=0). A sentinel key is appended so that TopK never sees an empty axis (ONNX Runtime <=
1.30 dies on TopK over an empty axis at 0 tokens). Every output row is then a Gather from x with one
zero row appended (index N = a zero row), so no output needs a type-specific fill value.
On expert ids outside [0, expert_num) the body computes without an error message (the library's
kernel and the reference report them).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, numpy_helper

from ._function_body import BodyBuilder, make_function, start_body
from .moe_init_routing_v3 import (
    COUNT,
    CUMSUM,
    DROPLESS,
    GATHER,
    INPUT_NAMES,
    NO_QUANT,
    OUTPUT_NAMES,
    SCHEMA,
    STATIC_QUANT,
    check_presence,
    expert_range,
    validate_attributes,
)

I64_MAX = np.iinfo(np.int64).max


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeInitRoutingV3`` body for one node's attributes and present inputs."""
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    check_presence({n for n, h in has.items() if h}, attrs)
    x, expert_idx, scale, offset = INPUT_NAMES
    out_x, out_idx, out_counts, out_scale = OUTPUT_NAMES
    start, end = expert_range(attrs)
    width = end - start
    g = BodyBuilder()

    def op(op_type: str, *inputs: str, output: str | None = None, **kw: Any) -> str:
        return g.op(op_type, *inputs, outputs=1 if output is None else [output], **kw)

    const = g.const
    zero, one = const(0, np.int64), const(1, np.int64)
    axis0, axis1, minus_one = const([0], np.int64), const([1], np.int64), const([-1], np.int64)

    def filled(shape: str, value: float, dtype: npt.DTypeLike = np.int64) -> str:
        return op("ConstantOfShape", shape, value=numpy_helper.from_array(np.array([value], dtype)))

    def scalar(v1d: str) -> str:
        return op("Squeeze", v1d, axis0)

    # The ranks and dims the body sees (docs/operators.md §5.3): x [N, H >= 1], expert_idx
    # [N, K >= 1], scale [N] (no quantisation) or [end - start or 1, H] (dynamic), [1] (static).
    checks = [g.check("Equal", g.rank(x), 2), g.check("GreaterOrEqual", g.dim(x, 1), 1),
              g.check("Equal", g.rank(expert_idx), 2), g.check("Equal", g.dim(expert_idx, 0), g.dim(x, 0)),
              g.check("GreaterOrEqual", g.dim(expert_idx, 1), 1)]
    quant = attrs["quant_mode"]
    if has[scale] and quant == NO_QUANT:
        checks += [g.check("Equal", g.rank(scale), 1), g.check("Equal", g.dim(scale, 0), g.dim(x, 0))]
    elif has[scale] and quant == STATIC_QUANT:
        checks += [g.check("Equal", g.rank(scale), 1), g.check("Equal", g.dim(scale, 0), 1)]
    elif has[scale]:
        rows = g.dim(scale, 0)
        checks += [g.check("Equal", g.rank(scale), 2), g.check("Equal", g.dim(scale, 1), g.dim(x, 1)),
                   op("Or", g.check("Equal", rows, 1), g.check("Equal", rows, width))]
    if has[offset]:
        checks += [g.check("Equal", g.rank(offset), 1), g.check("Equal", g.dim(offset, 0), 1)]
    expert_idx = g.require(expert_idx, g.all_of(*checks))

    # Sort: unique keys, ascending, sentinel appended (never an empty TopK).
    flat = op("Reshape", op("Cast", expert_idx, to=TensorProto.INT64), minus_one)  # [P]
    p_1d = op("Shape", flat)  # [P] as a 1-D shape
    k_1d = op("Shape", expert_idx, start=1, end=2)
    n_1d = op("Shape", x, start=0, end=1)
    positions = op("Range", zero, scalar(p_1d), one)
    active = op("And", op("GreaterOrEqual", flat, const(start, np.int64)), op("Less", flat, const(end, np.int64)))
    slot = op("Where", active, op("Sub", flat, const(start, np.int64)), const(width, np.int64))  # [P] in [0, width]
    keys = op("Add", op("Mul", slot, p_1d), positions)
    padded = op("Concat", keys, const([I64_MAX], np.int64), axis=0)
    _, order_padded = g.op("TopK", padded, op("Add", p_1d, one), outputs=2, largest=0, sorted=1)
    order = op("Slice", order_padded, const([0], np.int64), p_1d)  # [P] sorted pair positions

    # Per-expert counts: ScatterElements(add) into width + 1 slots, the last one for inactive pairs.
    slots = op("ScatterElements", filled(const([width + 1], np.int64), 0), slot, filled(p_1d, 1),
               axis=0, reduction="add")
    counts = op("Slice", slots, const([0], np.int64), const([width], np.int64))  # [width]
    available = op("ReduceSum", counts, keepdims=1)  # [1]

    zero_row = filled(op("Concat", const([1], np.int64), op("Shape", x, start=1, end=2), axis=0), 0.0, np.float32)
    x_zero = op("Concat", x, op("CastLike", zero_row, x), axis=0)  # [N + 1, H]
    sorted_slot = op("Gather", slot, order, axis=0)  # [P]

    if attrs["drop_pad_mode"] == DROPLESS:
        active_num = attrs["active_num"]
        rows_1d = p_1d if active_num <= 0 else op("Min", p_1d, const([active_num], np.int64))
        rank = op("Slice", positions, const([0], np.int64), rows_1d)  # [R]
        valid = op("Less", rank, available)
        src = op("Where", valid, op("Div", op("Slice", order, const([0], np.int64), rows_1d), k_1d), n_1d)
        row_slot = op("Slice", sorted_slot, const([0], np.int64), rows_1d)
        if attrs["row_idx_type"] == GATHER:
            values = op("Where", op("Less", positions, available), positions, const(-1, np.int64))
            row_idx = op("ScatterElements", filled(p_1d, -1), order, values, axis=0)
        else:
            row_idx = op("Where", op("Less", positions, available), order, const(-1, np.int64))
    else:
        E, C = attrs["expert_num"], attrs["expert_capacity"]
        dest = op("Range", zero, const(E * C, np.int64), one)  # [E*C]
        d_expert = op("Div", dest, const(C, np.int64))
        d_rank = op("Mod", dest, const(C, np.int64))
        seg_start = op("CumSum", counts, zero, exclusive=1)
        valid = op("Less", d_rank, op("Gather", counts, d_expert, axis=0))
        pos = op("Where", valid, op("Add", op("Gather", seg_start, d_expert, axis=0), d_rank), zero)
        # gather from order with one extra entry so that pos = 0 is valid at 0 pairs
        order_z = op("Concat", order, const([0], np.int64), axis=0)
        src = op("Where", valid, op("Div", op("Gather", order_z, pos, axis=0), k_1d), n_1d)
        row_slot = d_expert
        # pair p at sorted position i, expert e, rank j = i - seg_start[e]: row e*C + j if j < C
        s_clamped = op("Min", sorted_slot, const(width - 1, np.int64))
        j = op("Sub", positions, op("Gather", seg_start, s_clamped, axis=0))
        kept = op("And", op("Less", positions, available), op("Less", j, const(C, np.int64)))
        values = op("Where", kept, op("Add", op("Mul", s_clamped, const(C, np.int64)), j), const(-1, np.int64))
        row_idx = op("ScatterElements", filled(p_1d, -1), order, values, axis=0)
    op("Cast", row_idx, to=TensorProto.INT32, output=out_idx)

    rows = op("Gather", x_zero, src, axis=0)  # [R or E*C, H]
    quant = attrs["quant_mode"]
    scale_out = None
    if quant == NO_QUANT:
        expanded = rows
        if has[scale]:
            scale_out = op("Gather", op("Concat", scale, const([0.0], np.float32), axis=0), src, axis=0)
    elif quant == STATIC_QUANT:
        def f16(v: str) -> str:  # round to float16, compute on in float32 (as NumPy's float16 does)
            return op("Cast", op("Cast", v, to=TensorProto.FLOAT16), to=TensorProto.FLOAT)
        h = f16(op("Cast", rows, to=TensorProto.FLOAT))
        v = f16(op("Add", f16(op("Mul", h, f16(scale))), f16(offset)))
        # zero rows stay 0 (not round(offset))
        v = op("Where", op("Unsqueeze", valid, axis1), v, const(0.0, np.float32))
        expanded = _to_int8(op, const, v)
    else:
        r = op("Cast", rows, to=TensorProto.FLOAT)
        if has[scale]:
            last = op("Sub", op("Shape", scale, start=0, end=1), one)
            smooth = op("Gather", scale, op("Min", row_slot, last), axis=0)
            r = op("Mul", r, smooth)
        s = op("Div", op("ReduceMax", op("Abs", r), axis1, keepdims=1), const(127.0, np.float32))  # [R, 1]
        # a row holding NaN gets s = NaN (whether ReduceMax propagates NaN is the runtime's choice)
        has_nan = op("Cast", op("ReduceMax", op("Cast", op("IsNaN", r), to=TensorProto.FLOAT), axis1, keepdims=1),
                     to=TensorProto.BOOL)
        s = op("Where", has_nan, const(np.nan, np.float32), s)
        positive = op("Greater", s, const(0.0, np.float32))
        q = op("Where", positive, op("Div", r, op("Where", positive, s, const(1.0, np.float32))),
               const(0.0, np.float32))
        expanded = _to_int8(op, const, q)
        scale_out = op("Squeeze", s, axis1)
    if attrs["drop_pad_mode"] == DROPLESS:
        op("Identity", expanded, output=out_x)
    else:
        op("Reshape", expanded, const([attrs["expert_num"], attrs["expert_capacity"], -1], np.int64), output=out_x)
    if scale_out is None:
        scale_out = filled(op("Shape", src), 0.0, np.float32)
    op("Identity", scale_out, output=out_scale)

    t = attrs["expert_tokens_num_type"]
    if t == COUNT:
        op("Identity", counts, output=out_counts)
    elif t == CUMSUM:
        op("CumSum", counts, zero, output=out_counts)
    else:  # (expert, count) rows of the non-empty experts, then zero rows up to expert_num
        nz = op("Reshape", op("NonZero", counts), minus_one)
        pairs = op("Concat", op("Unsqueeze", op("Add", nz, const(start, np.int64)), axis1),
                   op("Unsqueeze", op("Gather", counts, nz, axis=0), axis1), axis=1)
        missing = op("Sub", const([attrs["expert_num"]], np.int64), op("Shape", nz))
        op("Pad", pairs, op("Concat", const([0, 0], np.int64), missing, const([0], np.int64), axis=0),
           output=out_counts)
    return make_function(SCHEMA, attrs, has, g, opset)


def _to_int8(op: Callable[..., str], const: Callable[..., str], v: str) -> str:
    """float32 -> int8 with round-half-to-even and saturation to [-128, 127]; NaN -> 0."""
    v = op("Where", op("IsNaN", v), const(0.0, np.float32), v)
    clipped = op("Clip", op("Round", v), const(-128.0, np.float32), const(127.0, np.float32))
    return op("Cast", clipped, to=TensorProto.INT8)
