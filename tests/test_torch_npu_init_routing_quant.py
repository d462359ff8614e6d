"""npu_moe_init_routing_v2's Ascend950 modes in the torch_npu stand-in (MXFP8 RoundScale, FP8 group
and per-block, HiFloat8, MXFP4, int4; float8 / float4 / hifloat8 x routed as they are; a batch of 0
rows) against NumPy statements of op-plugin's definitions and its test's goldens, torch_npu's
refusals, and the export (MoeInitRoutingV3 then standard ONNX) run in ONNX Runtime."""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.exporters.torch_npu import routing_quant

# --------------------------------------------------------------------------------------------
# NumPy statements
# --------------------------------------------------------------------------------------------

FP8 = {"e5m2": (57344.0, ml_dtypes.float8_e5m2, torch.float8_e5m2),
       "e4m3": (448.0, ml_dtypes.float8_e4m3fn, torch.float8_e4m3fn)}
MODE_TYPE = {2: "e5m2", 3: "e4m3", 16: "e5m2", 17: "e4m3", 4: "e5m2", 5: "e4m3", 14: "e5m2", 15: "e4m3",
             11: "e5m2", 12: "e4m3"}


def _route_np(x: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dropless routing over every expert: (source token of each sorted row, sorted pair index)."""
    pairs = np.argsort(np.asarray(idx).reshape(-1), kind="stable")
    return pairs // idx.shape[1], pairs


def _round_scale_exp(amax: np.ndarray, vmax: float) -> np.ndarray:
    """ceil(log2(amax / vmax)) exactly (frexp), at least -126."""
    m, e = np.frexp((amax / np.float32(vmax)).astype(np.float32))
    return np.maximum(np.where(m == 0.5, e - 1, e), -126)


def _blocks_np(v: np.ndarray, block: int) -> np.ndarray:
    pad = -v.shape[1] % block
    return np.pad(v, ((0, 0), (0, pad))).reshape(v.shape[0], -1, block)


def _mxfp8_np(rows: np.ndarray, kind: str, floor: bool, fp16: bool):
    vmax, np_t, _ = FP8[kind]
    b = _blocks_np(rows.astype(np.float32), 32)
    a = np.abs(b)
    if fp16:  # amax of the values cut to bfloat16 (the low 16 bits of float32 cleared)
        a = (a.view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)
    amax = a.max(-1)
    if floor:
        amax = np.maximum(amax, np.float32(1e-4))
    e = _round_scale_exp(amax, vmax)
    y = (b * np.where(amax > 0, np.exp2(-e.astype(np.float64)), 0)[..., None]).reshape(rows.shape[0], -1)
    bits = np.where(amax > 0, e + 127, 255)
    bits = np.pad(bits, ((0, 0), (0, bits.shape[1] % 2)), constant_values=255).astype(np.uint8)
    return y[:, :rows.shape[1]].astype(np.float32).astype(np_t), bits


def _group_np(rows: np.ndarray, kind: str, floor: bool):
    vmax, np_t, _ = FP8[kind]
    b = _blocks_np(rows.astype(np.float32), 128)
    amax = np.abs(b).max(-1)
    if floor:
        amax = np.maximum(amax, np.float32(1e-4))
    scale = np.where(amax > 0, np.exp2(_round_scale_exp(amax, vmax).astype(np.float64)), 0).astype(np.float32)
    y = (b / np.where(scale > 0, scale, 1)[..., None]).reshape(rows.shape[0], -1)[:, :rows.shape[1]]
    return np.clip(y, -vmax, vmax).astype(np.float32).astype(np_t), scale


def _per_block_np(rows: np.ndarray, kind: str):
    vmax, np_t, _ = FP8[kind]
    b = _blocks_np(rows.astype(np.float32), 128)
    scale = (np.abs(b).max(-1) / np.float32(vmax)).astype(np.float32)
    scale[scale < np.finfo(np.float32).tiny] = 0
    with np.errstate(divide="ignore", invalid="ignore"):
        y = np.nan_to_num(np.clip(b / scale[..., None], -vmax, vmax), nan=0.0)
    y = y.reshape(rows.shape[0], -1)[:, :rows.shape[1]].astype(np.float32).astype(np_t)
    return y, np.pad(scale, ((0, 0), (0, scale.shape[1] % 2))).reshape(rows.shape[0], -1, 2)


def _hif8_values() -> np.ndarray:
    """float64 value of each HiFloat8 code, read from its bit string (sign, dot, exponent, mantissa)."""
    out = np.zeros(256)
    for code in range(256):
        bits = f"{code:08b}"
        sign, rest = (-1.0 if bits[0] == "1" else 1.0), bits[1:]
        if code == 0x80:
            out[code] = np.nan
            continue
        dot, width = next((d, w) for d, w in (("11", 4), ("10", 3), ("01", 2), ("001", 1), ("0001", 0),
                                              ("0000", None)) if rest.startswith(d))
        tail = rest[len(dot):]
        if width is None:  # subnormal: 2^(m - 23), m = 0 is zero
            m = int(tail, 2)
            out[code] = sign * (2.0 ** (m - 23) if m else 0.0)
            continue
        if width == 0:
            e = 0
        else:  # exponent field: its sign, then |e| below the implicit leading 1
            mag = (1 << (width - 1)) | int(tail[1:width] or "0", 2)
            e = -mag if tail[0] == "1" else mag
        mbits = tail[width:]
        out[code] = sign * 2.0 ** e * (1 + int(mbits, 2) / 2 ** len(mbits))
    out[0x6F], out[0xEF] = np.inf, -np.inf
    return out


HIF8 = _hif8_values()


def _hif8_np(v: np.ndarray) -> np.ndarray:
    """Nearest code, ties away from zero; Inf sits where 1.5 · 2^15 would (so 1.25 · 2^15 and up -> Inf)."""
    pos = np.arange(0x80)
    mags = np.where(np.isinf(HIF8[pos]), 1.5 * 2.0 ** 15, HIF8[pos])
    a = np.abs(v.astype(np.float64))[..., None]
    dist = np.abs(a - mags)
    best = dist.min(-1, keepdims=True)
    # among equally near codes the larger magnitude (ties away)
    code = np.where(dist == best, mags, -1.0).argmax(-1)
    return np.where((v < 0) & (code > 0), code | 0x80, code).astype(np.uint8)


def _int4_np(rows: np.ndarray, smooth: np.ndarray | None):
    r = rows.astype(np.float32) * (1 if smooth is None else smooth.reshape(1, -1))
    scale = (np.abs(r).max(-1) / 7).astype(np.float32)
    q = np.clip(np.rint(r / np.where(scale > 0, scale, 1)[:, None]), -8, 7).astype(np.int64) & 0xF
    return (q[:, 0::2] | (q[:, 1::2] << 4)).astype(np.uint8), scale


def _inputs(tokens=6, h=300, k=2, experts=8, dtype=torch.bfloat16, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = (torch.randn(tokens, h, generator=g) * 3).to(dtype)
    x[1, :128] = 0  # all-zero blocks
    idx = torch.stack([torch.randperm(experts, generator=g)[:k] for _ in range(tokens)]).to(torch.int32)
    return x, idx


def _call(x, idx, quant_mode, experts=8, **kw):
    return tn.npu_moe_init_routing_v2(x, idx, expert_num=experts, expert_tokens_num_type=1,
                                      expert_tokens_num_flag=True, quant_mode=quant_mode, **kw)


# --------------------------------------------------------------------------------------------
# the modes against the NumPy statements
# --------------------------------------------------------------------------------------------


def test_hifloat8_encoding_matches_the_format_table():
    g = np.random.default_rng(0)
    finite = HIF8[np.isfinite(HIF8)]
    mags = np.unique(np.abs(finite))
    mids = (mags[1:] + mags[:-1]) / 2
    v = np.concatenate([g.standard_normal(4000) * 10.0 ** g.integers(-8, 5, 4000), finite, mids,
                        np.nextafter(mids, 0), np.nextafter(mids, np.inf), -mids,
                        [40960.0, 40959.99, 1e9, 2.0 ** -23, 2.0 ** -24, 0.0, -0.0]]).astype(np.float32)
    want = _hif8_np(v)
    got = routing_quant.hifloat8_codes(torch.from_numpy(v)).numpy()
    np.testing.assert_array_equal(got, want)
    special = routing_quant.hifloat8_codes(torch.tensor([1.0, -1.0, 32768.0, 2.0 ** -22, float("nan"),
                                                         float("-inf")])).tolist()
    assert special == [0x08, 0x88, 0x6E, 0x01, 0x80, 0xEF]


@pytest.mark.parametrize("quant_mode", [2, 3, 16, 17])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mxfp8_round_scale_modes(quant_mode, dtype):
    x, idx = _inputs(dtype=dtype)
    ex, row_idx, counts, scale = _call(x, idx, quant_mode)
    src, _ = _route_np(x, idx)
    want_y, want_bits = _mxfp8_np(x.float().numpy()[src], MODE_TYPE[quant_mode], quant_mode >= 16,
                                  dtype == torch.float16)
    assert ex.dtype == FP8[MODE_TYPE[quant_mode]][2] and ex.shape == (12, 300)
    assert scale.dtype == torch.float8_e8m0fnu and scale.shape == (12, 2 * math.ceil(math.ceil(300 / 32) / 2))
    np.testing.assert_array_equal(ex.view(torch.uint8).numpy(), want_y.view(np.uint8))
    np.testing.assert_array_equal(scale.view(torch.uint8).numpy(), want_bits)
    assert counts.tolist() == np.bincount(idx.numpy().reshape(-1), minlength=8).tolist()


@pytest.mark.parametrize("quant_mode", [4, 5, 14, 15, 11, 12])
def test_fp8_group_and_per_block_modes(quant_mode):
    x, idx = _inputs(h=300)
    ex, _, _, scale = _call(x, idx, quant_mode)
    src, _ = _route_np(x, idx)
    rows = x.float().numpy()[src]
    if quant_mode in (11, 12):
        want_y, want_scale = _per_block_np(rows, MODE_TYPE[quant_mode])
        assert scale.shape == (12, math.ceil(300 / 256), 2)
    else:
        want_y, want_scale = _group_np(rows, MODE_TYPE[quant_mode], quant_mode >= 14)
        assert scale.shape == (12, math.ceil(300 / 128))
    assert ex.dtype == FP8[MODE_TYPE[quant_mode]][2] and scale.dtype == torch.float32
    np.testing.assert_array_equal(ex.view(torch.uint8).numpy(), want_y.view(np.uint8))
    np.testing.assert_array_equal(scale.numpy(), want_scale)


@pytest.mark.parametrize("quant_mode", [6, 7, 8])
@pytest.mark.parametrize("drop_pad_mode", [0, 1])
def test_hifloat8_modes(quant_mode, drop_pad_mode):
    x, idx = _inputs(h=40, dtype=torch.float16)
    x = x * 300  # reaches past 32768 after the per-tensor scale
    smooth = torch.tensor([7.5])
    kw = {"scale": smooth} if quant_mode == 7 else {}
    if drop_pad_mode == 1:
        kw.update(drop_pad_mode=1, expert_capacity=2)
    ex, row_idx, _, scale = _call(x, idx, quant_mode, **kw)
    v = x.float().numpy()
    if quant_mode == 7:
        v = np.clip(v * 7.5, -32768, 32768)
    row_scale = np.abs(v).max(-1) / 32768
    if quant_mode == 8:
        v = np.clip(v / np.where(row_scale > 0, row_scale, 1)[:, None], -32768, 32768)
    codes = _hif8_np(v)
    if drop_pad_mode == 0:
        src, _ = _route_np(x, idx)
        assert ex.dtype == torch.uint8 and ex.shape == (12, 40)
        np.testing.assert_array_equal(ex.numpy(), codes[src])
        if quant_mode == 8:
            np.testing.assert_allclose(scale.numpy(), row_scale[src].astype(np.float32), rtol=0)
    else:  # [E, C, H] int8 (torch_npu's drop/pad buffer) holding the codes; padded slots 0
        assert ex.dtype == torch.int8 and ex.shape == (8, 2, 40)
        slot = row_idx.numpy()
        got = ex.view(torch.uint8).numpy().reshape(16, 40)
        for pair, s in enumerate(slot):
            if s >= 0:
                np.testing.assert_array_equal(got[s], codes[pair // 2])
        assert not got[np.setdiff1d(np.arange(16), slot)].any()


def test_mxfp4_and_int4_modes():
    x, idx = _inputs(h=64, dtype=torch.float32)
    src, _ = _route_np(x, idx)
    ex, _, _, scale = _call(x, idx, 9)
    want_y, want_s = tn.npu_dynamic_mx_quant(x[torch.from_numpy(src)], dst_type=296)
    assert ex.dtype == torch.uint8 and ex.shape == (12, 32) and scale.shape == (12, 1, 2)
    assert torch.equal(ex, want_y) and torch.equal(scale, want_s)
    smooth = torch.rand(1, 64, generator=torch.Generator().manual_seed(2)) + 0.5
    for s in (None, smooth):
        ex, row_idx, counts, scale = _call(x, idx, 13, scale=s, x_dtype=tn.int4)
        want_q, want_scale = _int4_np(x.numpy()[src], None if s is None else s.numpy())
        assert ex.dtype == torch.uint8 and ex.shape == (12, 32) and counts.dtype == torch.int64
        np.testing.assert_array_equal(ex.numpy(), want_q)
        np.testing.assert_allclose(scale.numpy(), want_scale, rtol=1e-6)


def test_float8_and_one_byte_code_x_move_unchanged_with_their_scales():
    x, idx = _inputs(h=100, dtype=torch.float32)
    src, _ = _route_np(x, idx)
    e8m0 = torch.randint(0, 255, (6, 2, 2), dtype=torch.uint8, generator=torch.Generator().manual_seed(1))
    for dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        ex, _, _, scale = _call(x.to(dtype), idx, -1, scale=e8m0.view(torch.float8_e8m0fnu))
        assert ex.dtype == dtype and torch.equal(ex.view(torch.uint8), x.to(dtype).view(torch.uint8)[src])
        assert scale.dtype == torch.uint8 and torch.equal(scale, e8m0[src])
    codes = torch.randint(0, 256, (6, 50), dtype=torch.uint8)
    ex, _, _, scale = _call(codes, idx, -1, x_dtype=tn.float4_e2m1fn_x2, scale=e8m0)
    assert torch.equal(ex, codes[src]) and torch.equal(scale, e8m0[src])  # 50 pairs: H = 100
    per_row = torch.rand(6)
    ex, _, _, scale = _call(codes, idx, -1, x_dtype=tn.hifloat8, scale=per_row)
    assert torch.equal(ex, codes[src]) and torch.equal(scale, per_row[src])


def test_a_batch_of_no_rows_returns_empties():
    # op-plugin returns before the kernel (and its scale checks) when bs == 0
    x, idx = torch.zeros(0, 8192, dtype=torch.bfloat16), torch.zeros(0, 12, dtype=torch.int32)
    ex, row_idx, counts, scale = tn.npu_moe_init_routing_v2(
        x, idx, scale=torch.zeros(0), active_num=0, expert_num=32, expert_tokens_num_type=1,
        expert_tokens_num_flag=True, active_expert_range=[0, 16], quant_mode=1, row_idx_type=1)
    assert ex.shape == (0, 8192) and ex.dtype == torch.int8 and row_idx.shape == (0,)
    assert counts.shape == (16,) and not counts.any() and scale.shape == (0,)
    ex, _, _, scale = _call(x, idx, 3)
    assert ex.dtype == torch.float8_e4m3fn and scale.shape == (0, 256) and scale.dtype == torch.float8_e8m0fnu


# --------------------------------------------------------------------------------------------
# refusals (torch_npu's own checks)
# --------------------------------------------------------------------------------------------


def test_int4_checks_are_torch_npus():
    x, idx = _inputs(h=16, dtype=torch.float32)
    with pytest.raises(RuntimeError, match="quant_mode=13"):
        _call(x, idx, 1, x_dtype=tn.int4)
    with pytest.raises(ValueError, match="argument 'drop_pad_mode'.*only supports drop_pad_mode=0"):
        _call(x, idx, 13, drop_pad_mode=1, expert_capacity=2)
    with pytest.raises(ValueError, match="argument 'x' must be float32 or bfloat16"):
        _call(x.half(), idx, 13)
    with pytest.raises(ValueError, match="argument 'offset'"):
        _call(x, idx, 13, offset=torch.zeros(1))
    with pytest.raises(ValueError, match="argument 'x' must have an even hidden size"):
        _call(x[:, :15], idx, 13)
    with pytest.raises(ValueError, match=r"argument 'scale' must be float32 \[1, 16\]"):
        _call(x, idx, 13, scale=torch.ones(8, 16))
    with pytest.raises(ValueError, match="argument 'x_dtype' must be torch_npu.int4 or None"):
        _call(x, idx, 13, x_dtype=tn.hifloat8)


def test_bad_inputs_to_the_new_modes_are_named():
    x, idx = _inputs(h=64)
    with pytest.raises(ValueError, match=r"argument 'scale' must be float8_e8m0fnu .* \[6, 1, 2\]"):
        _call(x.float().to(torch.float8_e4m3fn), idx, -1, scale=torch.ones(6, 2, 2).to(torch.float8_e8m0fnu))
    with pytest.raises(ValueError, match="argument 'x' must hold one-byte codes"):
        _call(x, idx, -1, x_dtype=tn.hifloat8)
    with pytest.raises(ValueError, match="argument 'scale' is required for HiFloat8 per-tensor"):
        _call(x, idx, 7)
    with pytest.raises(ValueError, match="argument 'x_dtype' must be a torch_npu dtype"):
        _call(x, idx, -1, x_dtype="hifloat8")
    with pytest.raises(NotImplementedError, match="argument 'drop_pad_mode'=1 is not supported"):
        _call(x, idx, 3, drop_pad_mode=1, expert_capacity=2)


# --------------------------------------------------------------------------------------------
# export: MoeInitRoutingV3 (quant_mode -1) and standard ONNX after it, in ONNX Runtime
# --------------------------------------------------------------------------------------------


class _Modes(torch.nn.Module):
    def forward(self, x, idx, tensor_scale, e8m0):
        x = x.to(torch.bfloat16)
        out = []
        for mode in (3, 5, 12, 7, 8, 9):
            ex, row_idx, counts, scale = tn.npu_moe_init_routing_v2(
                x, idx, scale=tensor_scale if mode == 7 else None, expert_num=8, expert_tokens_num_type=1,
                expert_tokens_num_flag=True, quant_mode=mode)
            out += [ex.float() if ex.is_floating_point() else ex, scale]
        out.append(row_idx)
        out.append(counts)
        ex, _, _, scale = tn.npu_moe_init_routing_v2(x.float(), idx, quant_mode=13, expert_num=8, x_dtype=tn.int4)
        out += [ex, scale]
        ex, _, _, scale = tn.npu_moe_init_routing_v2(x.float().to(torch.float8_e4m3fn), idx, scale=e8m0,
                                                     expert_num=8)
        out += [ex.float(), scale]
        return tuple(out)


def test_the_modes_export_and_match_in_onnx_runtime(library_path):
    model = _Modes().eval()
    tokens = Dim("tokens", min=2)
    x, idx = _inputs(tokens=5, h=300)
    e8m0 = torch.randint(0, 255, (5, 5, 2), dtype=torch.uint8)
    args = (x.float(), idx, torch.tensor([3.0]), e8m0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, args, dynamic_shapes=({0: tokens}, {0: tokens}, None, {0: tokens}))
    routing = [n for n in proto.graph.node if n.op_type == "MoeInitRoutingV3"]
    assert routing and {a.i for n in routing for a in n.attribute if a.name == "quant_mode"} == {-1}
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx", "ascend.moe"}
    so = ort.SessionOptions()
    so.register_custom_ops_library(library_path)
    sess = ort.InferenceSession(proto.SerializeToString(), so)
    names = [i.name for i in proto.graph.input]
    for t, seed in ((5, 0), (9, 1)):
        x, idx = _inputs(tokens=t, h=300, seed=seed)
        e8m0 = torch.randint(0, 255, (t, 5, 2), dtype=torch.uint8)
        feeds = (x.float().numpy(), idx.numpy(), np.array([3.0], np.float32), e8m0.numpy())
        want = [w.view(torch.uint8) if w.dtype == torch.float8_e8m0fnu else w
                for w in model(x.float(), idx, args[2], e8m0)]
        got = sess.run(None, dict(zip(names, feeds)))
        for i, (a, b) in enumerate(zip(got, want)):
            np.testing.assert_array_equal(np.asarray(a).astype(b.numpy().dtype), b.numpy(), err_msg=f"output {i}")


class _Float8Rows(torch.nn.Module):
    def forward(self, x, idx):
        ex, _, _, _ = tn.npu_moe_init_routing_v2(x.to(torch.float8_e4m3fn), idx, expert_num=8)
        return ex.float()


def test_float8_rows_move_with_their_bits_in_onnx_runtime(library_path):
    """Every byte moves: negative zeros too (a Where over the gathered rows would give +0)."""
    x, idx = _inputs(tokens=5, h=64, dtype=torch.float32)
    x[:, :2] = torch.tensor([-0.0, 0.0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(_Float8Rows(), (x, idx))
    so = ort.SessionOptions()
    so.register_custom_ops_library(library_path)
    got = ort.InferenceSession(proto.SerializeToString(), so).run(
        None, dict(zip([i.name for i in proto.graph.input], (x.numpy(), idx.numpy()))))[0]
    want = _Float8Rows()(x, idx).numpy()
    assert np.signbit(want).any()
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
