"""Shared GroupedMatmul test cases: random inputs, valid samples and the bad-case table."""

from __future__ import annotations

import ml_dtypes
import numpy as np

NP_DTYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def make_inputs(rng, counts, K: int, N: int, dtype: str = "float", rows: int | None = None,
                transpose_weight: int = 0, bias: str | None = None, group_list_type: int = 1,
                index=np.int64) -> dict:
    """Inputs keyed by ONNX input name: ``counts`` rows per group (E = len(counts)), ``rows`` >= their
    sum (extra rows belong to no group), ``bias`` None, "x" (x's type) or "float"."""
    np_dtype = NP_DTYPES[dtype]
    counts = np.asarray(counts, np.int64)
    E, M = len(counts), int(counts.sum()) if rows is None else rows
    shape = (E, N, K) if transpose_weight else (E, K, N)
    out = {"x": rng.standard_normal((M, K)).astype(np.float32).astype(np_dtype),
           "weight": (rng.standard_normal(shape) / np.sqrt(max(K, 1))).astype(np.float32).astype(np_dtype),
           "group_list": (counts if group_list_type == 1 else np.cumsum(counts)).astype(index)}
    if bias is not None:
        out["bias"] = rng.standard_normal((E, N)).astype(np.float32).astype(np_dtype if bias == "x" else np.float32)
    return out


def samples():
    """Valid calls (tests.op_table.Sample): every type, both group_list forms and weight layouts,
    empty groups, rows past the last group (zero), no rows at all."""
    from tests.op_table import Sample

    rng = np.random.default_rng(21)
    tail = make_inputs(rng, [2, 0, 3, 1], 20, 13, rows=8, bias="float")
    bf16 = make_inputs(rng, [3, 3, 0, 2], 24, 40, "bfloat16", rows=9, bias="float", index=np.int32)
    return [
        Sample("counts-float-bias-rows-past-groups", tail, dict(group_list_type=1),
               expect={"y": _with_zero_rows(tail, dict(group_list_type=1), 6)}),
        Sample("cumsum-float16-transposed", make_inputs(rng, [0, 4, 1], 33, 17, "float16", transpose_weight=1,
                                                        bias="x", group_list_type=0), dict(transpose_weight=1)),
        Sample("counts-bfloat16-int32-float-bias", bf16, dict(group_list_type=1)),
        Sample("no-rows", make_inputs(rng, [0, 0], 8, 5, bias="x", group_list_type=0), {},
               expect={"y": np.zeros((0, 5), np.float32)}),
    ]


def _with_zero_rows(inputs: dict, attrs: dict, covered: int) -> np.ndarray:
    """The reference's y, checked to be zero from row ``covered`` on (the contract's rows past the
    last group)."""
    from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

    (y,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
    assert not y[covered:].any() and y.shape[0] > covered
    return y


def bad_cases():
    """Every validation rule of docs/operators.md §4.3 broken once."""
    from tests.op_table import BadCase as B

    rng = np.random.default_rng(22)
    good = make_inputs(rng, [2, 0, 3], 6, 5, rows=6, bias="float")  # counts, M = 6, K = 6, N = 5, E = 3
    count = dict(group_list_type=1)

    def with_(**changes):
        return {**good, **changes}

    x, w = good["x"], good["weight"]
    return [
        B("group-list-type", good, dict(group_list_type=2),
          "attribute 'group_list_type' must be 0 (cumulative ends) or 1 (rows per group), got 2"),
        B("transpose-weight", good, dict(group_list_type=1, transpose_weight=-1),
          "attribute 'transpose_weight' must be 0 (weight [E, K, N]) or 1 (weight [E, N, K]), got -1"),
        B("attribute-kind", good, dict(group_list_type=1.0),
          "attribute 'group_list_type' must be INT, got FLOAT 1", torch=False),
        B("unknown-attribute", good, dict(group_type=0),
          "attribute 'group_type' is not an attribute of GroupedMatmul (known: group_list_type, "
          "transpose_weight)", ort=False, torch=False),
        B("count-negative", with_(group_list=np.array([2, -1, 3])), count,
          "input 'group_list' (rows per group) must be non-negative, got -1 at [1]"),
        B("count-total", with_(group_list=np.array([2, 4, 1])), count,
          "input 'group_list' (rows per group) must sum to at most M = 6 (x.shape[0]), got 7 at [2]"),
        B("count-overflow", with_(group_list=np.array([1, 2**63 - 1, 0])), count,
          "input 'group_list' (rows per group) must sum to at most M = 6 (x.shape[0]), "
          f"got {2**63} at [1]"),
        B("cumsum-decreasing", with_(group_list=np.array([3, 2, 6])), {},
          "input 'group_list' (cumulative ends) must be non-decreasing from 0, got 2 at [1] after 3"),
        B("cumsum-negative", with_(group_list=np.array([-1, 2, 6], np.int32)), {},
          "input 'group_list' (cumulative ends) must be non-decreasing from 0, got -1 at [0] after 0"),
        B("cumsum-past-rows", with_(group_list=np.array([2, 5, 7])), {},
          "input 'group_list' (cumulative ends) must be at most M = 6 (x.shape[0]), got 7 at [2]"),
        B("group-list-length", with_(group_list=np.array([2, 4])), {},
          "input 'group_list' must be 1-D [E] with E = 3 (weight.shape[0]), got shape [2]"),
        B("group-list-rank", with_(group_list=np.array([[2, 4, 6]])), {},
          "input 'group_list' must be 1-D [E] with E = 3 (weight.shape[0]), got shape [1, 3]"),
        B("group-list-dtype", with_(group_list=np.array([2.0, 4.0, 6.0], np.float32)), {},
          "input 'group_list' must be int64 or int32, got float"),
        B("x-type", with_(x=x.astype(np.float64)), {},
          "input 'x' must be float, float16 or bfloat16, got double"),
        B("weight-type", with_(weight=w.astype(np.float16)), {},
          "input 'weight' must have the type of x (float), got float16"),
        B("bias-type", with_(x=x.astype(np.float16), weight=w.astype(np.float16),
                             bias=good["bias"].astype(ml_dtypes.bfloat16)), {},
          "input 'bias' must have the type of x (float16) or be float, got bfloat16"),
        B("x-rank", with_(x=x[None]), {}, "input 'x' must be 2-D [M, K], got shape [1, 6, 6]"),
        B("k-mismatch", with_(weight=w[:, :5]), {},
          "input 'weight' must be 3-D [E, K, N] with E >= 1 and K = 6 (x.shape[1]), got shape [3, 5, 5]"),
        B("k-mismatch-transposed", good, dict(transpose_weight=1),
          "input 'weight' must be 3-D [E, N, K] with E >= 1 and K = 6 (x.shape[1]), got shape [3, 6, 5]"),
        B("weight-rank", with_(weight=w[0]), {},
          "input 'weight' must be 3-D [E, K, N] with E >= 1 and K = 6 (x.shape[1]), got shape [6, 5]"),
        B("no-groups", with_(weight=w[:0], group_list=good["group_list"][:0], bias=good["bias"][:0]), {},
          "input 'weight' must be 3-D [E, K, N] with E >= 1 and K = 6 (x.shape[1]), got shape [0, 6, 5]"),
        B("bias-shape", with_(bias=good["bias"][:, :4]), {},
          "input 'bias' must be [E, N] = [3, 5] (from weight), got shape [3, 4]"),
    ]
