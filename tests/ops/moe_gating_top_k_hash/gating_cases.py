"""Shared MoeGatingTopKHash test cases: configurations, random inputs, routing comparison."""

from __future__ import annotations

import zlib

import ml_dtypes
import numpy as np

from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import normalise
from tests.op_table import attribute_kind_cases

NP_DTYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# Relative tolerance on weights: a few ulp of the output type.
WEIGHT_RTOL = {"float": 4e-6, "float16": 2e-3, "bfloat16": 1.6e-2}

# name -> attributes (E is chosen by make_inputs)
CONFIGS = {
    "softmax": dict(k=4, norm_type=0),
    "softmax_renorm": dict(k=4, norm_type=0, renorm=1, routed_scaling_factor=1.5),
    "sigmoid_groups_top2": dict(k=4, k_group=2, group_count=4, group_select_mode=1, norm_type=1,
                                routed_scaling_factor=2.5),
    "softmax_groups_max": dict(k=3, k_group=3, group_count=4, group_select_mode=0, norm_type=0,
                               routed_scaling_factor=16.0),
    "sqrt_softplus": dict(k=6, norm_type=2, routed_scaling_factor=1.5, out_flag=1),
}
# bias mode -> which optional inputs are present
BIAS_MODES = ("none", "bias", "additional")


def seed_of(*parts) -> int:
    """A seed that is stable across runs (unlike hash() of strings, which PYTHONHASHSEED changes)."""
    return zlib.crc32(repr(parts).encode())


def make_inputs(rng, config: dict, bias_mode: str, hash_ids: str | None, dtype: str,
                lead: tuple, experts: int = 16, table_rows: int = 50):
    """Random inputs for one case as a dict of NumPy arrays keyed by ONNX input name."""
    np_dtype = NP_DTYPES[dtype]
    x = rng.standard_normal((*lead, experts)).astype(np.float32).astype(np_dtype)
    inputs = {"x": x}
    if bias_mode in ("bias", "additional"):
        inputs["bias"] = (rng.standard_normal(experts) * 0.5).astype(np.float32).astype(np_dtype)
    if bias_mode == "additional":
        inputs["additional_bias"] = (rng.standard_normal(experts) * 0.5).astype(np.float32).astype(np_dtype)
        inputs["additional_token_mask"] = rng.random(lead) < 0.4
    if hash_ids is not None:
        ids_dtype, table_dtype = hash_ids.split("/")
        inputs["input_ids"] = rng.integers(0, table_rows, lead).astype(ids_dtype)
        inputs["tid2eid"] = rng.integers(0, experts, (table_rows, config["k"])).astype(table_dtype)
    return inputs


def selection_scores(inputs: dict, attrs: dict) -> np.ndarray:
    """The float32 selection scores b = s + bias_row of every row, [R, E] (to explain a mismatch)."""
    x = np.asarray(inputs["x"])
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float32)
    s = normalise(x2, attrs.get("norm_type", 0))
    b = s if inputs.get("bias") is None else s + inputs["bias"].astype(np.float32)
    if inputs.get("additional_token_mask") is not None:
        mask = inputs["additional_token_mask"].reshape(-1)
        b = np.where(mask[:, None], s + inputs["additional_bias"].astype(np.float32), b)
    return b


def assert_routing_equal(got_idx, ref_idx, b: np.ndarray | None = None):
    """Expert indices exactly equal (docs/operators.md §1.2: the tie rule leaves no freedom, and
    every implementation's expert sets are the reference's). ``b``, the reference's selection
    scores, only explains a mismatch: the differing experts' score gap in float32 ulps."""
    got = np.asarray(got_idx).reshape(-1, np.shape(ref_idx)[-1])
    ref = np.asarray(ref_idx).reshape(got.shape)
    rows = np.flatnonzero((got != ref).any(axis=1))
    if rows.size == 0:
        return
    lines = []
    for r in rows[:5]:
        line = f"row {r}: got {got[r].tolist()}, reference {ref[r].tolist()}"
        if b is not None:
            differ = sorted(set(got[r].tolist()) ^ set(ref[r].tolist())) or got[r][got[r] != ref[r]].tolist()
            vals = b[r, differ].astype(np.float32)
            ulps = (np.nanmax(vals) - np.nanmin(vals)) / np.spacing(np.nanmax(np.abs(vals)))
            line += f"; scores of experts {differ}: {vals.tolist()} ({ulps:.3g} float32 ulp apart)"
        lines.append(line)
    raise AssertionError(f"expert indices differ from the reference in {rows.size} rows:\n" + "\n".join(lines))


def assert_weights_close(got_y, ref_y, dtype: str):
    """Weights within a few ulp of the output type (relative, with an absolute floor)."""
    got = np.asarray(got_y).astype(np.float64)
    ref = np.asarray(ref_y).astype(np.float64)
    rtol = WEIGHT_RTOL[dtype]
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * 1e-3)


# ---- bad cases (docs/operators.md §1.3): one table for every layer -------------------------------------------

X8 = np.zeros((3, 8), np.float32)
F8 = np.zeros(8, np.float32)


def _hash(k=2, ids=None, table=None, x=X8):
    return {"x": x, "input_ids": np.zeros(3, np.int64) if ids is None else ids,
            "tid2eid": np.zeros((4, k), np.int32) if table is None else table}


def bad_cases() -> list:
    """Every rule of docs/operators.md §1.3 broken once, with the exact message all layers give after
    "MoeGatingTopKHash: " (see tests/op_table.py for what runs them)."""
    from tests.op_table import BadCase as B

    x = {"x": X8}
    bf16 = ml_dtypes.bfloat16
    return [
        # attributes: values (rejected when an ORT session is created)
        B("k_zero", x, dict(k=0), "attribute 'k' must be in [1, 64], got 0"),
        B("k_65", {"x": np.zeros((3, 128), np.float32)}, dict(k=65), "attribute 'k' must be in [1, 64], got 65"),
        B("k_missing", x, {}, "attribute 'k' is required (INT), got none", torch=False),
        B("group_count_0", x, dict(k=2, group_count=0), "attribute 'group_count' must be >= 1, got 0"),
        B("k_group_0", x, dict(k=2, group_count=2, k_group=0),
          "attribute 'k_group' must be in [1, group_count (2)], got 0"),
        B("k_group_3", x, dict(k=2, group_count=2, k_group=3),
          "attribute 'k_group' must be in [1, group_count (2)], got 3"),
        B("group_select_mode_2", x, dict(k=2, group_select_mode=2),
          "attribute 'group_select_mode' must be one of [0, 1], got 2"),
        B("norm_type_3", x, dict(k=2, norm_type=3), "attribute 'norm_type' must be one of [0, 1, 2], got 3"),
        B("norm_type_-1", x, dict(k=2, norm_type=-1), "attribute 'norm_type' must be one of [0, 1, 2], got -1"),
        B("renorm_2", x, dict(k=2, renorm=2), "attribute 'renorm' must be one of [0, 1], got 2"),
        B("out_flag_2", x, dict(k=2, out_flag=2), "attribute 'out_flag' must be one of [0, 1], got 2", torch=False),
        B("eps_-1", x, dict(k=2, eps=-1.0), "attribute 'eps' must be finite and >= 0, got -1"),
        B("eps_-0.25", x, dict(k=2, eps=-0.25), "attribute 'eps' must be finite and >= 0, got -0.25"),
        B("eps_inf", x, dict(k=2, eps=float("inf")), "attribute 'eps' must be finite and >= 0, got inf"),
        B("eps_nan", x, dict(k=2, eps=float("nan")), "attribute 'eps' must be finite and >= 0, got nan"),
        B("rsf_inf", x, dict(k=2, routed_scaling_factor=float("inf")),
          "attribute 'routed_scaling_factor' must be finite, got inf"),
        B("rsf_nan", x, dict(k=2, routed_scaling_factor=float("nan")),
          "attribute 'routed_scaling_factor' must be finite, got nan"),
        # attributes: kinds and names (torch's own signature typing rejects these first)
        B("kind_rsf_int", x, dict(k=2, routed_scaling_factor=2),
          "attribute 'routed_scaling_factor' must be FLOAT, got INT 2", torch=False),
        B("kind_rsf_string", x, dict(k=2, routed_scaling_factor="2.5"),
          "attribute 'routed_scaling_factor' must be FLOAT, got STRING '2.5'", torch=False),
        B("kind_eps_int", x, dict(k=2, eps=0), "attribute 'eps' must be FLOAT, got INT 0", torch=False),
        B("kind_eps_floats", x, dict(k=2, eps=[0.5, 1.0]),
          "attribute 'eps' must be FLOAT, got FLOATS [0.5, 1]", torch=False),
        B("kind_k_float", x, dict(k=2.0), "attribute 'k' must be INT, got FLOAT 2", torch=False),
        B("kind_k_string", x, dict(k="2"), "attribute 'k' must be INT, got STRING '2'", torch=False),
        B("kind_norm_type_float", x, dict(k=2, norm_type=1.0),
          "attribute 'norm_type' must be INT, got FLOAT 1", torch=False),
        B("kind_norm_type_string", x, dict(k=2, norm_type="1"),
          "attribute 'norm_type' must be INT, got STRING '1'", torch=False),
        B("kind_norm_type_ints", x, dict(k=2, norm_type=[1]),
          "attribute 'norm_type' must be INT, got INTS [1]", torch=False),
        *attribute_kind_cases(x),
        B("unknown_norm", x, dict(k=2, norm=1),
          "attribute 'norm' is not an attribute of MoeGatingTopKHash (known: eps, group_count, "
          "group_select_mode, k, k_group, norm_type, out_flag, renorm, routed_scaling_factor)",
          ort=False, torch=False),
        # inputs (types: at ORT session creation; the rest when the model runs)
        B("x_absent", {"x": None, "bias": F8}, dict(k=2), "input 'x' is required, got none",
          torch=False),
        B("x_rank_1", {"x": np.zeros(8, np.float32)}, dict(k=2), "input 'x' must have rank >= 2, got shape [8]"),
        B("x_double", {"x": np.zeros((3, 8))}, dict(k=2), "input 'x' must be float, float16 or bfloat16, got double",
          body=False),
        B("x_int32", {"x": np.zeros((3, 8), np.int32)}, dict(k=2),
          "input 'x' must be float, float16 or bfloat16, got int32", body=False),
        B("E_2049", {"x": np.zeros((3, 2049), np.float32)}, dict(k=2),
          "input 'x' last dimension E must be in [1, 2048], got 2049", body=False),
        B("E_0", {"x": np.zeros((3, 0), np.float32)}, dict(k=1),
          "input 'x' last dimension E must be in [1, 2048], got 0"),
        B("k_above_E", x, dict(k=9), "attribute 'k' must be <= E (8), got 9"),
        B("group_count_not_dividing", x, dict(k=2, group_count=3, k_group=1),
          "attribute 'group_count' must divide E (8), got 3"),
        B("k_above_kept_experts", x, dict(k=5, group_count=4, k_group=2),
          "attribute 'k' must be <= k_group * E / group_count (4), got 5"),
        B("mode_1_single_expert_groups", x, dict(k=2, group_count=8, k_group=2, group_select_mode=1),
          "attribute 'group_select_mode' 1 needs E / group_count >= 2, got E / group_count = 1"),
        B("bias_length", {"x": X8, "bias": np.zeros(4, np.float32)}, dict(k=2),
          "input 'bias' must have shape [E] = [8], got [4]"),
        B("bias_rank", {"x": X8, "bias": np.zeros((1, 8), np.float32)}, dict(k=2),
          "input 'bias' must have shape [E] = [8], got [1, 8]"),
        B("bias_type", {"x": X8, "bias": F8.astype(np.float16)}, dict(k=2),
          "input 'bias' must have the type of x (float), got float16", body=False),
        B("additional_bias_length", {"x": X8, "additional_bias": np.zeros(9, np.float32)}, dict(k=2),
          "input 'additional_bias' must have shape [E] = [8], got [9]"),
        B("additional_bias_type", {"x": X8, "additional_bias": F8.astype(bf16)}, dict(k=2),
          "input 'additional_bias' must have the type of x (float), got bfloat16", body=False),
        B("ids_alone", {"x": X8, "input_ids": np.zeros(3, np.int64)}, dict(k=2),
          "input 'input_ids' needs input 'tid2eid' (hash routing uses both), got only 'input_ids'"),
        B("table_alone", {"x": X8, "tid2eid": np.zeros((4, 2), np.int32)}, dict(k=2),
          "input 'tid2eid' needs input 'input_ids' (hash routing uses both), got only 'tid2eid'"),
        B("table_rank", _hash(table=np.zeros(8, np.int32)), dict(k=2),
          "input 'tid2eid' must have shape [n, k=2], got [8]"),
        B("table_width", _hash(table=np.zeros((4, 3), np.int32)), dict(k=2),
          "input 'tid2eid' must have shape [n, k=2], got [4, 3]"),
        B("table_type", _hash(table=np.zeros((4, 2), np.float32)), dict(k=2),
          "input 'tid2eid' must be int32 or int64, got float", body=False),
        B("ids_type", _hash(ids=np.zeros(3, np.float32)), dict(k=2),
          "input 'input_ids' must be int32 or int64, got float", body=False),
        B("ids_count", _hash(ids=np.zeros(4, np.int64)), dict(k=2),
          "input 'input_ids' must have R = 3 elements, got shape [4]"),
        B("id_too_large", _hash(ids=np.array([0, 4, 1])), dict(k=2),
          "input 'input_ids' value at row 1 is out of range [0, 4), got 4"),
        B("id_negative", _hash(ids=np.array([0, 1, -1], np.int32)), dict(k=2),
          "input 'input_ids' value at row 2 is out of range [0, 4), got -1"),
        B("table_empty", _hash(table=np.zeros((0, 2), np.int64)), dict(k=2),
          "input 'input_ids' value at row 0 is out of range [0, 0), got 0"),
        B("table_entry_too_large",
          _hash(ids=np.array([0, 3, 3]), table=np.array([[0, 1], [1, 2], [2, 3], [7, 8]], np.int64)), dict(k=2),
          "input 'tid2eid' entry [3, 1] (used by row 1) is out of range [0, 8), got 8"),
        B("table_entry_negative",
          _hash(ids=np.array([2, 0, 0]), table=np.array([[0, 1], [1, 2], [-3, 3], [7, 8]], np.int32)), dict(k=2),
          "input 'tid2eid' entry [2, 0] (used by row 0) is out of range [0, 8), got -3"),
        B("hash_with_groups", _hash(), dict(k=2, group_count=4, k_group=2),
          "hash routing (input 'tid2eid') cannot be combined with group-limited selection, "
          "got group_count=4, k_group=2"),
        B("mask_alone", {"x": X8, "additional_token_mask": np.zeros(3, bool)}, dict(k=2),
          "input 'additional_token_mask' needs input 'additional_bias', got the mask alone"),
        B("mask_type", {"x": X8, "additional_bias": F8, "additional_token_mask": np.zeros(3, np.int32)},
          dict(k=2), "input 'additional_token_mask' must be bool, got int32"),
        B("mask_count", {"x": X8, "additional_bias": F8, "additional_token_mask": np.zeros(2, bool)},
          dict(k=2), "input 'additional_token_mask' must have R = 3 elements, got shape [2]"),
    ]


def _sigmoid64(v) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-np.asarray(v, np.float64)))


def _ties_long_rows(experts: int) -> dict:
    """All-equal rows, many equal maxima, few distinct values, a tie among the top few."""
    rng = np.random.default_rng(experts)
    x = np.zeros((4, experts), np.float32)
    x[1, ::7] = 1.0
    x[2] = rng.integers(0, 3, experts)
    x[3, [5, 100, 200]] = [2.0, 2.0, 1.0]
    return {"x": x}


def _group_maxima(group_size: int) -> tuple[dict, int, int]:
    """Group A (0) holds two equal maxima (score 2a under mode 1), group B (2) one larger maximum
    with a small second; x = 0 and sigmoid, so b = 0.5 + bias."""
    E = 4 * group_size
    bias = np.full(E, -0.45, np.float32)
    a_last, b0 = group_size - 1, 2 * group_size
    bias[[a_last - 1, a_last]] = 0.0      # A: 0.5, 0.5 -> 1.0
    bias[b0] = 0.4                        # B: 0.9, 0.05 -> 0.95
    return {"x": np.zeros((1, E), np.float32), "bias": bias}, a_last, b0


def samples() -> list:
    """Named valid calls that every layer runs (tests/op_table.py): the generic samples and the
    semantic edge cases of docs/operators.md §1.2, each with what the contract states outright."""
    from tests.op_table import Sample as S

    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    bias = (rng.standard_normal(16) * 0.1).astype(np.float32)
    full = {"x": x, "bias": bias, "input_ids": rng.integers(0, 9, (2, 5)).astype(np.int64),
            "tid2eid": rng.integers(0, 16, (9, 3)).astype(np.int32),
            "additional_bias": (rng.standard_normal(16) * 0.1).astype(np.float32),
            "additional_token_mask": rng.random((2, 5)) < 0.5}
    out = [
        S("every-input", full, dict(k=3, norm_type=2, routed_scaling_factor=1.5, out_flag=1)),
        S("groups-top2-sigmoid", {"x": x, "bias": bias},
          dict(k=4, group_count=4, k_group=2, group_select_mode=1, norm_type=1)),
        S("softmax-renorm-random", {"x": x}, dict(k=2, renorm=1)),
    ]
    # ties and special values: ties go to the lower index; numbers, then -inf, then NaN
    out.append(S("ties-lower-index", {"x": np.array([[1, 3, 3, 2, 3, 0], [0] * 6], np.float32)},
                 dict(k=3, norm_type=1), expect={"expert_idx": [[1, 2, 4], [0, 1, 2]]}))
    for experts in (256, 2048):
        ties = _ties_long_rows(experts)  # sigmoid keeps the order: a stable sort of -x is the answer
        out.append(S(f"ties-long-rows-{experts}", ties, dict(k=8, norm_type=1), rtol=4e-6,
                     expect={"expert_idx": np.argsort(-ties["x"], axis=-1, kind="stable")[:, :8]}))
    nan, inf = np.nan, np.inf
    out.append(S("nan-ranks-below-minus-inf",
                 {"x": np.array([[nan, 0, nan, 1, 0, -1]], np.float32),
                  "bias": np.array([0, -inf, 0, 0, -inf, 0], np.float32)},
                 dict(k=6, norm_type=1), expect={"expert_idx": [[3, 5, 1, 4, 0, 2]]}))
    out.append(S("numbers-then-minus-inf-then-nan",
                 {"x": np.array([[0.5, nan, 2.0, 0.5, 1.0, nan, 0.5, -1.0]], np.float32),
                  "bias": np.array([0, 0, 0, 0, -inf, 0, -inf, 0], np.float32)},
                 dict(k=8, norm_type=1),  # NaN scores poison the renormalisation sum
                 expect={"expert_idx": [[2, 0, 3, 7, 4, 6, 1, 5]], "y": np.full((1, 8), nan, np.float32)}))
    long_nan = np.random.default_rng(5).standard_normal((3, 256)).astype(np.float32)
    long_nan[0, :250] = nan                  # only 6 numbers: 2 NaN experts fill k = 8
    long_nan[1, ::2] = nan
    long_nan[2, 10] = -inf
    out.append(S("nan-in-long-rows", {"x": long_nan}, dict(k=8, norm_type=2, out_flag=1), rtol=4e-6))
    for mode in (0, 1):
        g = np.random.default_rng(7).standard_normal((5, 16)).astype(np.float32)
        gbias = np.zeros(16, np.float32)
        g[0, 0:4] = nan                      # a whole NaN group
        g[1, 4:8] = nan
        g[1, 8] = nan                        # NaN inside a kept group
        gbias[12:14] = -inf                  # -inf entries: mode 1 sums them into -inf
        g[2, :] = 0.0                        # all ties: lower groups, lower experts
        g[3, 0:8] = nan                      # two NaN groups: one of them is kept
        out.append(S(f"nan-and-minus-inf-groups-mode{mode}", {"x": g, "bias": gbias},
                     dict(k=6, norm_type=1, group_count=4, k_group=3, group_select_mode=mode, out_flag=1),
                     rtol=4e-6))
    out.append(S("softmax-with-nan", {"x": np.array([[0.5, nan, 1.0, 2.0]], np.float32)},
                 dict(k=2, norm_type=0, out_flag=1),
                 expect={"expert_idx": [[0, 1]], "y": np.full((1, 2), nan, np.float32),
                         "out": np.full((1, 4), nan, np.float32)}))
    # saturation and far tails (the kernel keeps subnormal scores: tests/ops/moe_gating_top_k_hash/test_gating_ort.py)
    out.append(S("sigmoid-saturation", {"x": np.array([[100, -100, 1000, -1000, 0, 88, -88, 20]], np.float32)},
                 dict(k=8, norm_type=1, out_flag=1), rtol=4e-6, atol=1e-37))
    out.append(S("sigmoid-saturation-ties", {"x": np.array([[100.0, 200.0, 50.0, -200.0]], np.float32)},
                 dict(k=3, norm_type=1), expect={"expert_idx": [[0, 1, 2]], "y": np.full((1, 3), 1 / 3)}))
    out.append(S("sqrt-softplus-extremes", {"x": np.array([[100, -100, 1e30, -1e30, 0, 17, -17, -120]], np.float32)},
                 dict(k=8, norm_type=2, out_flag=1), rtol=4e-6, atol=1e-37))
    out.append(S("sqrt-softplus-far-negative",  # log1p accuracy: s ~ exp(x/2) where Log(1 + u) gives 0
                 {"x": np.array([[-17.0, -30.0, -60.0, -80.0, 0.0, 20.0, 90.0, -inf]], np.float32)},
                 dict(k=2, norm_type=2, out_flag=1), rtol=4e-6, atol=0.0))
    # group selection
    for size in (2, 32):
        inputs, a_last, b0 = _group_maxima(size)
        base = dict(k=2, k_group=1, group_count=4, norm_type=1)
        out.append(S(f"group-top2-counts-equal-maxima-twice-{size}", inputs, dict(base, group_select_mode=1),
                     expect={"expert_idx": [[a_last - 1, a_last]]}))
        out.append(S(f"group-max-keeps-the-larger-maximum-{size}", inputs, dict(base, group_select_mode=0),
                     expect={"expert_idx": [[b0, b0 + 1]]}))
    eq_bias = np.zeros(16, np.float32)
    eq_bias[[2, 6, 10, 14]] = 0.25           # every group has the same score
    out.append(S("equal-group-scores-keep-the-lower-group", {"x": np.zeros((1, 16), np.float32), "bias": eq_bias},
                 dict(k=2, k_group=2, group_count=4, group_select_mode=1, norm_type=1),
                 expect={"expert_idx": [[2, 6]]}))
    # weights: from the unbiased scores; softmax renormalised only with renorm=1
    xw = np.array([[2.0, 1.0, 0.0, -1.0]], np.float32)
    s = _sigmoid64(xw[0, [3, 0]])
    out.append(S("weights-from-unbiased-scores", {"x": xw, "bias": np.array([0, 0, 0, 10], np.float32)},
                 dict(k=2, norm_type=1, routed_scaling_factor=2.0, out_flag=1), rtol=4e-6,
                 expect={"expert_idx": [[3, 0]], "y": [2.0 * s / s.sum()], "out": _sigmoid64(xw)}))
    xs = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    p = np.exp(xs[0] - 4.0) / np.exp(xs[0] - 4.0).sum()
    out.append(S("softmax-not-renormalised", {"x": xs}, dict(k=2, norm_type=0, routed_scaling_factor=1.5),
                 rtol=4e-6, expect={"expert_idx": [[3, 2]], "y": [1.5 * p[[3, 2]]]}))
    out.append(S("softmax-renorm", {"x": xs}, dict(k=2, norm_type=0, renorm=1, routed_scaling_factor=1.5),
                 rtol=4e-6, expect={"expert_idx": [[3, 2]], "y": [1.5 * p[[3, 2]] / p[[3, 2]].sum()]}))
    # hash routing: table order and duplicates kept; masked rows select with additional_bias
    table = np.array([[3, 3, 1, 0], [7, 6, 5, 4], [0, 0, 0, 0]], np.int32)
    ids = np.array([2, 0, 1], np.int64)
    out.append(S("hash-rows-keep-table-order-and-duplicates",
                 {"x": np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32),
                  "input_ids": ids, "tid2eid": table},
                 dict(k=4, norm_type=2, routed_scaling_factor=1.5, out_flag=1), rtol=4e-6,
                 expect={"expert_idx": table[ids]}))
    abias = np.zeros(8, np.float32)
    abias[[5, 6]] = 100.0
    out.append(S("masked-rows-on-hash-layers-use-top-k",  # invalid ids on masked rows are never used
                 {"x": np.random.default_rng(3).standard_normal((4, 8)).astype(np.float32),
                  "input_ids": np.array([1, -7, 2, 99], np.int32),
                  "tid2eid": np.tile(np.array([[0, 1]], np.int64), (5, 1)),
                  "additional_bias": abias, "additional_token_mask": np.array([False, True, False, True])},
                 dict(k=2, norm_type=1), rtol=4e-6))
    out.append(S("hash-with-masked-row-and-unused-bad-entries",
                 {"x": np.array([[0.0, 1.0, 2.0, 3.0]] * 3, np.float32), "input_ids": np.array([1, 0, 1000]),
                  "tid2eid": np.array([[3, 3, 0], [1, 2, 0], [99, 99, 99]], np.int32),
                  "additional_bias": np.array([5.0, 0.0, 0.0, 0.0], np.float32),
                  "additional_token_mask": np.array([False, False, True])},
                 dict(k=3, norm_type=2), rtol=4e-6, expect={"expert_idx": [[1, 2, 0], [3, 3, 0], [0, 3, 2]]}))
    two = {"x": np.zeros((2, 4), np.float32), "bias": np.array([0, 0, 0, 1], np.float32),
           "additional_bias": np.array([1, 0, 0, 0], np.float32)}
    out.append(S("additional-bias-only-on-masked-rows", {**two, "additional_token_mask": np.array([True, False])},
                 dict(k=1, norm_type=1), expect={"expert_idx": [[0], [3]]}))
    out.append(S("additional-bias-without-mask-has-no-effect", two, dict(k=1, norm_type=1),
                 expect={"expert_idx": [[3], [3]]}))
    # out and empty inputs
    x16 = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float16)
    out.append(S("out-empty-without-out-flag", {"x": x16}, dict(k=2), rtol=2e-3,
                 expect={"out": np.zeros((0,), np.float32)}))
    out.append(S("out-with-out-flag", {"x": x16}, dict(k=2, out_flag=1), rtol=2e-3))
    for lead in [(0,), (3, 0)]:
        out.append(S(f"empty-input-{'x'.join(map(str, lead))}", {"x": np.zeros((*lead, 16), NP_DTYPES["bfloat16"])},
                     dict(k=4, out_flag=1), expect={"out": np.zeros((*lead, 16), np.float32)}))
    return out
