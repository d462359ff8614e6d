"""The torch_npu stand-in's int4 / MX quantisation and gated activations (npu_dynamic_quant's
quint4x2 output, npu_dynamic_mx_quant, npu_swiglu_clip_quant, npu_geglu,
_C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list) against NumPy statements of the
Ascend definitions and the documented examples, their refusals, and their export as standard ONNX
run in ONNX Runtime."""

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
from ascend_moe_onnx.exporters.torch_npu import mx_quant

# --------------------------------------------------------------------------------------------
# NumPy statements of the definitions
# --------------------------------------------------------------------------------------------

E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
MX_TYPES = {  # torch_npu dst_type -> (emax, max, NumPy dtype or "e2m1")
    torch.float8_e4m3fn: (8, 448.0, ml_dtypes.float8_e4m3fn),
    tn.mx_quant.FLOAT8_E5M2: (15, 57344.0, ml_dtypes.float8_e5m2),
    tn.mx_quant.FLOAT4_E2M1: (2, 6.0, "e2m1"),
}


def _e2m1_np(v: np.ndarray) -> np.ndarray:
    """Nearest float4_e2m1 code (ties to the even code, saturating), sign bit 8 for negatives."""
    a = np.minimum(np.abs(v), 6.0)
    dist = np.abs(a[..., None] - E2M1)
    best = dist.min(-1, keepdims=True)
    ties = np.isclose(dist, best, rtol=0, atol=0)
    # among equally near codes take the even one (the code with mantissa bit 0)
    idx = np.where(ties & (np.arange(8) % 2 == 0), np.arange(8), 99).min(-1)
    idx = np.where(idx == 99, ties.argmax(-1), idx)
    return idx + 8 * (v < 0)


def _mx_np(x: np.ndarray, dst, block=32, scale_alg=0):
    """aclnnDynamicMxQuant along the last axis: (y values or codes, e8m0 bytes [..., blocks])."""
    emax, vmax, kind = MX_TYPES[dst]
    n = x.shape[-1]
    blocks = -(-n // block)
    v = np.zeros(x.shape[:-1] + (blocks * block,), np.float64)
    v[..., :n] = x
    v = v.reshape(x.shape[:-1] + (blocks, block))
    amax = np.abs(v).max(-1)
    with np.errstate(divide="ignore"):
        if scale_alg == 0:
            e = np.where(amax > 0, np.floor(np.log2(np.where(amax > 0, amax, 1))) - emax, -127)
        else:
            s = amax / vmax
            e = np.where(s > 0, np.ceil(np.log2(np.where(s > 0, s, 1))), -127)
    e = np.clip(e, -127, 127)
    q = (v / 2.0 ** e[..., None]).reshape(x.shape[:-1] + (blocks * block,))[..., :n]
    if kind == "e2m1":
        codes = _e2m1_np(q)
        y = (codes[..., 0::2] + 16 * codes[..., 1::2]).astype(np.uint8)
    else:
        y = np.clip(q, -vmax, vmax).astype(np.float32).astype(kind)
    return y, (e + 127).astype(np.uint8)


def _pack_int4_np(q: np.ndarray) -> np.ndarray:
    """op-plugin's test layout: element 2i in the low nibble of byte i, bytes little-endian in int32."""
    nib = (q.astype(np.int64) & 0xF).astype(np.uint8)
    return (nib[..., 0::2] | (nib[..., 1::2] << 4)).view(np.int32)


# --------------------------------------------------------------------------------------------
# npu_dynamic_quant, int4
# --------------------------------------------------------------------------------------------

def test_dynamic_quant_int4_is_op_plugins_golden_packed_eight_to_an_int32():
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(3, 4, 64, generator=g) * 2).to(torch.float16)
    x[1, 2] = 0
    y, scale = tn.npu_dynamic_quant(x, dst_type=torch.quint4x2)
    r = x.float().numpy()
    want_s = np.abs(r).max(-1) / np.float32(7)
    with np.errstate(divide="ignore", invalid="ignore"):
        want_q = np.where(want_s[..., None] > 0, np.rint(r / np.where(want_s > 0, want_s, 1)[..., None]), 0)
    assert y.dtype == torch.int32 and tuple(y.shape) == (3, 4, 8)
    np.testing.assert_array_equal(y.numpy(), _pack_int4_np(want_q))
    np.testing.assert_array_equal(scale.numpy(), want_s.astype(np.float32))
    # unpacked as op-plugin's convert_int4_to_int8 does: low nibble first
    raw = y.numpy().view(np.uint8).reshape(3, 4, 32)
    lo, hi = (raw & 0xF).astype(np.int8), (raw >> 4).astype(np.int8)
    unpacked = np.stack([np.where(lo > 7, lo - 16, lo), np.where(hi > 7, hi - 16, hi)], -1).reshape(3, 4, 64)
    np.testing.assert_array_equal(unpacked, want_q)
    # smoothing applies before the int4 step as before the int8 one
    smooth = torch.rand(64, generator=g) + 0.5
    y2, s2 = tn.npu_dynamic_quant(x, smooth_scales=smooth, dst_type=16)
    assert torch.equal(s2, tn.npu_dynamic_quant(x.float() * smooth)[1] * 127 / 7)


# --------------------------------------------------------------------------------------------
# npu_dynamic_mx_quant
# --------------------------------------------------------------------------------------------

def test_mx_quant_documented_example():
    """aclnnDynamicMxQuant's example: bf16 (0, 8, 64, 512) -> e4m3 (0, 4, 32, 256), scale 2 (e8m0 128),
    the scale pair padded with 0."""
    x = torch.tensor([[0.0, 8.0, 64.0, 512.0]], dtype=torch.bfloat16)
    y, scale = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    assert y.dtype == torch.float8_e4m3fn and y.view(torch.uint8).tolist() == [[0, 72, 96, 120]]
    assert scale.dtype == torch.uint8 and scale.tolist() == [[[128, 0]]]


# (shape, dst_type, block_size, scale_alg, input scale)
MX_CASES = [
    ((4, 64), torch.float8_e4m3fn, 32, 0, 1.0),
    ((2, 3, 96), torch.float8_e4m3fn, 32, 0, 300.0),  # 3 blocks: the scale pair padded
    ((5, 64), 291, 32, 0, 1e-3),  # torch_npu.float8_e5m2
    ((4, 128), torch.float8_e4m3fn, 64, 1, 10.0),
    ((3, 64), 291, 32, 1, 1.0),
    ((4, 64), 296, 32, 0, 1.0),  # torch_npu.float4_e2m1fn_x2
    ((2, 2, 160), 296, 32, 0, 50.0),
    ((3, 40), 296, 32, 0, 1.0),  # a partial last block
]


@pytest.mark.parametrize("shape, dst, block, alg, mag", MX_CASES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_mx_quant_is_the_documented_formula(shape, dst, block, alg, mag, dtype):
    g = torch.Generator().manual_seed(sum(shape))
    x = (torch.randn(shape, generator=g) * mag).to(dtype)
    x.reshape(-1, shape[-1])[0, :block] = 0  # an all-zero block: e8m0 0
    y, scale = tn.npu_dynamic_mx_quant(x, dst_type=dst, block_size=block, scale_alg=alg)
    want_y, want_e = _mx_np(x.float().numpy().astype(np.float64), torch.float8_e4m3fn if dst is torch.float8_e4m3fn
                            else dst, block, alg)
    blocks = math.ceil(shape[-1] / block)
    assert tuple(scale.shape) == (*shape[:-1], (blocks + 1) // 2, 2) and scale.dtype == torch.uint8
    flat = scale.reshape(*shape[:-1], -1).numpy()
    np.testing.assert_array_equal(flat[..., :blocks], want_e)
    assert not flat[..., blocks:].any()
    assert flat.reshape(-1, flat.shape[-1])[0, 0] == 0
    if want_y.dtype == np.uint8:
        assert y.dtype == torch.uint8 and tuple(y.shape) == (*shape[:-1], shape[-1] // 2)
        np.testing.assert_array_equal(y.numpy(), want_y)
    else:
        np.testing.assert_array_equal(y.view(torch.uint8).numpy(), want_y.view(np.uint8))


# npu_swiglu_mx_quant (W4A8MxFp4MoEGMMMethod's activation between its two grouped matmuls)


def test_swiglu_mx_quant_is_op_plugins_golden():
    """op-plugin test_npu_swiglu_mx_quant: bf16 ones [4, 8], the defaults (float4_e2m1, right half
    activated) give the code pair 0x77 (6, 6) and e8m0 124 padded with 0."""
    y, scale = tn.npu_swiglu_mx_quant(torch.ones(4, 8, dtype=torch.bfloat16))
    assert y.dtype == torch.uint8 and y.tolist() == [[119, 119]] * 4
    assert scale.dtype == torch.uint8 and scale.tolist() == [[[124, 0]]] * 4


@pytest.mark.parametrize("activate_left", [True, False])
@pytest.mark.parametrize("dst, alg", [(torch.float8_e4m3fn, 0), (tn.float8_e4m3fn, 1), (296, 0)])
def test_swiglu_mx_quant_is_swiglu_in_float32_then_mx_quant(activate_left, dst, alg):
    g = torch.Generator().manual_seed(6)
    x = (torch.randn(7, 3, 192, generator=g) * 3).to(torch.bfloat16)
    y, scale = tn.npu_swiglu_mx_quant(x, activate_left=activate_left, dst_type=dst, scale_alg=alg)
    a, b = x.double().numpy()[..., :96], x.double().numpy()[..., 96:]
    act, lin = (a, b) if activate_left else (b, a)
    want_y, want_e = _mx_np(act / (1 + np.exp(-act)) * lin, torch.float8_e4m3fn if dst == tn.float8_e4m3fn else dst,
                            32, alg)
    flat = scale.reshape(7, 3, -1).numpy()   # 3 blocks: the scale pair padded with 0
    np.testing.assert_array_equal(flat[..., :3], want_e)
    assert not flat[..., 3:].any()
    got = y.numpy() if y.dtype == torch.uint8 else y.view(torch.uint8).numpy()
    np.testing.assert_array_equal(got, want_y.view(np.uint8))


@pytest.mark.parametrize("group_mode, group_index", [(0, [2, 0, 3]), (1, [2, 2, 5])])
def test_swiglu_mx_quant_rows_past_the_groups_are_zero(group_mode, group_index):
    x = torch.randn(8, 128, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    y, scale = tn.npu_swiglu_mx_quant(x, group_index=torch.tensor(group_index), group_mode=group_mode,
                                      activate_left=True, dst_type=torch.float8_e4m3fn)
    whole_y, whole_scale = tn.npu_swiglu_mx_quant(x, activate_left=True, dst_type=torch.float8_e4m3fn)
    assert torch.equal(y[:5].view(torch.uint8), whole_y[:5].view(torch.uint8))
    assert torch.equal(scale[:5], whole_scale[:5])
    assert not y[5:].view(torch.uint8).any() and not scale[5:].any()


def test_mx_quant_round_trip_is_within_half_a_step_after_saturation():
    x = torch.randn(8, 64, generator=torch.Generator().manual_seed(3))
    y, scale = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
    back = mx_quant.mx_dequantize(y, scale, mx_quant.E4M3)
    # e4m3 keeps 3 mantissa bits: half a step is 2^-4 of a normal value; subnormals (below 2^-6 of
    # the block scale) have steps of 2^-9 of it
    block_scale = torch.pow(2.0, scale.reshape(8, -1).float() - 127).repeat_interleave(32, dim=-1)[:, :64]
    bound = torch.maximum(x.abs() * 2 ** -4, block_scale * 2 ** -10)
    # OCP's scale leaves max|V| / 2^e in [256, 512): values above 448 saturate
    saturated = torch.maximum(torch.minimum(x, 448 * block_scale), -448 * block_scale)
    assert bool(((back - saturated).abs() <= bound * (1 + 1e-6)).all())
    assert bool((back.abs() < x.abs()).any())  # some did saturate


def test_e2m1_codes_round_half_to_even_and_saturate():
    v = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0, -0.1, -5.0])
    # 0.25 -> 0, 0.75 -> 1.0, 1.25 -> 1.0, 1.75 -> 2.0, 2.5 -> 2, 3.5 -> 4, 5 -> 4, 7 and 100 -> 6
    assert mx_quant.e2m1_codes(v).tolist() == [0, 2, 2, 4, 4, 6, 6, 7, 7, 8, 14]


# --------------------------------------------------------------------------------------------
# npu_swiglu_clip_quant, npu_geglu, the fused w8a8 op of vllm-ascend
# --------------------------------------------------------------------------------------------

def _swiglu_clip_quant_np(x, counts, alpha, activate_left):
    """cann-recipes-infer's golden (ops/ascendc/examples/test_npu_swiglu_clip_quant.py), group by group."""
    rows, width = x.shape
    y, s = np.zeros((rows, width // 2), np.int8), np.zeros(rows, np.float32)
    start = 0
    for n, a in zip(counts, alpha):
        part = x[start:start + n].astype(np.float32)
        left, right = np.split(part, 2, axis=1)
        act, lin = (left, right) if activate_left else (right, left)
        out = act / (1 + np.exp(-act)) * lin
        m = np.abs(out).max(-1) * np.float32(a)
        out = np.clip(out, -m[:, None], m[:, None])
        sc = m / np.float32(127)
        y[start:start + n] = np.clip(np.rint(out / sc[:, None]), -128, 127)
        s[start:start + n] = sc
        start += n
    return y, s


@pytest.mark.parametrize("activate_left", [True, False])
def test_swiglu_clip_quant_is_the_recipes_golden(activate_left):
    g = torch.Generator().manual_seed(4)
    x = (torch.randn(12, 64, generator=g) * 4).to(torch.bfloat16)
    counts, alpha = torch.tensor([3, 0, 5, 2]), torch.tensor([0.12, 0.5, 0.93, 1.0])
    y, s = tn.npu_swiglu_clip_quant(x, counts, alpha, activate_left=activate_left)
    want_y, want_s = _swiglu_clip_quant_np(x.float().numpy(), counts.tolist(), alpha.tolist(), activate_left)
    diff = np.abs(y.numpy().astype(np.int32) - want_y.astype(np.int32))
    assert diff.max() <= 1 and (diff > 0).mean() <= 0.02
    np.testing.assert_allclose(s.numpy(), want_s, rtol=1e-5)
    assert not y[10:].any() and not s[10:].any()  # past the groups


@pytest.mark.parametrize("approximate", [0, 1])
@pytest.mark.parametrize("activate_left", [True, False])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_geglu_is_the_documented_formula(approximate, activate_left, dtype):
    g = torch.Generator().manual_seed(5)
    x = torch.randn(3, 4, 16, generator=g).to(dtype)
    out, gelu = tn.npu_geglu(x, dim=-1, approximate=approximate, activate_left=activate_left)
    a, b = x.float().numpy()[..., :8], x.float().numpy()[..., 8:]
    act, lin = (a, b) if activate_left else (b, a)
    if approximate:
        want_g = 0.5 * act * (1 + np.tanh(np.sqrt(2 / np.pi) * (act + 0.044715 * act ** 3)))
    else:
        from math import erf
        want_g = 0.5 * act * (1 + np.vectorize(erf)(act / np.sqrt(2)))
    tol = 1e-6 if dtype == torch.float32 else 1e-2
    assert out.dtype == dtype and gelu.dtype == dtype and tuple(out.shape) == (3, 4, 8)
    np.testing.assert_allclose(gelu.float().numpy(), want_g, rtol=tol, atol=tol)
    np.testing.assert_allclose(out.float().numpy(), want_g * lin, rtol=tol, atol=tol)
    out0, _ = tn.npu_geglu(x, dim=0, approximate=approximate, activate_left=activate_left) if x.shape[0] % 2 == 0 \
        else tn.npu_geglu(x.transpose(0, 2), dim=0, approximate=approximate, activate_left=activate_left)
    assert out0.shape[0] == 8


@pytest.mark.parametrize("limit", [0.0, 3.0])
def test_c_ascend_gmm_swiglu_quant_nz_list_is_gmm_then_dequant_swiglu_quant(limit):
    tn.install()
    g = torch.Generator().manual_seed(6)
    x = torch.randint(-128, 128, (9, 16), generator=g, dtype=torch.int8)
    ws = [torch.randint(-128, 128, (16, 12), generator=g, dtype=torch.int8) for _ in range(3)]
    scales = [torch.rand(12, generator=g) * 1e-2 for _ in range(3)]
    pts = torch.rand(9, generator=g)
    cumsum = torch.tensor([4, 4, 7])
    y, s, off = torch.ops._C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list(
        x=x, weight=ws, weight_scale=scales, x_scale=pts, group_list=cumsum, swiglu_limit=limit)
    acc = np.zeros((9, 12))
    for e, (lo, hi) in enumerate(((0, 4), (4, 4), (4, 7))):
        acc[lo:hi] = x[lo:hi].numpy().astype(np.int64) @ ws[e].numpy().astype(np.int64) * scales[e].double().numpy()
    acc[:7] *= pts[:7, None].double().numpy()
    gate, up = acc[:, :6], acc[:, 6:]
    if limit:
        gate, up = np.minimum(gate, limit), np.clip(up, -limit, limit)
    act = gate / (1 + np.exp(-gate)) * up
    want_s = np.abs(act).max(-1) / 127
    want_s[7:] = 0
    np.testing.assert_allclose(s.numpy(), want_s, rtol=1e-5)
    with np.errstate(invalid="ignore", divide="ignore"):
        want_y = np.where(want_s[:, None] > 0, np.rint(act / want_s[:, None]), 0)
    assert np.abs(y.numpy() - want_y).max() <= 1 and off.numel() == 0
    assert not y[7:].any()


@pytest.mark.parametrize("name", ["grouped_matmul_swiglu_quant", "grouped_matmul_swiglu_quant_weight_nz"])
def test_c_ascend_one_tensor_gmm_swiglu_quant_is_the_tensor_list_op(name):
    """vllm-ascend's w8a8 MLP calls the one-tensor form (weight [E, K, N], weight_scale [E, N]):
    the same computation as the tensor-list op, per vllm-ascend's GroupedMatmulSwigluQuant docs."""
    tn.install()
    g = torch.Generator().manual_seed(12)
    x = torch.randint(-128, 128, (9, 16), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (3, 16, 12), generator=g, dtype=torch.int8)
    scale = torch.rand(3, 12, generator=g) * 1e-2
    pts = torch.rand(9, generator=g)
    cumsum = torch.tensor([4, 4, 7])
    got = getattr(torch.ops._C_ascend, name)(x=x, weight=w, weight_scale=scale, x_scale=pts, group_list=cumsum)
    want = torch.ops._C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list(
        x=x, weight=list(w), weight_scale=list(scale), x_scale=pts, group_list=cumsum)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1]) and got[2].numel() == 0
    with pytest.raises(ValueError, match=": argument 'weight'"):
        getattr(torch.ops._C_ascend, name)(x=x, weight=w[0], weight_scale=scale, x_scale=pts, group_list=cumsum)


# --------------------------------------------------------------------------------------------
# refusals
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, arg", [
    (lambda x: tn.npu_dynamic_quant(x[:, :6], dst_type=torch.quint4x2), "input"),
    (lambda x: tn.npu_dynamic_quant(x, dst_type=torch.int16), "dst_type"),
    (lambda x: tn.npu_dynamic_mx_quant(x, dst_type=torch.int8), "dst_type"),
    (lambda x: tn.npu_dynamic_mx_quant(x, dst_type=297), "dst_type"),
    (lambda x: tn.npu_dynamic_mx_quant(x, dst_type=290), "dst_type"),
    (lambda x: tn.npu_dynamic_mx_quant(x, block_size=48), "block_size"),
    (lambda x: tn.npu_dynamic_mx_quant(x, block_size=2048), "block_size"),
    (lambda x: tn.npu_dynamic_mx_quant(x, axis=2), "axis"),
    (lambda x: tn.npu_dynamic_mx_quant(x, axis=0), "axis"),
    (lambda x: tn.npu_dynamic_mx_quant(x, scale_alg=3), "scale_alg"),
    (lambda x: tn.npu_dynamic_mx_quant(x, scale_alg=1), "scale_alg"),  # float4 takes 0 only
    (lambda x: tn.npu_dynamic_mx_quant(x, round_mode="floor"), "round_mode"),
    (lambda x: tn.npu_dynamic_mx_quant(x, dst_type_max=6.0), "dst_type_max"),
    (lambda x: tn.npu_dynamic_mx_quant(x.int()), "input"),
    (lambda x: tn.npu_dynamic_mx_quant(x[:, :7], dst_type=296), "input"),
    (lambda x: tn.npu_swiglu_clip_quant(x, torch.tensor([4]), torch.tensor([0.5]), quant_mode=0), "quant_mode"),
    (lambda x: tn.npu_swiglu_clip_quant(x, torch.tensor([4]), torch.tensor([0.5]), clamp_mode=0), "clamp_mode"),
    (lambda x: tn.npu_swiglu_clip_quant(x[:, :7], torch.tensor([4]), torch.tensor([0.5])), "x"),
    (lambda x: tn.npu_swiglu_clip_quant(x, torch.tensor([4]), torch.tensor([0.5, 1.0])), "group_alpha"),
    (lambda x: tn.npu_swiglu_mx_quant(x), "x"),  # float32: the operator takes float16 / bfloat16
    (lambda x: tn.npu_swiglu_mx_quant(x.half()[0]), "x"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half()[:, :62]), "x"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), activate_dim=0), "activate_dim"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), axis=-2), "axis"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), swiglu_mode=1), "swiglu_mode"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), swiglu_mode=2), "swiglu_mode"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), group_mode=2), "group_mode"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), scale_alg=2), "scale_alg"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), dst_type=torch.int8), "dst_type"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), group_index=torch.tensor([[0, 4]])), "group_index"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), group_index=torch.tensor([4], dtype=torch.int32)), "group_index"),
    (lambda x: tn.npu_swiglu_mx_quant(x.half(), group_index=torch.ones(257, dtype=torch.int64)), "group_index"),
    (lambda x: tn.npu_geglu(x, dim=2), "dim"),
    (lambda x: tn.npu_geglu(x[:, :7]), "self"),
    (lambda x: tn.npu_geglu(x, approximate=2), "approximate"),
])
def test_new_quant_and_activation_functions_refuse_with_the_argument_named(call, arg):
    x = torch.randn(4, 64)
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        call(x)


def test_swiglu_clip_quant_refuses_key_value_group_index_as_its_operator_does():
    # the recipes' TP w4a8 branch passes init routing's key-value [E, 2] counts; SwigluClipQuant's
    # tiling refuses a group_index of rank != 1 (count mode only)
    pairs = torch.tensor([[0, 3], [1, 1]])
    with pytest.raises(ValueError, match=r"argument 'group_index' must be 1-D counts \[G\] \(count mode only"):
        tn.npu_swiglu_clip_quant(torch.randn(4, 64, dtype=torch.bfloat16), pairs, torch.tensor([0.5, 1.0]))


# --------------------------------------------------------------------------------------------
# export: standard ONNX, ONNX Runtime
# --------------------------------------------------------------------------------------------

class _QuantFormats(torch.nn.Module):
    """int4 dynamic quant, MXFP8 and MXFP4, swiglu clip quant and geglu in one graph."""

    def __init__(self):
        super().__init__()
        self.alpha = torch.nn.Parameter(torch.tensor([0.5]), requires_grad=False)

    def forward(self, x):
        q4, s4 = tn.npu_dynamic_quant(x, dst_type=torch.quint4x2)
        m8, e8 = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
        m4, e4 = tn.npu_dynamic_mx_quant(x, dst_type=296)
        counts = (x[:, :1].abs() >= 0).to(torch.int64).sum().reshape(1)  # every row in one group
        yc, sc = tn.npu_swiglu_clip_quant(x, counts, self.alpha, activate_left=True)
        gg, _ = tn.npu_geglu(x, approximate=1)
        return q4, s4, m8.float(), e8, m4, e4, yc, sc, gg


def test_quant_formats_export_as_standard_onnx_and_run_in_onnx_runtime():
    model = _QuantFormats().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(5, 64),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx"}
    sess = ort.InferenceSession(proto.SerializeToString())
    for tokens in (5, 11):
        x = torch.randn(tokens, 64, generator=torch.Generator().manual_seed(tokens)) * 3
        want = [t.numpy() for t in model(x)]
        got = sess.run(None, {proto.graph.input[0].name: x.numpy()})
        for i, (a, b) in enumerate(zip(got, want)):
            if b.dtype.kind == "f" and i == 8:
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
            elif i == 6:  # int8 of swiglu: the float steps before rounding may differ by ulps
                assert np.abs(a.astype(np.int32) - b.astype(np.int32)).max() <= 1
            elif i == 7:
                np.testing.assert_allclose(a, b, rtol=1e-5)
            else:
                np.testing.assert_array_equal(a, b, err_msg=f"output {i}")


class _SwigluMx(torch.nn.Module):
    def forward(self, x, counts):
        y, scale = tn.npu_swiglu_mx_quant(x, group_index=counts, activate_left=True, dst_type=tn.float8_e4m3fn)
        return y, scale


def test_swiglu_mx_quant_exports_as_standard_onnx_and_matches_in_ort():
    from tests.ort_values import run
    model = _SwigluMx().eval()
    x = torch.randn(6, 128).to(torch.bfloat16)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (x, torch.tensor([2, 3])), dynamic_shapes=({0: Dim("tokens", min=2)}, None))
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx"}
    sess = ort.InferenceSession(proto.SerializeToString())
    for tokens in (6, 13):
        x = (torch.randn(tokens, 128, generator=torch.Generator().manual_seed(tokens)) * 5).to(torch.bfloat16)
        counts = torch.tensor([1, tokens - 3])
        want_y, want_scale = model(x, counts)
        got_y, got_scale = run(sess, {i.name: v for i, v in zip(proto.graph.input, (
            x.view(torch.uint16).numpy().view(ml_dtypes.bfloat16), counts.numpy()))})
        np.testing.assert_array_equal(got_y.view(np.uint8), want_y.view(torch.uint8).numpy())
        np.testing.assert_array_equal(got_scale, want_scale.numpy())


# npu_rms_norm (the routers of cann-recipes-infer's Gemma-4 MoE call it)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_rms_norm_matches_the_operators_formula(dtype):
    g = torch.Generator().manual_seed(3)
    x = (torch.randn(2, 5, 16, generator=g) * 3).to(dtype)
    gamma = torch.rand(16, generator=g).to(dtype)
    y, rstd = tn.npu_rms_norm(x, gamma, epsilon=1e-5)
    xf = x.float()
    want_rstd = 1 / torch.sqrt((xf * xf).mean(-1, keepdim=True) + 1e-5)
    assert rstd.dtype == torch.float32 and rstd.shape == (2, 5, 1)
    torch.testing.assert_close(rstd, want_rstd)
    assert y.dtype == dtype and y.shape == x.shape
    tol = {"rtol": 2e-6, "atol": 1e-6} if dtype == torch.float32 else {"rtol": 8e-3, "atol": 1e-5}  # 1 ulp
    torch.testing.assert_close(y.float(), (xf * want_rstd * gamma.float()).to(dtype).float(), **tol)
    # gamma over the last two axes: rstd keeps the leading axis and 1s for the normalised ones
    y2, rstd2 = tn.npu_rms_norm(x, torch.ones(5, 16, dtype=dtype))
    assert rstd2.shape == (2, 1, 1)
    torch.testing.assert_close(y2.float(), (xf / torch.sqrt((xf * xf).mean((1, 2), keepdim=True) + 1e-6)).to(
        dtype).float(), **tol)


def test_rms_norm_refuses_a_gamma_that_is_not_selfs_trailing_shape():
    with pytest.raises(ValueError, match="npu_rms_norm: argument 'gamma' must have the shape of self's trailing dims"):
        tn.npu_rms_norm(torch.randn(4, 8), torch.ones(4))
    with pytest.raises(ValueError, match="argument 'epsilon'"):
        tn.npu_rms_norm(torch.randn(4, 8), torch.ones(8), epsilon=-1.0)


def test_rms_norm_exports_as_standard_onnx_and_matches_in_ort():
    class Norm(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.gamma = torch.nn.Parameter(torch.rand(16))

        def forward(self, x):
            return tn.npu_rms_norm(x, self.gamma, 1e-6)[0]

    m = Norm().eval()
    x = torch.randn(3, 16)
    proto = exporters.export(m, (x,), dynamic_shapes=({0: Dim("t", min=2)},), input_names=["x"])
    assert not [n for n in proto.graph.node if n.domain not in ("", "ai.onnx")]
    sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
    x2 = torch.randn(7, 16)
    got = sess.run(None, {"x": x2.numpy()})[0]
    torch.testing.assert_close(torch.from_numpy(got), m(x2).detach(), rtol=1e-5, atol=1e-6)
