"""Pure-ONNX function body of MoeFinalizeRoutingV2 (docs/operators.md §5), specialised for one node
(attributes baked in, absent optional inputs skipped); its pieces serve MoeTokenUnpermute's body
(moe_token_unpermute_function.py, §6) too.

Both are a weighted gather: the slot rows [N, K] of row indices are gathered from the rows (as
float32) into [N, K, H], the bias rows added, the weights multiplied in, and the slots summed
(ReduceSum keepdims=1 + Squeeze: keepdims=0 over an empty axis gives the wrong shape on
ONNX Runtime <= 1.31.1); the result is cast back once. A zero row is appended to the rows for
slots without a row (index -1; an index >= P for MoeTokenUnpermute).

Out-of-range indices: ONNX Gather accepts negative indices and would wrap them silently, so every
index outside the op's valid range (docs/operators.md §5.3, §6.3) is replaced by ``OUT_OF_RANGE``
(2**62) before the Gather, which then fails: ONNX Runtime reports "indices element out of data
bounds, idx=4611686018427387904 must be within the inclusive range [...]" (onnx.reference raises
IndexError). The body does not produce the validation's message. A wrong expanded_row_idx length
fails in a Reshape. Sums may differ from the C++ kernel in the last float32 bit (summation order).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
import onnx.numpy_helper
from onnx import TensorProto

from . import moe_finalize_routing_v2 as finalize
from ._function_body import BodyBuilder, make_function, start_body

OUT_OF_RANGE = 2**62  # an index no Gather accepts


class WeightedGatherBody:
    """The shared body pieces; ``g`` is the BodyBuilder."""

    def __init__(self, g: BodyBuilder) -> None:
        self.g = g
        self.zero = g.const(0, np.int64)
        self.axis0, self.axis1, self.last = g.const([0], np.int64), g.const([1], np.int64), g.const([-1], np.int64)

    def op(self, op_type: str, *inputs: str, output: str | None = None, **kw: Any) -> str:
        return self.g.op(op_type, *inputs, outputs=1 if output is None else [output], **kw)

    def dim(self, tensor: str, i: int) -> str:
        """Dimension ``i`` of ``tensor`` as a [1] int64."""
        if i == -1:
            return self.op("Shape", tensor, start=-1)
        return self.op("Shape", tensor, start=i, end=i + 1)

    def f32(self, tensor: str) -> str:
        return self.op("Cast", tensor, to=TensorProto.FLOAT)

    def with_zero_row(self, rows2d: str) -> str:
        """[R + 1, H] float32: the rows and a zero row at R."""
        shape = self.op("Concat", self.g.const([1], np.int64), self.dim(rows2d, 1), axis=0)
        zero_row = self.op("ConstantOfShape", shape, value=onnx.numpy_helper.from_array(np.zeros(1, np.float32)))
        return self.op("Concat", rows2d, zero_row, axis=0)

    def guard(self, idx: str, valid: str) -> str:
        """``idx`` where ``valid``, else OUT_OF_RANGE (so that the Gather fails)."""
        return self.op("Where", valid, idx, self.g.const(OUT_OF_RANGE, np.int64))

    def in_range(self, idx: str, low: str, high: str) -> str:
        return self.op("And", self.op("GreaterOrEqual", idx, low), self.op("Less", idx, high))

    def combine(self, terms: str, weights: str | None, skip_zero_weight: bool) -> str:
        """[N, H] float32: sum over axis 1 of terms [N, K, H] times weights [N, K]."""
        if weights is not None:
            w = self.op("Unsqueeze", self.f32(weights), self.last)  # [N, K, 1]
            terms = self.op("Mul", terms, w)
            if skip_zero_weight:
                zero_w = self.op("Equal", w, self.g.const(0, np.float32))
                terms = self.op("Where", zero_w, self.g.const(0, np.float32), terms)
        return self.op("Squeeze", self.op("ReduceSum", terms, self.axis1, keepdims=1), self.axis1)


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """The ``ascend.moe::MoeFinalizeRoutingV2`` body for one node's attributes and present inputs."""
    schema = finalize.SCHEMA
    attrs, has = start_body(schema, attributes, present_inputs, opset, finalize.validate_attributes)
    finalize.check_presence({n for n, h in has.items() if h})
    mode = attrs["drop_pad_mode"]
    x, row_idx, x1, x2, bias, scales, experts = finalize.INPUT_NAMES
    g = BodyBuilder()
    b = WeightedGatherBody(g)
    op = b.op

    # The ranks and dims the body sees (docs/operators.md §8.3) that its Reshapes and broadcasts
    # would not refuse: expanded_row_idx 1-D, expert_idx [N, K], bias [E, H] with E the rows of
    # expanded_x in the drop-pad modes.
    checks = [g.check("Equal", g.rank(row_idx), 1)]
    if has[experts]:
        n_dim = g.dim(scales, 0) if has[scales] else g.dim(row_idx, 0)
        k_dim = g.dim(scales, 1) if has[scales] else g.const(1, np.int64)
        checks += [g.check("Equal", g.rank(experts), 2), g.check("Equal", g.dim(experts, 0), n_dim),
                   g.check("Equal", g.dim(experts, 1), k_dim)]
    if has[bias] and finalize.drop_pad(mode):
        checks.append(g.check("Equal", g.dim(bias, 0), g.dim(x, 0)))
    row_idx = g.require(row_idx, g.all_of(*checks))

    # [R, H]; allowzero=1 on every Reshape: a 0 in a computed shape (0 tokens) is a size, not "copy"
    if finalize.drop_pad(mode):
        rows_shape = op("Concat", op("Mul", b.dim(x, 0), b.dim(x, 1)), b.dim(x, 2), axis=0)
        rows = op("Reshape", b.f32(x), rows_shape, allowzero=1)
    else:
        rows = b.f32(x)
    r = b.dim(rows, 0)
    if has[scales]:
        n, k = b.dim(scales, 0), b.dim(scales, 1)
    else:
        n, k = b.dim(row_idx, 0), g.const([1], np.int64)
    idx = op("Cast", row_idx, to=TensorProto.INT64)
    if finalize.token_major(mode):
        slots = op("Reshape", idx, op("Concat", n, k, axis=0), allowzero=1)
    else:
        slots = op("Transpose", op("Reshape", idx, op("Concat", k, n, axis=0), allowzero=1), perm=[1, 0])
    # -1 (no row: dropped, or an expert outside init routing's range) reads the zero row at R
    table = b.with_zero_row(rows)
    valid = b.in_range(slots, g.const(-1, np.int64), r)
    slots = op("Where", op("Equal", slots, g.const(-1, np.int64)), op("Squeeze", r, b.axis0), slots)
    terms = op("Gather", table, b.guard(slots, valid), axis=0)  # [N, K, H]
    if has[bias]:
        e = op("Cast", experts, to=TensorProto.INT64)
        e_valid = b.in_range(e, b.zero, op("Squeeze", b.dim(bias, 0), b.axis0))
        terms = op("Add", terms, op("Gather", b.f32(bias), b.guard(e, e_valid), axis=0))
    acc = b.combine(terms, scales if has[scales] else None, skip_zero_weight=False)
    for skip in (x1, x2):
        if has[skip]:
            acc = op("Add", acc, b.f32(skip))
    op("CastLike", acc, x, output=finalize.OUTPUT_NAMES[0])
    return make_function(schema, attrs, has, g, opset)
