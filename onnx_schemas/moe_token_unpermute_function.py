"""Pure-ONNX function body of MoeTokenUnpermute (docs/operators.md §6), specialised for one node: the
weighted gather of moe_finalize_routing_v2_function (see there for how out-of-range indices fail)
with token-major indices, rows in [P, N*K) reading a zero row and slots of probability 0 adding
nothing (their index is not checked: any value reads the zero row)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
from onnx import TensorProto

from . import moe_token_unpermute as unpermute
from ._function_body import BodyBuilder, make_function, start_body
from .moe_finalize_routing_v2_function import WeightedGatherBody


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """The ``ascend.moe::MoeTokenUnpermute`` body for one node's attributes and present inputs."""
    schema = unpermute.SCHEMA
    attrs, has = start_body(schema, attributes, present_inputs, opset, unpermute.validate_attributes)
    tokens, sorted_indices, probs = unpermute.INPUT_NAMES
    g = BodyBuilder()
    b = WeightedGatherBody(g)
    op = b.op

    # sorted_indices 1-D (docs/operators.md §9.3; a Reshape would take [N, K] as well)
    sorted_indices = g.require(sorted_indices, g.check("Equal", g.rank(sorted_indices), 1))
    rows = b.f32(tokens)  # [P, H]
    p = b.dim(rows, 0)
    if has[probs]:
        n, k = b.dim(probs, 0), b.dim(probs, 1)
    else:
        n, k = b.dim(sorted_indices, 0), g.const([1], np.int64)
    slots = op("Reshape", op("Cast", sorted_indices, to=TensorProto.INT64), op("Concat", n, k, axis=0), allowzero=1)
    limit = op("Squeeze", op("Max", p, op("Mul", n, k)), b.axis0)  # max(P, N*K)
    in_range = b.in_range(slots, b.zero, limit)
    p_row = op("Squeeze", p, b.axis0)
    # dropped rows (>= P) read the zero row at P, and so do the slots of probability 0, whatever
    # their index (they are not read, so not checked)
    slots = op("Where", in_range, op("Min", slots, p_row), p_row)
    valid = in_range
    if has[probs]:
        valid = op("Or", in_range, op("Equal", b.f32(probs), g.const(0, np.float32)))
    terms = op("Gather", b.with_zero_row(rows), b.guard(slots, valid), axis=0)  # [N, K, H]
    acc = b.combine(terms, probs if has[probs] else None, skip_zero_weight=True)
    op("CastLike", acc, tokens, output=unpermute.OUTPUT_NAMES[0])
    return make_function(schema, attrs, has, g, opset)
