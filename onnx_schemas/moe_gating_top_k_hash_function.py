"""Pure-ONNX function body of MoeGatingTopKHash (docs/operators.md §1.2), specialised for one node.

The body is built for one combination of (attributes, present optional inputs): attributes are
baked in as constants and absent inputs are never referenced, so every node gets a small,
branch-free graph of standard default-domain ops. :mod:`onnx_schemas.functions` decides how the
bodies are attached to a model.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, numpy_helper

from ._function_body import BodyBuilder, make_function, start_body
from .moe_gating_top_k_hash import (
    NORM_SIGMOID,
    NORM_SOFTMAX,
    OP_TYPE,
    SCHEMA,
    grouping_effective,
    validate_attributes,
)

# float64 selection keys (the NumPy reference's _rank_key): every float32 number maps to itself,
# -inf and NaN to finite doubles below every float32, and experts of dropped groups to -inf, so a
# single TopK (ties -> lower index) gives docs/operators.md §1.2 step 4's order.
_KEY_NEG_INF = -1e300
_KEY_NAN = -1e301


def _check_presence(has: dict[str, bool], attrs: dict[str, Any]) -> None:
    """The presence rules of docs/operators.md §1.3 that are known without tensor shapes."""
    if has["input_ids"] != has["tid2eid"]:
        given, missing = ("input_ids", "tid2eid") if has["input_ids"] else ("tid2eid", "input_ids")
        raise ValueError(f"{OP_TYPE}: input '{given}' needs input '{missing}' (hash routing uses both), "
                         f"got only '{given}'")
    if has["additional_token_mask"] and not has["additional_bias"]:
        raise ValueError(f"{OP_TYPE}: input 'additional_token_mask' needs input 'additional_bias', got the mask alone")
    if has["tid2eid"] and grouping_effective(attrs):
        raise ValueError(
            f"{OP_TYPE}: hash routing (input 'tid2eid') cannot be combined with group-limited "
            f"selection, got group_count={attrs['group_count']}, k_group={attrs['k_group']}"
        )


def _rank_key(g: BodyBuilder, b: str, may_be_neg_inf: bool) -> str:
    """float64 key of float32 scores ``b``: numbers as is, -inf and NaN just below them."""
    key = g.op("Cast", b, to=TensorProto.DOUBLE)
    if may_be_neg_inf:
        key = g.op("Where", g.op("IsInf", b, detect_positive=0), g.const([_KEY_NEG_INF], np.float64), key)
    return g.op("Where", g.op("IsNaN", b), g.const([_KEY_NAN], np.float64), key)


def _normalise(g: BodyBuilder, x2: str, norm_type: int, axis: str) -> str:
    """Scores s of docs/operators.md §1.2 step 1 for float32 rows ``x2``."""
    one = g.const([1.0], np.float32)
    if norm_type == NORM_SOFTMAX:
        m = g.op("ReduceMax", x2, axis, keepdims=1)
        e = g.op("Exp", g.op("Sub", x2, m))
        return g.op("Mul", e, g.op("Reciprocal", g.op("ReduceSum", e, axis, keepdims=1)))
    if norm_type == NORM_SIGMOID:
        # Written out rather than Sigmoid: ORT's Sigmoid is an approximation a few ulp off 1/(1+e^-x).
        return g.op("Reciprocal", g.op("Add", one, g.op("Exp", g.op("Neg", x2))))
    zero = g.const([0.0], np.float32)
    u = g.op("Exp", g.op("Neg", g.op("Abs", x2)))
    # log1p(u) without a Log1p op: log(1+u) * u / ((1+u) - 1) is accurate to a few ulp (Goldberg),
    # while a bare Log(1+u) returns 0 for u < 2^-24, i.e. s = 0 instead of ~sqrt(u) below x ~ -16.6.
    w = g.op("Add", one, u)
    d = g.op("Sub", w, one)
    log1p = g.op("Where", g.op("Equal", d, zero), u, g.op("Mul", g.op("Log", w), g.op("Div", u, d)))
    s = g.op("Sqrt", g.op("Add", g.op("Max", x2, zero), log1p))
    # Below -17, sqrt(log1p(e^x)) = e^(x/2) in float32, normal down to x = -174, where e^x itself
    # has underflowed (below -103): the reference's form.
    tail = g.op("Exp", g.op("Mul", x2, g.const([0.5], np.float32)))
    return g.op("Where", g.op("Less", x2, g.const([-17.0], np.float32)), tail, s)


def _group_mask(g: BodyBuilder, key: str, b: str, biased: bool, attrs: dict[str, Any], shape_re: str,
                e_dim: str, axis: str) -> str:
    """Key with the experts of all but the k_group best groups set to -inf (docs/operators.md §1.2 step 3)."""
    G = attrs["group_count"]
    minus_one = g.const([-1], np.int64)
    g_const = g.const([G], np.int64)
    shape_rgp = g.op("Concat", minus_one, g_const, g.op("Div", e_dim, g_const), axis=0)
    gkey = g.op("Reshape", key, shape_rgp)  # [R, G, P]
    if attrs["group_select_mode"] == 0:
        # max of the keys == key of the max, since the key map is monotone
        gscore = g.op("Squeeze", g.op("ReduceMax", gkey, axis, keepdims=1), axis)
    else:
        _, top2 = g.op("TopK", gkey, g.const([2], np.int64), axis=-1, outputs=2)
        pair = g.op("GatherElements", g.op("Reshape", b, shape_rgp), top2, axis=2)
        # the float32 sum of the two largest scores, then keyed like any score
        # keepdims=1 + Squeeze: ReduceSum(keepdims=0) with an empty dim gives the wrong shape on ORT <= 1.31.1
        pair_sum = g.op("Squeeze", g.op("ReduceSum", pair, axis, keepdims=1), axis)
        gscore = _rank_key(g, pair_sum, may_be_neg_inf=biased)
    _, kept = g.op("TopK", gscore, g.const([attrs["k_group"]], np.int64), axis=-1, outputs=2)
    false = numpy_helper.from_array(np.zeros(1, dtype=bool), "false")
    true = numpy_helper.from_array(np.ones(1, dtype=bool), "true")
    allowed = g.op(
        "ScatterElements",
        g.op("ConstantOfShape", g.op("Shape", gscore), value=false),
        kept,
        g.op("ConstantOfShape", g.op("Shape", kept), value=true),
        axis=1,
    )
    gkey = g.op("Where", g.op("Unsqueeze", allowed, minus_one), gkey, g.const([-np.inf], np.float64))
    return g.op("Reshape", gkey, shape_re)


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeGatingTopKHash`` body for one node's attributes and present inputs.

    The body uses default-domain ops of ``opset`` (18 or newer) and always produces y, expert_idx, out.
    """
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    _check_presence(has, attrs)
    hashing = has["tid2eid"]
    masked = has["additional_token_mask"]
    k = int(attrs["k"])

    g = BodyBuilder()
    minus_one = axis = g.const([-1], np.int64)
    k_const = g.const([k], np.int64)

    # Rows: [..., E] -> [R, E] (dynamic leading dims; R = 0 is fine since E >= 1 fixes the -1).
    xf = g.op("Cast", "x", to=TensorProto.FLOAT)
    # The ranks and dims the body sees that its broadcasts would not refuse (docs/operators.md
    # §1.3): x of rank >= 2, biases [E], k <= k_group * E / group_count.
    e_scalar = g.op("Gather", g.shape("x"), g.const(-1, np.int64), axis=0)
    checks = [g.check("GreaterOrEqual", g.rank("x"), 2),
              g.check("LessOrEqual", g.const(k * int(attrs["group_count"]), np.int64),
                      g.op("Mul", e_scalar, g.const(int(attrs["k_group"]), np.int64)))]
    for name in ("bias", "additional_bias"):
        if has[name]:
            checks += [g.check("Equal", g.rank(name), 1), g.check("Equal", g.dim(name, 0), e_scalar)]
    xf = g.require(xf, g.all_of(*checks))
    lead = g.op("Shape", "x", end=-1)
    e_dim = g.op("Shape", "x", start=-1)
    shape_re = g.op("Concat", minus_one, e_dim, axis=0)
    x2 = g.op("Reshape", xf, shape_re)
    s = _normalise(g, x2, attrs["norm_type"], axis)

    mask_col = None
    if masked:
        mask_col = g.op("Reshape", "additional_token_mask", g.const([-1, 1], np.int64))

    # Selection scores b (bias steers selection only). Hash rows ignore b, so with hashing only the
    # masked rows' additional_bias matters.
    select = not hashing or masked
    idx = None
    if select:
        b = s
        biased = False
        if has["bias"] and not hashing:
            b = g.op("Add", s, g.op("Cast", "bias", to=TensorProto.FLOAT))
            biased = True
        if masked:
            assert mask_col is not None  # made above when masked
            b_add = g.op("Add", s, g.op("Cast", "additional_bias", to=TensorProto.FLOAT))
            b = b_add if hashing else g.op("Where", mask_col, b_add, b)
            biased = True
        # s is never -inf (it is >= 0 or NaN): only a bias can bring -inf in.
        key = _rank_key(g, b, may_be_neg_inf=biased)
        # One padding row keeps every TopK input non-empty at R = 0: TopK over an empty tensor
        # kills the process (SIGFPE) on ONNX Runtime <= 1.30. The row is dropped after selection.
        pad_shape = g.op("Concat", g.const([1], np.int64), e_dim, axis=0)
        key = g.op("Concat", key, g.op("ConstantOfShape", pad_shape,
                                       value=numpy_helper.from_array(np.zeros(1, np.float64))), axis=0)
        if grouping_effective(attrs):
            b = g.op("Concat", b, g.op("ConstantOfShape", pad_shape,
                                       value=numpy_helper.from_array(np.zeros(1, np.float32))), axis=0)
            key = _group_mask(g, key, b, biased, attrs, shape_re, e_dim, axis)
        _, idx = g.op("TopK", key, k_const, axis=-1, largest=1, sorted=1, outputs=2)
        idx = g.op("Slice", idx, g.const([0], np.int64), g.op("Shape", x2, end=1), g.const([0], np.int64))

    if hashing:
        ids = g.op("Cast", g.op("Reshape", "input_ids", minus_one), to=TensorProto.INT64)
        zero64 = g.const([0], np.int64)
        if masked:
            # masked (e.g. image) rows carry no meaningful id: never look them up
            ids = g.op("Where", g.op("Reshape", "additional_token_mask", minus_one), zero64, ids)
        # Gather accepts ids in [-n, 0) (counting from the end); map them to n so they fail instead.
        ids = g.op("Where", g.op("Less", ids, zero64), g.op("Shape", "tid2eid", end=1), ids)
        rows = g.op("Shape", x2, end=1)
        # Reshape to exactly [R, k]: a table of the wrong width or an input_ids of the wrong size fails here.
        hidx = g.op(
            "Reshape",
            g.op("Cast", g.op("Gather", "tid2eid", ids, axis=0), to=TensorProto.INT64),
            g.op("Concat", rows, k_const, axis=0),
            allowzero=1,
        )
        if masked:
            assert mask_col is not None and idx is not None  # masked rows were selected above
            idx = g.op("Where", mask_col, idx, hidx)
        else:
            idx = hidx
        # Negative table entries would wrap around in GatherElements: map them to E so it fails.
        gather_idx = g.op("Where", g.op("Less", idx, zero64), e_dim, idx)
    else:
        gather_idx = idx

    w = g.op("GatherElements", s, gather_idx, axis=1)
    if attrs["norm_type"] != NORM_SOFTMAX or attrs["renorm"] == 1:
        total = g.op("ReduceSum", w, axis, keepdims=1)
        if float(attrs["eps"]) != 0.0:
            total = g.op("Add", total, g.const([attrs["eps"]], np.float32))
        w = g.op("Div", w, total)
    if float(attrs["routed_scaling_factor"]) != 1.0:
        w = g.op("Mul", w, g.const([attrs["routed_scaling_factor"]], np.float32))

    assert idx is not None  # set by the selection or the hash lookup above
    # allowzero: a 0 in these runtime shapes is an empty dim, not "copy the input's dim"
    shape_out = g.op("Concat", lead, k_const, axis=0)
    g.op("Reshape", g.op("CastLike", w, "x"), shape_out, outputs=["y"], allowzero=1)
    g.op("Reshape", g.op("Cast", idx, to=TensorProto.INT32), shape_out, outputs=["expert_idx"], allowzero=1)
    if attrs["out_flag"]:
        g.op("Reshape", s, g.op("Shape", "x"), outputs=["out"], allowzero=1)
    else:
        g.empty_float("out")

    return make_function(SCHEMA, attrs, has, g, opset)
