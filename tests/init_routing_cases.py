"""Shared helpers of the MoeInitRoutingV3 / MoeTokenPermute tests: ONNX models of one node, ORT runs
with or without the library (function body), random cases, bad cases for tests/op_table.py."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
from onnx import helper

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_init_routing_v3 as init_spec
from ascend_moe_onnx.onnx_schemas import moe_token_permute as permute_spec
from ascend_moe_onnx.onnx_schemas.functions import attach_functions
from tests.op_table import BadCase

BF16 = np.dtype(ml_dtypes.bfloat16)
X_DTYPES = {"float": np.float32, "float16": np.float16, "bfloat16": BF16, "int8": np.int8}


def make_model(spec, inputs: dict, attrs: dict, functions: bool = False, opset: int = 20) -> onnx.ModelProto:
    """One ``spec`` node over the present inputs (symbolic dims), outputs left to inference."""
    names = [n if inputs.get(n) is not None else "" for n in spec.INPUT_NAMES]
    while names and names[-1] == "":
        names.pop()
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(inputs[n].dtype),
                                         [f"{n}_{i}" for i in range(inputs[n].ndim)])
           for n in names if n]
    outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in spec.OUTPUT_NAMES]
    node = helper.make_node(spec.OP_TYPE, names, list(spec.OUTPUT_NAMES), domain=spec.DOMAIN, **attrs)
    model = helper.make_model(helper.make_graph([node], spec.OP_TYPE, vis, outputs),
                              opset_imports=[helper.make_opsetid("", opset), onnx_schemas.opset_import()],
                              ir_version=10)
    return attach_functions(model) if functions else model


def run(spec, inputs: dict, attrs: dict, library: bool, threads: int | None = None) -> list[np.ndarray]:
    """The node through ONNX Runtime: the library kernel, or (library False) the function body."""
    from tests import rerouting_cases as rc

    model = make_model(spec, inputs, attrs, functions=not library)
    sess = rc.session(model, library=library, threads=threads)
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


def init_samples() -> list:
    """Valid (inputs, attributes) covering every mode (tests/op_table.py and the agreement tests)."""
    rng = np.random.default_rng(31)
    E = 6
    return [
        (init_inputs(rng, scale="token"), dict(expert_num=E, expert_tokens_num_type=1)),
        (init_inputs(rng, x_type="bfloat16", idx_type=np.int64),
         dict(expert_num=E, active_expert_start=1, active_expert_end=4, row_idx_type=1)),
        (init_inputs(rng, x_type="float16", scale="token"),
         dict(expert_num=E, active_num=9, expert_tokens_num_type=2, active_expert_start=2)),
        (init_inputs(rng, x_type="int8"), dict(expert_num=E, drop_pad_mode=1, expert_capacity=2,
                                                expert_tokens_num_type=1)),
        (init_inputs(rng, scale="smooth", start=1, end=5),
         dict(expert_num=E, quant_mode=1, active_expert_start=1, active_expert_end=5)),
        (init_inputs(rng, x_type="bfloat16"), dict(expert_num=E, quant_mode=1, row_idx_type=1)),
        (init_inputs(rng, scale="one", offset=True), dict(expert_num=E, quant_mode=0)),
        (init_inputs(rng, scale="smooth1"), dict(expert_num=E, quant_mode=1, drop_pad_mode=1, expert_capacity=3,
                                                 expert_tokens_num_type=1)),
        (init_inputs(rng, n=0), dict(expert_num=E, expert_tokens_num_type=2)),
        (init_inputs(rng, n=0, scale="token"), dict(expert_num=E, drop_pad_mode=1, expert_capacity=2,
                                                    expert_tokens_num_type=1)),
    ]


def permute_samples() -> list:
    """Valid (inputs, attributes) of MoeTokenPermute."""
    rng = np.random.default_rng(32)
    t = rng.standard_normal((9, 8)).astype(np.float32)
    return [
        ({"tokens": t, "indices": rng.integers(0, 5, (9, 2)).astype(np.int64)}, {}),
        ({"tokens": t.astype(BF16), "indices": rng.integers(0, 4, (9, 3)).astype(np.int32)},
         dict(num_out_tokens=11)),
        ({"tokens": t.astype(np.float16), "indices": rng.integers(0, 4, (9,)).astype(np.int32)},
         dict(num_out_tokens=-2)),
        ({"tokens": rng.integers(-128, 128, (9, 8)).astype(np.int8),
          "indices": rng.integers(0, 3, (9, 4)).astype(np.int64)}, dict(num_out_tokens=100)),
        ({"tokens": t[:0], "indices": np.zeros((0, 2), np.int32)}, {}),
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
