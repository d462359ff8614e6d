"""MXFP8 linear layers as the recipes' MxFp8LinearMethod runs them (the Hy3-MXFP4 shared expert):
``npu_quant_matmul``'s MX form (aclnnQuantMatmulV5's formula) and the recipes' own
``torch.ops.custom.npu_swiglu_group_quant`` (its doc's example golden), eagerly, refused with the
argument named, and exported as standard ONNX that ONNX Runtime runs alike."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from ascend_moe_onnx.exporters import torch_npu as tn
from tests.ort_values import run

tn.install()
E8M0 = tn.float8_e8m0fnu


def _mx_operands(m, n, k, seed):
    g = torch.Generator().manual_seed(seed)
    x1 = (torch.randn(m, k, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    x2 = (torch.randn(k, n, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
    s1 = torch.randint(110, 130, (m, -(-k // 64), 2), generator=g, dtype=torch.int64).to(torch.uint8)
    s2 = torch.randint(110, 130, (-(-k // 64), n, 2), generator=g, dtype=torch.int64).to(torch.uint8)
    return x1, x2, s1, s2


def _quant_matmul_np(x1, x2, s1, s2):
    """aclnnQuantMatmulV5, MX: Σ_j (Σ_{k in block j} x1·x2) · x1Scale[m, j] · x2Scale[j, n], float64."""
    a, b = x1.float().double().numpy(), x2.float().double().numpy()
    e1 = s1.reshape(s1.shape[0], -1).double().numpy() - 127
    e2 = s2.permute(1, 0, 2).reshape(s2.shape[1], -1).double().numpy() - 127   # [N, blocks]
    out = np.zeros((a.shape[0], b.shape[1]))
    for j in range(-(-a.shape[1] // 32)):
        part = a[:, 32 * j:32 * (j + 1)] @ b[32 * j:32 * (j + 1)]
        out += part * 2.0 ** e1[:, j:j + 1] * 2.0 ** e2[:, j][None, :]
    return out


@pytest.mark.parametrize("k", [64, 96])
def test_quant_matmul_mx_is_aclnn_quant_matmul_v5s_block_sum(k):
    x1, x2, s1, s2 = _mx_operands(5, 24, k, k)
    out = tn.npu_quant_matmul(x1, x2, s2, pertoken_scale=s1, output_dtype=torch.float32, scale_dtype=E8M0,
                              pertoken_scale_dtype=E8M0, group_sizes=[1, 1, 32])
    np.testing.assert_allclose(out.numpy(), _quant_matmul_np(x1, x2, s1, s2), rtol=1e-5, atol=1e-30)
    bias = torch.randn(24)
    bf = tn.npu_quant_matmul(x1, x2, s2.view(torch.float8_e8m0fnu), pertoken_scale=s1.view(torch.float8_e8m0fnu),
                             bias=bias, output_dtype=torch.bfloat16, group_sizes=[1, 1, 32])
    assert bf.dtype == torch.bfloat16 and torch.equal(bf, (out + bias).to(torch.bfloat16))


@pytest.mark.parametrize("change, arg", [
    (dict(x1=torch.ones(5, 64, dtype=torch.int8)), "x1"),
    (dict(x2=torch.ones(64, 24, dtype=torch.int8)), "x2"),
    (dict(x2=torch.ones(32, 24).to(torch.float8_e4m3fn)), "x2"),
    (dict(scale=torch.ones(24, 1, 2, dtype=torch.uint8)), "scale"),
    (dict(scale=torch.ones(1, 24, 2)), "scale"),
    (dict(pertoken_scale=None), "pertoken_scale"),
    (dict(pertoken_scale=torch.ones(5, 2, dtype=torch.uint8)), "pertoken_scale"),
    (dict(scale_dtype=tn.float32), "scale_dtype"),
    (dict(group_sizes=[1, 128, 128]), "group_sizes"),
    (dict(output_dtype=None), "output_dtype"),
    (dict(bias=torch.ones(24, dtype=torch.bfloat16)), "bias"),
    (dict(offset=torch.ones(24)), "offset"),
    (dict(x1_dtype=tn.float8_e4m3fn), "x1_dtype"),
])
def test_quant_matmul_refuses_with_the_argument_named(change, arg):
    x1, x2, s1, s2 = _mx_operands(5, 24, 64, 1)
    kw = dict(x1=x1, x2=x2, scale=s2, pertoken_scale=s1, output_dtype=torch.bfloat16, group_sizes=[1, 1, 32])
    kw.update(change)
    with pytest.raises((ValueError, NotImplementedError), match=f"npu_quant_matmul: argument '{arg}'"):
        tn.npu_quant_matmul(kw.pop("x1"), kw.pop("x2"), kw.pop("scale"), **kw)


def _swiglu_group_quant_mx_np(x, clamp_limit=None, weight=None):
    """The recipes' examples/test_npu_swiglu_group_quant.py golden, quant_mode 1: ``(y bits, e8m0 [T, H/32])``."""
    d = x.shape[-1]
    a, b = x[:, :d // 2].astype(np.float32), x[:, d // 2:].astype(np.float32)
    if clamp_limit is not None:
        a = np.minimum(a, clamp_limit)
        b = np.minimum(clamp_limit, np.maximum(b, -clamp_limit))
    y = a / (1 + np.exp(-a)) * b
    if weight is not None:
        y = y * weight.reshape(-1, 1)
    amax = np.maximum(np.abs(y.reshape(-1, 32)).max(-1), 1e-4).astype(np.float32)
    bits = (amax / np.float32(448.0)).view(np.uint32)
    exp = ((bits >> 23) & 0xFF).astype(np.int32) - 127 + ((bits & 0x7FFFFF) != 0)
    inv = ((127 - exp).astype(np.uint32) << 23).view(np.float32)
    q = (y.reshape(-1, 32) * inv[:, None]).astype(ml_dtypes.float8_e4m3fn).reshape(y.shape)
    return q.view(np.uint8), (exp + 127).astype(np.uint8).reshape(y.shape[0], -1)


@pytest.mark.parametrize("clamp_limit, with_weight", [(None, False), (2.0, True)])
def test_swiglu_group_quant_mx_is_the_recipes_golden(clamp_limit, with_weight):
    g = torch.Generator().manual_seed(8)
    x = (torch.randn(6, 512, generator=g) * 3).to(torch.bfloat16)
    x[0, :32] = 0   # a zero block: the 1e-4 floor sets its scale
    weight = torch.rand(6, generator=g) + 0.5 if with_weight else None
    y, scale, origin = torch.ops.custom.npu_swiglu_group_quant(x, weight=weight, dst_type=torch.float8_e4m3fn,
                                                               quant_mode=1, round_scale=True, clamp_limit=clamp_limit,
                                                               output_origin=True)
    want_y, want_scale = _swiglu_group_quant_mx_np(x.float().numpy(), clamp_limit,
                                                   None if weight is None else weight.numpy())
    assert y.dtype == torch.float8_e4m3fn and scale.dtype == torch.float8_e8m0fnu
    assert tuple(scale.shape) == (6, 4, 2) and origin.dtype == torch.bfloat16 and tuple(origin.shape) == (6, 256)
    np.testing.assert_array_equal(y.view(torch.uint8).numpy(), want_y)
    np.testing.assert_array_equal(scale.view(torch.uint8).reshape(6, -1).numpy(), want_scale)


def test_swiglu_group_quant_block_fp8_is_max_over_dtype_max():
    x = (torch.randn(3, 2, 512, generator=torch.Generator().manual_seed(9)) * 2).to(torch.float16)
    y, scale, _ = torch.ops.custom.npu_swiglu_group_quant(x, dst_type=torch.float8_e5m2, quant_mode=0)
    a, b = x.float().chunk(2, -1)
    v = torch.nn.functional.silu(a) * b
    want = v.reshape(3, 2, 2, 128).abs().amax(-1) / 57344.0
    assert scale.dtype == torch.float32 and torch.equal(scale, want)
    assert torch.equal(y, (v.reshape(3, 2, 2, 128) / want[..., None]).reshape(3, 2, 256).to(torch.float8_e5m2))


@pytest.mark.parametrize("change, arg", [
    (dict(x=torch.randn(4, 128, dtype=torch.bfloat16)), "x"),
    (dict(x=torch.randn(4, 384, dtype=torch.bfloat16)), "x"),
    (dict(x=torch.randn(4, 256)), "x"),
    (dict(dst_type=torch.int8), "dst_type"),
    (dict(quant_mode=2), "quant_mode"),
    (dict(round_scale=False), "round_scale"),
    (dict(block_size=128), "block_size"),
    (dict(clamp_limit=-1.0), "clamp_limit"),
    (dict(weight=torch.ones(3)), "weight"),
    (dict(group_index=torch.tensor([1, 2], dtype=torch.int32)), "group_index"),
])
def test_swiglu_group_quant_refuses_with_the_argument_named(change, arg):
    kw = dict(x=torch.randn(4, 256, dtype=torch.bfloat16), dst_type=torch.float8_e4m3fn, quant_mode=1,
              round_scale=True)
    kw.update(change)
    with pytest.raises((ValueError, RuntimeError), match=f"npu_swiglu_group_quant: argument '{arg}'"):
        torch.ops.custom.npu_swiglu_group_quant(kw.pop("x"), **kw)


class _MxFp8Mlp(torch.nn.Module):
    """The recipes' MXFP8 shared-expert MLP on the prefill path: MX quant, gate-up quant matmul, the
    custom SwiGLU group quant, down quant matmul (weights [K, N] float8, scales [K/64, N, 2])."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(10)
        for name, (k, n) in (("gate_up", (64, 256)), ("down", (128, 64))):
            w = (torch.randn(k, n, generator=g) * 64).clamp(-448, 448).to(torch.float8_e4m3fn)
            s = torch.randint(117, 120, (k // 64, n, 2), generator=g, dtype=torch.int64).to(torch.uint8)
            self.register_buffer(f"{name}_w", w)
            self.register_buffer(f"{name}_s", s)

    def forward(self, x):
        q, qs = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
        h = tn.npu_quant_matmul(q, self.gate_up_w, self.gate_up_s, pertoken_scale=qs, output_dtype=torch.bfloat16,
                                scale_dtype=E8M0, pertoken_scale_dtype=E8M0, group_sizes=[1, 1, 32])
        act, act_scale, _ = torch.ops.custom.npu_swiglu_group_quant(h, dst_type=torch.float8_e4m3fn, quant_mode=1,
                                                                    round_scale=True)
        return tn.npu_quant_matmul(act, self.down_w, self.down_s, pertoken_scale=act_scale,
                                   output_dtype=torch.bfloat16, scale_dtype=E8M0, pertoken_scale_dtype=E8M0,
                                   group_sizes=[1, 1, 32])


def test_mxfp8_mlp_exports_as_standard_onnx_and_matches_in_ort():
    model = _MxFp8Mlp().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(5, 64).to(torch.bfloat16),),
                                 dynamic_shapes=({0: Dim("tokens", min=2)},))
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx"}
    sess = ort.InferenceSession(proto.SerializeToString())
    for tokens in (5, 12):
        x = (torch.randn(tokens, 64, generator=torch.Generator().manual_seed(tokens)) * 2).to(torch.bfloat16)
        (got,) = run(sess, {proto.graph.input[0].name: x.view(torch.uint16).numpy().view(ml_dtypes.bfloat16)})
        np.testing.assert_array_equal(got.view(np.uint16), model(x).view(torch.uint16).numpy())
