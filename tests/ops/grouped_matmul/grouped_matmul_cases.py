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


def make_quant_inputs(rng, counts, K: int, N: int, weight: str = "int8", dtype: str = "bfloat16",
                      rows: int | None = None, transpose_weight: int = 0, groups: int = 1, offset: bool = True,
                      bias: str | None = None, group_list_type: int = 1) -> dict:
    """Antiquant inputs (``weight`` "int8" or "int4": int32 words) or, with ``dtype`` "int8", W8A8
    inputs (scale float [E, N], per_token_scale [M], ``bias`` "int32" or None)."""
    from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

    counts = np.asarray(counts, np.int64)
    E, M = len(counts), int(counts.sum()) if rows is None else rows
    gl = (counts if group_list_type == 1 else np.cumsum(counts)).astype(np.int64)
    if dtype == "int8":
        w = rng.integers(-128, 128, (E, N, K) if transpose_weight else (E, K, N)).astype(np.int8)
        out = {"x": rng.integers(-128, 128, (M, K)).astype(np.int8), "weight": w, "group_list": gl,
               "scale": (rng.random((E, N)) * 1e-3 + 1e-4).astype(np.float32),
               "per_token_scale": (rng.random(M) * 1e-2 + 1e-3).astype(np.float32)}
        if bias is not None:
            out["bias"] = rng.integers(-5000, 5000, (E, N)).astype(np.int32)
        return out
    np_dtype = NP_DTYPES[dtype]
    lo, hi = (-8, 8) if weight == "int4" else (-128, 128)
    values = rng.integers(lo, hi, (E, N, K) if transpose_weight else (E, K, N)).astype(np.int8)
    w = spec.pack_int4(values) if weight == "int4" else values
    shape = (E, N) if groups == 1 else (E, groups, N)
    out = {"x": rng.standard_normal((M, K)).astype(np.float32).astype(np_dtype), "weight": w, "group_list": gl,
           "antiquant_scale": (rng.random(shape) * 0.02 / np.sqrt(K) + 1e-3).astype(np.float32).astype(np_dtype)}
    if offset:
        out["antiquant_offset"] = rng.standard_normal(shape).astype(np.float32).astype(np_dtype)
    if bias is not None:
        out["bias"] = rng.standard_normal((E, N)).astype(np.float32).astype(np_dtype if bias == "x" else np.float32)
    return out


def every_input() -> tuple[dict, dict]:
    """Inputs with every input present (no valid call has all: the wrong-type test's base) and
    attributes."""
    rng = np.random.default_rng(20)
    out = make_quant_inputs(rng, [2, 1], 16, 8, "int8", "bfloat16", bias="float")
    out.update(scale=np.ones((2, 8), np.float32), offset=np.zeros((2, 8), np.float32),
               per_token_scale=np.ones(3, np.float32))
    return out, dict(group_list_type=1)


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
        Sample("w8a16-bfloat16-per-channel-offset-bias", make_quant_inputs(
            rng, [2, 0, 3], 40, 24, "int8", "bfloat16", rows=6, bias="float"), dict(group_list_type=1)),
        Sample("w8a16-float16-transposed-per-group", make_quant_inputs(
            rng, [1, 3], 48, 20, "int8", "float16", transpose_weight=1, groups=3, offset=False),
            dict(group_list_type=1, transpose_weight=1)),
        Sample("w8a16-float-cumsum", make_quant_inputs(rng, [3, 1], 33, 17, "int8", "float", group_list_type=0,
                                                       rows=5)),
        Sample("w4a16-bfloat16-per-group", make_quant_inputs(rng, [2, 0, 2], 64, 32, "int4", "bfloat16", groups=4),
               dict(group_list_type=1)),
        Sample("w4a16-float16-transposed-per-channel", make_quant_inputs(
            rng, [3, 2], 32, 12, "int4", "float16", transpose_weight=1, bias="x"),
            dict(group_list_type=1, transpose_weight=1)),
        Sample("w4a16-float-per-group-transposed", make_quant_inputs(
            rng, [1, 1], 64, 9, "int4", "float", transpose_weight=1, groups=2, offset=False),
            dict(group_list_type=1, transpose_weight=1)),
        Sample("w8a8-bfloat16-per-token", make_quant_inputs(rng, [2, 0, 3], 70, 24, dtype="int8", rows=7,
                                                            bias="int32"),
               dict(group_list_type=1, output_dtype=16)),
        Sample("w8a8-float16-transposed", make_quant_inputs(rng, [1, 2], 40, 9, dtype="int8", transpose_weight=1),
               dict(group_list_type=1, transpose_weight=1, output_dtype=10)),
        Sample("w8a8-int32-sums", _int32_sums(rng), dict(group_list_type=1, output_dtype=6)),
        *_non_finite_x_samples(rng),
    ]


def _non_finite_x_samples(rng) -> list:
    """Antiquant with inf / NaN in x: y is x @ ((w + offset) * scale) as IEEE arithmetic gives it
    (±inf where every product is finite or of one sign, NaN where inf meets a zero weight or
    -inf), never a NaN that the formula does not have (0 * inf of a reformulated sum)."""
    from tests.op_table import Sample

    simple = {"x": np.ones((4, 8), np.float32), "weight": np.full((1, 8, 8), 2, np.int8),
              "group_list": np.array([4], np.int64), "antiquant_scale": np.full((1, 8), 0.5, np.float32),
              "antiquant_offset": np.zeros((1, 8), np.float32)}
    simple["x"][1, 3] = np.inf
    y = np.full((4, 8), 8.0, np.float32)
    y[1] = np.inf

    def special(inputs: dict, rows: int) -> dict:
        x = inputs["x"].astype(np.float32)
        x[1, 2], x[min(3, rows - 1), 0], x[0, -1] = np.inf, -np.inf, np.nan
        return {**inputs, "x": x.astype(inputs["x"].dtype)}

    return [
        Sample("w8a16-inf-zero-offset", simple, expect={"y": y}),
        Sample("w8a16-float-inf-nan-offset-cumsum", special(make_quant_inputs(
            rng, [3, 2], 24, 16, "int8", "float", group_list_type=0), 5)),
        Sample("w8a16-bfloat16-inf-nan-transposed-per-group", special(make_quant_inputs(
            rng, [2, 3], 32, 12, "int8", "bfloat16", transpose_weight=1, groups=4), 5),
            dict(group_list_type=1, transpose_weight=1)),
        Sample("w4a16-float-inf-nan-no-offset", special(make_quant_inputs(
            rng, [4, 1], 32, 16, "int4", "float", groups=2, offset=False), 5), dict(group_list_type=1)),
        Sample("w4a16-float16-inf-nan-offset", special(make_quant_inputs(
            rng, [1, 4], 16, 24, "int4", "float16"), 5), dict(group_list_type=1)),
    ]


def _int32_sums(rng) -> dict:
    """W8A8 with int32 y: x and w at -128 everywhere, K = 1100 (sums of 18 million, past float32's
    exact integers), and a bias: the sums must be exact."""
    inputs = make_quant_inputs(rng, [2, 1], 1100, 16, dtype="int8", bias="int32")
    inputs["x"][:] = -128
    inputs["weight"][:] = -128
    del inputs["scale"], inputs["per_token_scale"]
    return inputs


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
          "output_dtype, transpose_weight)", ort=False, torch=False),
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
          "input 'x' must be float, float16, bfloat16 or int8, got double"),
        B("weight-type", with_(weight=w.astype(np.float16)), {},
          "input 'weight' must have the type of x (float), int8 or int32 (int4 in int32 words), got float16"),
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
        B("output-dtype-value", good, dict(group_list_type=1, output_dtype=3),
          "attribute 'output_dtype' must be 0 (x's type), 1 (float), 10 (float16), 16 (bfloat16) or 6 (int32), "
          "got 3"),
        B("output-dtype-float-x", good, dict(group_list_type=1, output_dtype=10),
          "attribute 'output_dtype' must be 0 or 1 (x's type) for float x, got 10"),
        *_quant_bad_cases(),
    ]


def _quant_bad_cases():
    """The quantized forms' rules, each broken once."""
    from tests.op_table import BadCase as B

    rng = np.random.default_rng(23)
    aq = make_quant_inputs(rng, [2, 0, 3], 16, 8, "int8", "bfloat16", rows=6)  # K 16, N 8, E 3
    a4 = make_quant_inputs(rng, [2, 0, 3], 16, 8, "int4", "float16", rows=6, groups=2)
    a4t = make_quant_inputs(rng, [2, 1], 16, 8, "int4", "float16", transpose_weight=1)
    w8 = make_quant_inputs(rng, [2, 0, 3], 16, 8, dtype="int8", rows=6, bias="int32")
    count, out16 = dict(group_list_type=1), dict(group_list_type=1, output_dtype=16)

    def c(base, **changes):
        return {**base, **changes}

    f32 = np.ones((3, 8), np.float32)
    return [
        B("offset-present", c(aq, offset=f32), count,
          "input 'offset' must be absent (torch_npu's npu_grouped_matmul takes offset=None), got float"),
        B("antiquant-scale-absent", c(aq, antiquant_scale=None, antiquant_offset=None), count,
          "input 'antiquant_scale' is required for int8 weight, got none"),
        B("antiquant-scale-type", c(aq, antiquant_scale=aq["antiquant_scale"].astype(np.float32),
                                    antiquant_offset=None), count,
          "input 'antiquant_scale' must have the type of x (bfloat16), got float"),
        B("antiquant-offset-type", c(aq, antiquant_offset=aq["antiquant_offset"].astype(np.float16)), count,
          "input 'antiquant_offset' must have the type of antiquant_scale (bfloat16), got float16"),
        # the wrong input is antiquant_scale, not the offset of x's type beside it
        B("antiquant-scale-type-offset-of-x", c(aq, antiquant_scale=aq["antiquant_scale"].astype(np.float16)),
          count, "input 'antiquant_scale' must have the type of x (bfloat16), got float16"),
        B("antiquant-scale-shape", c(aq, antiquant_scale=aq["antiquant_scale"][:, :7], antiquant_offset=None),
          count, "input 'antiquant_scale' must be [E, N] = [3, 8] or [E, G, N] with G dividing K = 16, "
          "got shape [3, 7]"),
        B("antiquant-groups-divide", c(a4, antiquant_scale=np.ones((3, 3, 8), np.float16), antiquant_offset=None),
          count, "input 'antiquant_scale' must be [E, N] = [3, 8] or [E, G, N] with G dividing K = 16, "
          "got shape [3, 3, 8]"),
        B("antiquant-int4-odd-group", c(a4t, antiquant_scale=np.ones((2, 16, 8), np.float16), antiquant_offset=None),
          dict(group_list_type=1, transpose_weight=1),
          "input 'antiquant_scale' must be [E, N] = [2, 8] or [E, G, N] with G dividing K = 16 and K / G even "
          "(int4 weight [E, N, K/8]), got shape [2, 16, 8]"),
        B("antiquant-offset-shape", c(a4, antiquant_offset=np.ones((3, 8), np.float16)), count,
          "input 'antiquant_offset' must have the shape of antiquant_scale [3, 2, 8], got shape [3, 8]"),
        B("int4-k-words", c(a4t, x=a4t["x"][:, :12]), dict(group_list_type=1, transpose_weight=1),
          "input 'weight' must be 3-D [E, N, K/8] (int4 in int32 words) with E >= 1 and K = 12 (x.shape[1]), "
          "got shape [2, 8, 2]"),
        B("antiquant-with-float-weight", c(aq, weight=aq["weight"].astype(np.float32).astype(ml_dtypes.bfloat16)),
          count, "input 'antiquant_scale' must be absent for bfloat16 weight (antiquant_scale and antiquant_offset "
          "are for int8 / int4 weights), got bfloat16"),
        B("scale-with-float-x", c(aq, scale=f32), count,
          "input 'scale' must be absent for bfloat16 x (scale and per_token_scale are for int8 x), got float"),
        B("w8a8-weight-int4", c(w8, weight=np.zeros((3, 16, 1), np.int32)), out16,
          "input 'weight' must be int8 for int8 x (W8A8), got int32"),
        B("w8a8-antiquant", c(w8, antiquant_scale=np.ones((3, 8), np.float32)), out16,
          "input 'antiquant_scale' must be absent for int8 x (W8A8 takes scale), got float"),
        B("w8a8-bias-type", c(w8, bias=np.zeros((3, 8), np.float32)), out16,
          "input 'bias' must be int32 for int8 x, got float"),
        B("w8a8-output-dtype-absent", w8, count,
          "attribute 'output_dtype' must be given for int8 x: 6 (int32), 1 (float), 10 (float16) or 16 "
          "(bfloat16), got 0"),
        B("w8a8-scale-absent", c(w8, scale=None), out16,
          "input 'scale' is required for int8 x with output_dtype 16 (bfloat16), got none"),
        B("w8a8-int32-with-scale", w8, dict(group_list_type=1, output_dtype=6),
          "input 'scale' must be absent with output_dtype 6 (int32 y: the raw sums), got float"),
        B("w8a8-scale-shape", c(w8, scale=w8["scale"].T.copy()), out16,
          "input 'scale' must be [E, N] = [3, 8] (from weight), got shape [8, 3]"),
        B("w8a8-per-token-shape", c(w8, per_token_scale=w8["per_token_scale"][:5]), out16,
          "input 'per_token_scale' must be [M] = [6] (x.shape[0]), got shape [5]"),
    ]
