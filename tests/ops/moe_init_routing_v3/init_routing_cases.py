"""Shared helpers of the init-routing tests (MoeInitRoutingV3, MoeTokenPermute, MoeInitRouting): ORT
runs of one node with or without the library (function body), random inputs, the samples and bad
cases of tests/op_table.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ascend_moe_onnx.onnx_schemas.functions import attach_functions
from tests.op_table import BadCase, Sample

BF16 = np.dtype(ml_dtypes.bfloat16)
X_DTYPES = {"float": np.float32, "float16": np.float16, "bfloat16": BF16, "int8": np.int8}


def run(spec, inputs: dict, attrs: dict, library: bool, threads: int | None = None) -> list[np.ndarray]:
    """The node through ONNX Runtime: the library kernel, or (library False) the function body."""
    from tests.op_table import node_model
    from tests.ops.moe_re_routing import rerouting_cases as rc

    model = node_model(spec.OP_TYPE, inputs, attrs, ranks=True)
    sess = rc.session(attach_functions(model) if not library else model, library=library, threads=threads)
    return rc.run_feeds(sess, {n: a for n, a in inputs.items() if a is not None})


def assert_outputs_equal(got, expected, what: str = "") -> None:
    """Same dtypes, shapes and values (bit for bit; NaN where expected has NaN)."""
    assert len(got) == len(expected), what
    for i, (g, e) in enumerate(zip(got, expected)):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (what, i, g.dtype, e.dtype, g.shape, e.shape)
        if g.dtype.kind == "f" or g.dtype == BF16:
            gf, ef = g.astype(np.float32), e.astype(np.float32)
            assert np.array_equal(np.isnan(gf), np.isnan(ef)), (what, i)
            ok = ~np.isnan(ef)
            assert np.array_equal(gf[ok], ef[ok]), (what, i, np.argwhere(gf != ef)[:5])
        else:
            assert np.array_equal(g, e), (what, i, np.argwhere(g != e)[:5])


def init_inputs(rng, n=7, h=12, k=3, e=6, x_type="float", idx_type=np.int32, scale=None, offset=False,
                start=0, end=None):
    """Random inputs; ``scale``: None, "token" [N], "one" [1], "smooth" [end-start, H], "smooth1" [1, H]."""
    end = e if end is None else end
    if x_type == "int8":
        x = rng.integers(-128, 128, (n, h)).astype(np.int8)
    else:
        x = rng.standard_normal((n, h)).astype(np.float32).astype(X_DTYPES[x_type])
    idx = rng.integers(0, e, (n, k)).astype(idx_type)
    shapes = {None: None, "token": (n,), "one": (1,), "smooth": (end - start, h), "smooth1": (1, h)}
    s = None if scale is None else (rng.random(shapes[scale]) * 2 + 0.1).astype(np.float32)
    o = (rng.standard_normal((1,)) * 3).astype(np.float32) if offset else None
    return {"x": x, "expert_idx": idx, "scale": s, "offset": o}


_NON_FINITE_ROWS = np.array([[1.0, np.nan, 0.0], [np.inf, -np.inf, 1.0], [2.0, -2.0, 0.0]], np.float32)
_ONE_EACH = np.array([[0], [1], [2]], np.int32)


def init_samples() -> list:
    """Valid calls covering every mode (the first with scale and offset present)."""
    rng = np.random.default_rng(31)
    E = 6
    return [
        Sample("static-quant", init_inputs(rng, scale="one", offset=True), dict(expert_num=E, quant_mode=0)),
        Sample("count-token-scale", init_inputs(rng, scale="token"), dict(expert_num=E, expert_tokens_num_type=1)),
        Sample("bf16-int64-range-scatter", init_inputs(rng, x_type="bfloat16", idx_type=np.int64),
               dict(expert_num=E, active_expert_start=1, active_expert_end=4, row_idx_type=1)),
        Sample("fp16-active-num-key-value", init_inputs(rng, x_type="float16", scale="token"),
               dict(expert_num=E, active_num=9, expert_tokens_num_type=2, active_expert_start=2)),
        Sample("int8-drop-pad", init_inputs(rng, x_type="int8"),
               dict(expert_num=E, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1)),
        Sample("dynamic-quant-smooth-range", init_inputs(rng, scale="smooth", start=1, end=5),
               dict(expert_num=E, quant_mode=1, active_expert_start=1, active_expert_end=5)),
        Sample("dynamic-quant-bf16-scatter", init_inputs(rng, x_type="bfloat16"),
               dict(expert_num=E, quant_mode=1, row_idx_type=1)),
        # zero rows (inactive experts) stay 0, not round(offset)
        Sample("static-quant-inactive-experts", init_inputs(rng, scale="one", offset=True),
               dict(expert_num=E, quant_mode=0, active_expert_start=3)),
        Sample("dynamic-quant-drop-pad", init_inputs(rng, scale="smooth1"),
               dict(expert_num=E, quant_mode=1, drop_pad_mode=1, expert_capacity=3, expert_tokens_num_type=1)),
        Sample("empty-input-key-value", init_inputs(rng, n=0), dict(expert_num=E, expert_tokens_num_type=2),
               expect={"expert_tokens_count_or_cumsum": np.zeros((E, 2), np.int64)}),
        Sample("empty-input-drop-pad", init_inputs(rng, n=0, scale="token"),
               dict(expert_num=E, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1),
               expect={"expanded_x": np.zeros((E, 2, 12), np.float32), "expanded_scale": np.zeros(E * 2, np.float32)}),
        # NaN quantises to 0; a dynamic row holding NaN gets scale NaN (q = 0), one holding inf
        # scale inf (finite entries 0, inf / inf = NaN -> 0); static: inf saturates
        Sample("dynamic-quant-non-finite-rows", {"x": _NON_FINITE_ROWS, "expert_idx": _ONE_EACH},
               dict(expert_num=3, quant_mode=1),
               expect={"expanded_x": np.array([[0, 0, 0], [0, 0, 0], [127, -127, 0]], np.int8),
                       "expanded_scale": np.array([np.nan, np.inf, 2 / 127], np.float32)}),
        Sample("static-quant-non-finite-rows", {"x": _NON_FINITE_ROWS, "expert_idx": _ONE_EACH,
                                                "scale": np.array([1.0], np.float32),
                                                "offset": np.array([0.0], np.float32)},
               dict(expert_num=3, quant_mode=0),
               expect={"expanded_x": np.array([[1, 0, 0], [127, -128, 1], [2, -2, 0]], np.int8)}),
        Sample("worked-example", {"x": np.arange(12, dtype=np.float32).reshape(3, 4),
                                  "expert_idx": np.array([[2, 0], [0, 2], [1, 0]], np.int32)},
               dict(expert_num=3, expert_tokens_num_type=0),
               expect={"expanded_row_idx": np.array([4, 0, 1, 5, 3, 2], np.int32),
                       "expert_tokens_count_or_cumsum": np.array([3, 4, 6], np.int64)}),
    ]


def permute_samples() -> list:
    """Valid calls of MoeTokenPermute."""
    rng = np.random.default_rng(32)
    t = rng.standard_normal((9, 8)).astype(np.float32)
    return [
        Sample("int64-ids", {"tokens": t, "indices": rng.integers(0, 5, (9, 2)).astype(np.int64)}),
        Sample("bf16-num-out", {"tokens": t.astype(BF16), "indices": rng.integers(0, 4, (9, 3)).astype(np.int32)},
               dict(num_out_tokens=11)),
        Sample("fp16-1d-negative-num-out", {"tokens": t.astype(np.float16),
                                            "indices": rng.integers(0, 4, (9,)).astype(np.int32)},
               dict(num_out_tokens=-2)),
        Sample("int8-num-out-past-all", {"tokens": rng.integers(-128, 128, (9, 8)).astype(np.int8),
                                         "indices": rng.integers(0, 3, (9, 4)).astype(np.int64)},
               dict(num_out_tokens=100)),
        Sample("empty-input", {"tokens": t[:0], "indices": np.zeros((0, 2), np.int32)},
               expect={"sorted_indices": np.zeros(0, np.int32)}),
        Sample("worked-example", {"tokens": np.arange(12, dtype=np.float32).reshape(3, 4),
                                  "indices": np.array([[2, 0], [0, 2], [1, 0]], np.int64)},
               expect={"sorted_indices": np.array([4, 0, 1, 5, 3, 2], np.int32)}),
    ]


def init_bad_cases() -> list:
    """Every MoeInitRoutingV3 validation rule broken once (message after "MoeInitRoutingV3: ")."""
    rng = np.random.default_rng(33)
    ok = init_inputs(rng)
    x, idx = ok["x"], ok["expert_idx"]
    E = dict(expert_num=6)

    def case(id_, inputs, attrs, msg, **kw):
        return BadCase(id_, {"x": x, "expert_idx": idx, **inputs}, attrs, msg, **kw)

    f32 = lambda *s: np.ones(s, np.float32)  # noqa: E731
    return [
        case("expert_num", {}, {}, "attribute 'expert_num' must be >= 1, got -1"),
        case("drop_pad_mode", {}, dict(E, drop_pad_mode=2),
             "attribute 'drop_pad_mode' must be 0 (dropless) or 1 (drop/pad), got 2"),
        case("tokens_num_type", {}, dict(E, expert_tokens_num_type=3),
             "attribute 'expert_tokens_num_type' must be 0 (cumsum), 1 (count) or 2 (key_value), got 3"),
        case("flag", {}, dict(E, expert_tokens_num_flag=2), "attribute 'expert_tokens_num_flag' must be 0 or 1, got 2",
             torch=False),
        case("quant_mode", {}, dict(E, quant_mode=2),
             "attribute 'quant_mode' must be -1 (none), 0 (static int8) or 1 (dynamic int8), got 2 "
             "(the MXFP8/HIF8/MXFP4/FP8/INT4 modes are not supported)"),
        case("row_idx_type", {}, dict(E, row_idx_type=2),
             "attribute 'row_idx_type' must be 0 (gather) or 1 (scatter), got 2"),
        case("active_num", {}, dict(E, active_num=-2), "attribute 'active_num' must be >= -1, got -2"),
        case("range_start", {}, dict(E, active_expert_start=-1), "attribute 'active_expert_start' must be >= 0, got -1"),
        case("range_end", {}, dict(E, active_expert_start=2, active_expert_end=7),
             "attribute 'active_expert_end' must be -1 or in (active_expert_start, expert_num] = (2, 6], got 7"),
        case("range_start_e", {}, dict(E, active_expert_start=6),
             "attribute 'active_expert_start' must be < expert_num = 6, got 6"),
        case("capacity", {}, dict(E, drop_pad_mode=1, expert_tokens_num_type=1),
             "attribute 'expert_capacity' must be >= 1 when drop_pad_mode is 1, got -1"),
        case("capacity_high", {}, dict(E, drop_pad_mode=1, expert_capacity=2**29, expert_tokens_num_type=1),
             "attribute 'expert_capacity' must be at most 357913941 (expert_num * expert_capacity rows, indexed by "
             "int32), got 536870912"),
        case("pad_count_type", {}, dict(E, drop_pad_mode=1, expert_capacity=2),
             "attribute 'expert_tokens_num_type' must be 1 (count) when drop_pad_mode is 1, got 0"),
        case("pad_row_idx", {}, dict(E, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1, row_idx_type=1),
             "attribute 'row_idx_type' must be 0 when drop_pad_mode is 1, got 1"),
        case("pad_range", {}, dict(E, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1,
                                   active_expert_end=4),
             "the active expert range must be [0, expert_num) = [0, 6) when drop_pad_mode is 1, got [0, 4)"),
        case("x_type", {"x": x.astype(np.float64)}, E,
             "input 'x' must be float, float16, bfloat16 or int8, got double"),
        case("x_rank", {"x": x[None]}, E, "input 'x' must be 2-D [N, H], got shape [1, 7, 12]"),
        case("x_h", {"x": x[:, :0]}, E, "input 'x' must have H >= 1, got shape [7, 0]"),
        case("idx_type", {"expert_idx": idx.astype(np.int8)}, E,
             "input 'expert_idx' must be int32 or int64, got int8"),
        case("idx_rank", {"expert_idx": idx.reshape(-1)}, E, "input 'expert_idx' must be 2-D [N, K], got shape [21]"),
        case("idx_rows", {"expert_idx": idx[:3]}, E,
             "input 'expert_idx' must have N = 7 rows (x.shape[0]), got shape [3, 3]"),
        case("idx_k", {"expert_idx": idx[:, :0]}, E, "input 'expert_idx' must have K >= 1, got shape [7, 0]"),
        case("quant_int8", {"x": x.astype(np.int8)}, dict(E, quant_mode=1),
             "input 'x' must be float, float16 or bfloat16 when quant_mode is 1, got int8"),
        case("scale_type", {"scale": np.ones(7, np.float16)}, E, "input 'scale' must be float, got float16"),
        case("static_scale", {"offset": f32(1)}, dict(E, quant_mode=0),
             "input 'scale' is required when quant_mode is 0"),
        case("static_offset_shape", {"scale": f32(1), "offset": f32(2)}, dict(E, quant_mode=0),
             "input 'offset' must have shape [1] when quant_mode is 0, got shape [2]"),
        case("offset_absent", {"scale": f32(7), "offset": f32(1)}, E,
             "input 'offset' must be absent when quant_mode is -1"),
        case("scale_tokens", {"scale": f32(6)}, E,
             "input 'scale' must have shape [N] = [7] when quant_mode is -1, got shape [6]"),
        case("scale_smooth", {"scale": f32(3, 12)}, dict(E, quant_mode=1),
             "input 'scale' must have shape [6, H] or [1, H] (H = 12) when quant_mode is 1, got shape [3, 12]"),
        case("expert_id_high", {"expert_idx": _with(idx, (1, 2), 6)}, E,
             "input 'expert_idx' must hold expert ids in [0, expert_num) = [0, 6), got 6 at [1, 2]"),
        case("expert_id_negative", {"expert_idx": _with(idx, (4, 0), -3)}, E,
             "input 'expert_idx' must hold expert ids in [0, expert_num) = [0, 6), got -3 at [4, 0]"),
    ]


def permute_bad_cases() -> list:
    """Every MoeTokenPermute validation rule broken once."""
    rng = np.random.default_rng(34)
    t = rng.standard_normal((5, 4)).astype(np.float32)
    i = rng.integers(0, 3, (5, 2)).astype(np.int64)

    def case(id_, inputs, attrs, msg, **kw):
        return BadCase(id_, {"tokens": t, "indices": i, **inputs}, attrs, msg, **kw)

    return [
        case("padded_mode", {}, dict(padded_mode=1),
             "attribute 'padded_mode' must be 0 (padded mode is not supported), got 1"),
        case("tokens_type", {"tokens": t.astype(np.float64)}, {},
             "input 'tokens' must be float, float16, bfloat16 or int8, got double"),
        case("tokens_rank", {"tokens": t.reshape(-1)}, {}, "input 'tokens' must be 2-D [N, H], got shape [20]"),
        case("tokens_h", {"tokens": t[:, :0]}, {}, "input 'tokens' must have H >= 1, got shape [5, 0]"),
        case("indices_type", {"indices": i.astype(np.int8)}, {}, "input 'indices' must be int32 or int64, got int8"),
        case("indices_rank", {"indices": i[None]}, {},
             "input 'indices' must be 1-D [N] or 2-D [N, K], got shape [1, 5, 2]"),
        case("indices_rows", {"indices": i[:2]}, {},
             "input 'indices' must have N = 5 rows (tokens.shape[0]), got shape [2, 2]"),
        case("indices_k", {"indices": i[:, :0]}, {}, "input 'indices' must have K >= 1, got shape [5, 0]"),
        case("indices_negative", {"indices": _with(i, (1, 1), -1)}, {},
             "input 'indices' must hold expert ids in [0, 2147483647), got -1 at [1, 1]"),
    ]



def _with(a: np.ndarray, at: tuple, value) -> np.ndarray:
    out = a.copy()
    out[at] = value
    return out


def v1_inputs(rng, n=6, h=5, k=2, e=9, x_type="float"):
    """MoeInitRouting inputs with the usual row_idx (slot * N + token)."""
    x = rng.standard_normal((n, h)).astype(np.float32).astype(X_DTYPES[x_type])
    row_idx = np.arange(n * k, dtype=np.int32).reshape(k, n).T.copy()
    return {"x": x, "row_idx": row_idx, "expert_idx": rng.integers(0, e, (n, k)).astype(np.int32)}


def v1_samples() -> list:
    """Valid calls of MoeInitRouting."""
    rng = np.random.default_rng(35)
    shuffled = v1_inputs(rng, n=7, k=3, x_type="bfloat16")
    shuffled["row_idx"] = rng.permutation(21).astype(np.int32).reshape(7, 3)
    return [
        Sample("all-tokens", v1_inputs(rng), dict(active_num=6)),
        Sample("fp16-active-num", v1_inputs(rng, x_type="float16"), dict(active_num=2)),
        Sample("bf16-shuffled-row-idx", shuffled, dict(active_num=100)),
        Sample("empty-input", v1_inputs(rng, n=0), dict(active_num=4)),
        Sample("worked-example", {"x": np.arange(12, dtype=np.float32).reshape(3, 4),
                                  "row_idx": np.array([[0, 3], [1, 4], [2, 5]], np.int32),
                                  "expert_idx": np.array([[2, 0], [0, 2], [1, 0]], np.int32)},
               dict(active_num=3),
               expect={"expanded_row_idx": np.array([4, 1, 3, 0, 5, 2], np.int32),
                       "expanded_expert_idx": np.array([0, 0, 0, 1, 2, 2], np.int32)}),
    ]


def v1_bad_cases() -> list:
    """Every MoeInitRouting validation rule broken once."""
    rng = np.random.default_rng(36)
    ok = v1_inputs(rng)
    x, row, e = ok["x"], ok["row_idx"], ok["expert_idx"]

    def case(id_, inputs, attrs, msg, **kw):
        return BadCase(id_, {"x": x, "row_idx": row, "expert_idx": e, **inputs}, {"active_num": 6, **attrs}, msg, **kw)

    return [
        case("active_num", {}, dict(active_num=-1), "attribute 'active_num' must be >= 0, got -1"),
        case("x_type", {"x": x.astype(np.float64)}, {}, "input 'x' must be float, float16 or bfloat16, got double"),
        case("x_rank", {"x": x[None]}, {}, "input 'x' must be 2-D [N, H], got shape [1, 6, 5]"),
        case("x_h", {"x": x[:, :0]}, {}, "input 'x' must have H >= 1, got shape [6, 0]"),
        case("row_type", {"row_idx": row.astype(np.int64)}, {}, "input 'row_idx' must be int32, got int64"),
        case("expert_type", {"expert_idx": e.astype(np.int64)}, {}, "input 'expert_idx' must be int32, got int64"),
        case("expert_rank", {"expert_idx": e.reshape(-1)}, {}, "input 'expert_idx' must be 2-D [N, K], got shape [12]"),
        case("expert_rows", {"expert_idx": e[:2]}, {},
             "input 'expert_idx' must have N = 6 rows (x.shape[0]), got shape [2, 2]"),
        case("expert_k", {"expert_idx": e[:, :0], "row_idx": row[:, :0]}, {},
             "input 'expert_idx' must have K >= 1, got shape [6, 0]"),
        case("row_shape", {"row_idx": row[:, :1]}, {},
             "input 'row_idx' must have the shape of expert_idx [6, 2], got shape [6, 1]"),
        case("expert_negative", {"expert_idx": _with(e, (2, 1), -1)}, {},
             "input 'expert_idx' must hold expert ids in [0, 2147483647), got -1 at [2, 1]"),
        case("row_range", {"row_idx": _with(row, (3, 0), 12)}, {},
             "input 'row_idx' must be a permutation of [0, N*K) = [0, 12), got 12 at [3, 0]"),
        case("row_repeat", {"row_idx": _with(row, (4, 1), 1)}, {},
             "input 'row_idx' must be a permutation of [0, N*K) = [0, 12), got 1 at [4, 1]"),
    ]
