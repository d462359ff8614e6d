"""SwiGlu's samples and bad cases (tests/op_table.py's row)."""

from __future__ import annotations

import ml_dtypes
import numpy as np


def swiglu_samples() -> list:
    from tests.op_table import Sample

    rng = np.random.default_rng(31)
    x = rng.standard_normal((5, 12)).astype(np.float32) * 4
    big = np.array([[-100.0, 0.0, 30.0, 2.0, 3.0, 5.0]], np.float32)
    return [
        Sample("float32-last-dim", {"x": x}),
        Sample("dim-0", {"x": rng.standard_normal((6, 3, 5)).astype(np.float32)}, {"dim": 0}),
        Sample("dim-middle-negative", {"x": rng.standard_normal((2, 4, 3)).astype(np.float32)}, {"dim": -2}),
        Sample("float16", {"x": rng.standard_normal((7, 300)).astype(np.float16)}, rtol=1e-3, atol=1e-3),
        Sample("bfloat16", {"x": rng.standard_normal((3, 2, 40)).astype(ml_dtypes.bfloat16)}, {"dim": 2},
               rtol=8e-3, atol=8e-3),
        Sample("rank-1", {"x": np.array([1.0, -2.0, 3.0, 4.0], np.float32)}),
        # silu(-100) * 3 is -0, silu(0) * 2 is 0, silu(30) * 5 is 150 (exp(-30) below float32's epsilon)
        Sample("large-arguments", {"x": big}, expect={"y": np.array([[0.0, 0.0, 150.0]], np.float32)}),
        Sample("empty-rows", {"x": np.zeros((0, 8), np.float32)}, expect={"y": np.zeros((0, 4), np.float32)}),
    ]


def swiglu_bad_cases() -> list:
    from tests.op_table import BadCase as B
    from tests.op_table import attribute_kind_cases

    good = {"x": np.ones((3, 4), np.float32)}
    return [
        B("x-type", {"x": np.ones((3, 4), np.float64)}, {}, "input 'x' must be float, float16 or bfloat16, got double",
          body=False),
        B("x-odd", {"x": np.ones((3, 5), np.float32)}, {}, "input 'x' must have an even size along dim -1, got shape [3, 5]"),
        B("x-odd-dim-0", good, {"dim": 0}, "input 'x' must have an even size along dim 0, got shape [3, 4]"),
        B("dim-high", good, {"dim": 2}, "attribute 'dim' must be in [-2, 2) (x has rank 2), got 2"),
        B("dim-low", good, {"dim": -3}, "attribute 'dim' must be in [-2, 2) (x has rank 2), got -3"),
        B("x-scalar", {"x": np.array(1.0, np.float32)}, {}, "input 'x' must have rank >= 1, got shape []"),
        B("dim-kind", good, {"dim": 1.0}, "attribute 'dim' must be INT, got FLOAT 1", torch=False),
        *attribute_kind_cases(good, "dim", "INT", k={})[:1],
        B("unknown-attribute", good, {"axis": 1},
          "attribute 'axis' is not an attribute of SwiGlu (known: dim)", ort=False, torch=False),
    ]
