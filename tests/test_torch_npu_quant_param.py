"""The torch_npu stand-in's packed quantisation parameters: npu_trans_quant_param (op-plugin's
documented bit layout), npu_convert_weight_to_int4pack (op-plugin's nibble order), and
npu_grouped_matmul's w8a8 requantisation to int8 by int64 scales, eagerly and in ONNX Runtime."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters, ort_custom_ops
from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.exporters.torch_npu.quant_param import quant_param_scale


def _bits(values: np.ndarray) -> np.ndarray:
    return np.frombuffer(np.asarray(values, np.float32).tobytes(), np.uint32).astype(np.int64)


def test_trans_quant_param_packs_the_fp19_bits_and_the_flag():
    scale = np.array([0.0123, -3.5, 1e-40, 0.0, 65504.0], np.float32)
    got = tn.npu_trans_quant_param(torch.from_numpy(scale))
    assert got.dtype == torch.int64 and got.shape == (5,)
    np.testing.assert_array_equal(got.numpy(), (_bits(scale) & 0xFFFFE000) | (1 << 46))
    # the docs' formula with an offset: 9 bits of clamp(round(offset), -256, 255) at bit 37
    off = tn.npu_trans_quant_param(torch.tensor([1.0, 2.0]), torch.tensor([3.0, -300.0]))
    np.testing.assert_array_equal(off.numpy(), [0x3F800000 | (1 << 46) | (3 << 37),
                                                0x40000000 | (1 << 46) | ((-256 % 512) << 37)])


def test_trans_quant_param_round_mode_1_rounds_to_fp19_ties_to_even():
    base = 0x3F800000                      # 1.0
    cases = {base | 0x1FFF: base + 0x2000,  # above half of the 13 dropped bits: up
             base | 0x0FFF: base,           # below half: down
             base | 0x1000: base,           # a tie, even kept value: stays
             base | 0x3000: base + 0x4000}  # a tie, odd kept value: up to even
    raw = np.array(list(cases), np.uint32).view(np.float32)
    got = tn.npu_trans_quant_param(torch.from_numpy(raw), round_mode=1).numpy()
    np.testing.assert_array_equal(got & 0xFFFFFFFF, list(cases.values()))
    truncated = tn.npu_trans_quant_param(torch.from_numpy(raw), round_mode=0).numpy()
    np.testing.assert_array_equal(truncated & 0xFFFFFFFF, np.array(list(cases)) & 0xFFFFE000)


def test_quant_param_scale_reads_the_packed_float32_back_exactly():
    g = torch.Generator().manual_seed(3)
    scale = torch.cat([torch.randn(64, generator=g) * 10 ** torch.randint(-8, 8, (64,), generator=g).float(),
                       torch.tensor([0.0, -0.0, 1e-42, -2.5e-39])])
    packed = tn.npu_trans_quant_param(scale)
    want = (_bits(scale.numpy()) & 0xFFFFE000).astype(np.uint32).view(np.float32)
    np.testing.assert_array_equal(quant_param_scale(packed).numpy(), want)


@pytest.mark.parametrize("call, arg", [
    (lambda: tn.npu_trans_quant_param(torch.ones(4), round_mode=2), "round_mode"),
    (lambda: tn.npu_trans_quant_param(torch.ones(4, dtype=torch.float16)), "scale"),
    (lambda: tn.npu_trans_quant_param(torch.ones(2, 3, 4)), "scale"),
    (lambda: tn.npu_trans_quant_param(torch.ones(4), torch.ones(3)), "offset"),
    (lambda: tn.npu_convert_weight_to_int4pack(torch.zeros(4, 12, dtype=torch.int32)), "weight"),
    (lambda: tn.npu_convert_weight_to_int4pack(torch.zeros(4, 8, dtype=torch.int8)), "weight"),
    (lambda: tn.npu_convert_weight_to_int4pack(torch.full((2, 8), 8, dtype=torch.int32)), "weight"),
    (lambda: tn.npu_convert_weight_to_int4pack(torch.zeros(8, 4, dtype=torch.int32).t()), "weight"),
])
def test_packing_helpers_refuse_with_the_argument_named(call, arg):
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        call()


def test_convert_weight_to_int4pack_is_op_plugins_nibble_order():
    g = torch.Generator().manual_seed(4)
    w = torch.randint(-8, 8, (2, 3, 16), generator=g, dtype=torch.int32)
    got = tn.npu_convert_weight_to_int4pack(w)
    assert got.dtype == torch.int32 and got.shape == (2, 3, 2)
    nib = w.numpy().astype(np.int64) & 0xF
    want = sum(nib[..., j::8] << (4 * j) for j in range(8))
    np.testing.assert_array_equal(got.numpy().astype(np.int64) & 0xFFFFFFFF, want)
    assert tn.npu_convert_weight_to_int4pack(w[0]).shape == (3, 2)


def _requant_operands(seed=5, rows=11, k=32, n=8, experts=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-20, 20, (rows, k), generator=g, dtype=torch.int8)
    w = torch.randint(-20, 20, (experts, k, n), generator=g, dtype=torch.int8)
    b = torch.randint(-50, 50, (experts, n), generator=g, dtype=torch.int32)
    scale = torch.rand(experts, n, generator=g) * 0.02 + 0.005
    return x, w, b, scale


def _requant_np(x, w, b, scale, counts):
    """(x @ W[e] + b[e]) · scale[e], rint, saturated to int8, group by group; rows past the groups 0."""
    y = np.zeros((x.shape[0], w.shape[2]), np.int8)
    start = 0
    for e, c in enumerate(counts):
        acc = x[start:start + c].astype(np.int64) @ w[e].astype(np.int64) + b[e]
        y[start:start + c] = np.clip(np.rint(acc.astype(np.float64) * scale[e].astype(np.float64)), -128, 127)
        start += c
    return y


def test_grouped_matmul_int8_output_requantises_by_the_int64_scale():
    x, w, b, scale = _requant_operands()
    packed = tn.npu_trans_quant_param(scale)
    fp19 = quant_param_scale(packed).numpy()
    want = _requant_np(x.numpy(), w.numpy(), b.numpy(), fp19, [3, 0, 6])
    for out_dtype in (None, torch.int8):
        y = tn.npu_grouped_matmul([x], [w], bias=[b], scale=[packed], group_list=torch.tensor([3, 3, 9]),
                                  split_item=3, group_type=0, output_dtype=out_dtype)[0]
        assert y.dtype == torch.int8
        np.testing.assert_array_equal(y.numpy(), want)
    # op-plugin's test form: one [N] parameter tensor per expert, counts as group_list_type=1
    y = tn.npu_grouped_matmul([x], list(w), bias=list(b), scale=list(packed), group_list=[3, 0, 6],
                              group_list_type=1, split_item=3, group_type=0)[0]
    np.testing.assert_array_equal(y.numpy(), want)
    saturating = tn.npu_grouped_matmul([x], [w], scale=[tn.npu_trans_quant_param(scale * 100)],
                                       group_list=torch.tensor([3, 3, 11]), split_item=3, group_type=0)[0]
    assert int(saturating.max()) == 127 and int(saturating.min()) == -128


@pytest.mark.parametrize("kwargs, arg", [
    ({}, "scale"),                                                   # no scale to requantise by
    ({"scale": [torch.ones(3, 8)]}, "scale"),                        # float scale: int64 parameters only
    ({"scale": [torch.ones(3, 8, dtype=torch.int64)], "per_token_scale": [torch.ones(11)]}, "per_token_scale"),
    ({"scale": [torch.ones(3, 8, dtype=torch.int64)], "bias": [torch.ones(3, 8)]}, "bias"),
])
def test_grouped_matmul_int8_output_refuses_with_the_argument_named(kwargs, arg):
    x, w, _, _ = _requant_operands()
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        tn.npu_grouped_matmul([x], [w], group_list=torch.tensor([3, 3, 9]), split_item=3, group_type=0,
                              output_dtype=torch.int8, **kwargs)


class _Requant(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _, w, b, scale = _requant_operands()
        self.w = torch.nn.Parameter(w, requires_grad=False)
        self.b = torch.nn.Parameter(b, requires_grad=False)
        self.register_buffer("scale", tn.npu_trans_quant_param(scale))

    def forward(self, x, counts):
        return tn.npu_grouped_matmul([x], [self.w], bias=[self.b], scale=[self.scale], group_list=counts,
                                     group_list_type=1, split_item=3, group_type=0)[0]


def test_grouped_matmul_int8_output_exports_and_runs_in_onnx_runtime():
    model = _Requant().eval()
    x, _, _, _ = _requant_operands()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (x, torch.tensor([3, 0, 6])),
                                 dynamic_shapes=({0: Dim("tokens", min=2)}, None))
    assert "GroupedMatmul" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for seed, counts in ((5, [3, 0, 6]), (9, [1, 7, 3])):
        xs = _requant_operands(seed, rows=11)[0]
        c = torch.tensor(counts)
        got = sess.run(None, dict(zip(names, (xs.numpy(), c.numpy()))))[0]
        want = model(xs, c)
        assert got.dtype == np.int8
        np.testing.assert_array_equal(got, want.numpy())


def test_convert_weight_to_int4pack_packs_float4_e2m1_codes_from_float32():
    values = torch.tensor([[0.5, -0.5, 6.0, -6.0, 1.5, 0.0, 0.7, -3.0]])
    got = tn.npu_convert_weight_to_int4pack(values)
    assert got.dtype == torch.float32 and got.shape == (1, 1)
    # codes 1, 9, 7, 15, 3, 0, 1 (0.7's bits under 0xFFC00000 are 0.5's), 13; value j in bits 4j..4j+3
    assert int(got.view(torch.int32).item()) & 0xFFFFFFFF == 0xD103F791


def _a8w4_operands(seed=2, rows=10, k=64, n=16, experts=3, groups=2):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-100, 100, (rows, k), generator=g).to(torch.int8)
    w = torch.randint(-8, 8, (experts, k, n), generator=g, dtype=torch.int32)
    bias = torch.rand(experts, n, generator=g) * 10 - 5
    scale = (torch.randn(experts, groups, n, generator=g) * 0.01).to(torch.float16).float()
    packed = torch.from_numpy(_bits(scale.numpy()).reshape(scale.shape))   # float32 bits in bits 0-31
    return x, w, bias, scale, packed, torch.rand(rows, 1, generator=g)


def _a8w4_golden(x, w, bias, scale, pts, counts):
    """op-plugin's A8W4 golden: x split into 16 · (x // 16) and (x & 15) - 8, per K group
    matmul · scale[e, g], the halves recombined, + bias[e], · per_token_scale."""
    rows, k = x.shape
    groups = scale.shape[1]
    xs = x.astype(np.int32)
    halves = np.concatenate([xs.reshape(rows, 1, k) // 16, (xs.reshape(rows, 1, k) & 0x0F) - 8], 1)
    out, start = np.zeros((rows, w.shape[2]), np.float32), 0
    for e, c in enumerate(counts):
        xi = halves[start:start + c].reshape(-1, groups, k // groups)
        wg = w[e].reshape(groups, k // groups, -1)
        mm = sum((xi[:, j] @ wg[j]).astype(np.float32) * scale[e, j] for j in range(groups)).reshape(-1, 2, w.shape[2])
        out[start:start + c] = (mm[:, 0] * 16 + mm[:, 1] + bias[e]) * pts[start:start + c]
        start += c
    return out


def test_grouped_matmul_a8w4_is_op_plugins_golden():
    x, w, bias, scale, packed, pts = _a8w4_operands()
    want = _a8w4_golden(x.numpy(), w.numpy(), bias.numpy(), scale.numpy(), pts.numpy(), [3, 0, 5])
    wq = tn.npu_convert_weight_to_int4pack(w)
    for out_dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 2 ** -8)):
        y = tn.npu_grouped_matmul([x], [wq], bias=[bias], scale=[packed], per_token_scale=[pts],
                                  group_list=torch.tensor([3, 0, 5]), group_list_type=1, split_item=3, group_type=0,
                                  output_dtype=out_dtype)[0]
        assert y.dtype == out_dtype
        np.testing.assert_allclose(y.float().numpy(), want, rtol=tol, atol=tol * np.abs(want).max())
        assert not y[8:].any()                                  # rows past the groups
    # one K group as [E, N] (the recipes' w4a8 scale before its unsqueeze), packed by npu_trans_quant_param
    one = scale[:, :1, :]
    y1 = tn.npu_grouped_matmul([x], [wq], scale=[tn.npu_trans_quant_param(one[:, 0, :])], per_token_scale=[pts],
                               group_list=torch.tensor([3, 3, 8]), split_item=3, group_type=0,
                               output_dtype=torch.float32)[0]
    want1 = _a8w4_golden(x.numpy(), w.numpy(), np.zeros((3, 16), np.float32), one.numpy(), pts.numpy(), [3, 0, 5])
    np.testing.assert_allclose(y1[:8].numpy(), want1[:8], rtol=1e-5, atol=1e-5 * np.abs(want1).max())


@pytest.mark.parametrize("kwargs, arg", [
    ({"scale": [torch.ones(3, 2, 16)]}, "scale"),                                   # float: int64 only
    ({"scale": [torch.ones(3, 3, 16, dtype=torch.int64)]}, "scale"),                # G does not divide K
    ({"per_token_scale": None}, "per_token_scale"),
    ({"bias": [torch.ones(3, 16, dtype=torch.int32)]}, "bias"),
    ({"output_dtype": torch.int32}, "output_dtype"),
    ({"antiquant_scale": [torch.ones(3, 16)]}, "antiquant_scale"),
])
def test_grouped_matmul_a8w4_refuses_with_the_argument_named(kwargs, arg):
    x, w, _, _, packed, pts = _a8w4_operands()
    args = dict(scale=[packed], per_token_scale=[pts], output_dtype=torch.bfloat16)
    args.update(kwargs)
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        tn.npu_grouped_matmul([x], [tn.npu_convert_weight_to_int4pack(w)], group_list=torch.tensor([3, 3, 8]),
                              split_item=3, group_type=0, **args)


class _A8W4(torch.nn.Module):
    def __init__(self):
        super().__init__()
        _, w, bias, _, packed, _ = _a8w4_operands()
        self.w = torch.nn.Parameter(tn.npu_convert_weight_to_int4pack(w), requires_grad=False)
        self.b = torch.nn.Parameter(bias, requires_grad=False)
        self.register_buffer("scale", packed)

    def forward(self, x, pts, counts):
        return tn.npu_grouped_matmul([x], [self.w], bias=[self.b], scale=[self.scale], per_token_scale=[pts],
                                     group_list=counts, group_list_type=1, split_item=3, group_type=0,
                                     output_dtype=torch.float32)[0]


def test_grouped_matmul_a8w4_exports_and_runs_in_onnx_runtime():
    model = _A8W4().eval()
    x, _, _, _, _, pts = _a8w4_operands()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (x, pts, torch.tensor([3, 0, 5])),
                                 dynamic_shapes=({0: Dim("tokens", min=2)}, {0: Dim("tokens", min=2)}, None))
    assert "GroupedMatmul" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for seed, rows, counts in ((2, 10, [3, 0, 5]), (4, 13, [6, 6, 1])):
        xs, _, _, _, _, ps = _a8w4_operands(seed, rows=rows)
        c = torch.tensor(counts)
        got = sess.run(None, dict(zip(names, (xs.numpy(), ps.numpy(), c.numpy()))))[0]
        np.testing.assert_allclose(got, model(xs, ps, c).numpy(), rtol=1e-6, atol=1e-6)
