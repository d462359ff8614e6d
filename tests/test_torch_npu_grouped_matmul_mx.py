"""npu_grouped_matmul's MX form (float8 x with e8m0 block scales, float4_e2m1 weights with e8m0
block scales), against a NumPy statement of the arithmetic: every operand is its MX value
(element · 2^(e8m0 - 127), per block of 32 along K), the products summed per row's expert."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters, ort_custom_ops
from ascend_moe_onnx.exporters import torch_npu as tn

# OCP MX float4_e2m1: code -> value (bit 3 the sign)
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
FP4 = tn.float4_e2m1fn_x2
E8M0 = tn.float8_e8m0fnu


def _operands(seed=0, m=9, k=96, n=12, experts=3):
    """Random MX operands in the layouts the recipes pass: x float8 [M, K] with scales [M, P, 2],
    weight bytes [E, N, K/2] and scales [E, N, P, 2] (P = ceil(K / 64))."""
    g = np.random.default_rng(seed)
    pairs = (-(-k // 32) + 1) // 2
    x = torch.from_numpy(g.uniform(-400, 400, (m, k)).astype(np.float32)).to(torch.float8_e4m3fn)
    x_scale = torch.from_numpy(g.integers(117, 137, (m, pairs, 2)).astype(np.uint8))
    w = torch.from_numpy(g.integers(0, 256, (experts, n, k // 2)).astype(np.uint8))
    w_scale = torch.from_numpy(g.integers(120, 134, (experts, n, pairs, 2)).astype(np.uint8))
    return x, x_scale, w, w_scale


def _reference(x, x_scale, w, w_scale, counts):
    """NumPy: float64 sums of the MX values of x and the weights, rows past the groups 0."""
    k = x.shape[1]
    xv = x.view(torch.uint8).numpy().view(ml_dtypes.float8_e4m3fn).astype(np.float64)
    xs = 2.0 ** (x_scale.numpy().reshape(x.shape[0], -1).astype(np.float64) - 127)
    xv = xv * np.repeat(xs, 32, axis=1)[:, :k]
    b = w.numpy()
    codes = np.stack([b & 0xF, b >> 4], axis=-1).reshape(*b.shape[:2], k)      # [E, N, K]
    ws = 2.0 ** (w_scale.numpy().reshape(*b.shape[:2], -1).astype(np.float64) - 127)
    wv = E2M1[codes] * np.repeat(ws, 32, axis=2)[:, :, :k]
    y = np.zeros((x.shape[0], b.shape[1]))
    start = 0
    for e, c in enumerate(counts):
        y[start:start + c] = xv[start:start + c] @ wv[e].T
        start += c
    return y


def _call(x, x_scale, w, w_scale, counts, output_dtype=torch.float32, **kwargs):
    args = dict(antiquant_scale=[w_scale.transpose(1, 2)], per_token_scale=[x_scale], group_list=counts,
                group_type=0, group_list_type=1, split_item=3, output_dtype=output_dtype, weight_dtype=FP4,
                per_token_scale_dtype=E8M0, tuning_config=[0])
    args.update(kwargs)
    return tn.npu_grouped_matmul([x], [w.transpose(1, 2)], **args)[0]


@pytest.mark.parametrize("k", [64, 96])
def test_mx_grouped_matmul_is_the_sum_of_mx_values(k):
    x, xs, w, ws = _operands(k=k)
    counts = [3, 0, 4]  # two rows past the last group
    got = _call(x, xs, w, ws, torch.tensor(counts))
    want = _reference(x, xs, w, ws, counts)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6 * np.abs(want).max())
    assert not got[7:].any()


def test_mx_grouped_matmul_rounds_once_to_bfloat16_and_takes_scale_or_e8m0_tensors():
    x, xs, w, ws = _operands(seed=1)
    counts = torch.tensor([4, 2, 3])
    want = torch.from_numpy(_reference(x, xs, w, ws, [4, 2, 3]).astype(np.float32)).to(torch.bfloat16)
    got = _call(x, xs, w, ws, counts, torch.bfloat16)
    assert got.dtype == torch.bfloat16
    # float32 sums of values that are exact in float32: at most one bfloat16 rounding step apart
    assert (got.float() - want.float()).abs().max() <= want.float().abs().max() * 2 ** -8
    as_scale = _call(x, xs.view(torch.float8_e8m0fnu), w, ws, counts, torch.bfloat16, antiquant_scale=None,
                     scale=[ws.transpose(1, 2)], scale_dtype=E8M0, per_token_scale_dtype=None)
    torch.testing.assert_close(as_scale, got, rtol=0, atol=0)


@pytest.mark.parametrize("change, arg", [
    (dict(weight_dtype=None), "weight_dtype"),
    (dict(per_token_scale_dtype=tn.float8_e4m3fn), "per_token_scale_dtype"),
    (dict(output_dtype=torch.int8), "output_dtype"),
    (dict(antiquant_scale=None), "antiquant_scale"),
    (dict(per_token_scale=[torch.zeros(9, 1, 2, dtype=torch.uint8)]), "per_token_scale"),
    (dict(antiquant_scale=[torch.zeros(3, 1, 12, 2, dtype=torch.uint8)]), "antiquant_scale"),
    (dict(per_token_scale=[torch.zeros(9, 2, 2)]), "per_token_scale"),
    (dict(bias=[torch.zeros(3, 12)]), "bias"),
])
def test_mx_grouped_matmul_refuses_with_the_argument_named(change, arg):
    x, xs, w, ws = _operands()
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        _call(x, xs, w, ws, torch.tensor([3, 3, 3]), **change)


def test_mx_grouped_matmul_refuses_an_untransposed_weight():
    x, xs, w, ws = _operands()
    with pytest.raises(ValueError, match="argument 'weight'.*transpose"):
        tn.npu_grouped_matmul([x], [w.transpose(1, 2).contiguous()], antiquant_scale=[ws.transpose(1, 2)],
                              per_token_scale=[xs], group_list=torch.tensor([3, 3, 3]), group_type=0,
                              group_list_type=1, split_item=3, output_dtype=torch.bfloat16, weight_dtype=FP4)


def _fp8_operands(seed=0, m=9, k=64, n=12, experts=3):
    g = np.random.default_rng(seed)
    x = torch.from_numpy(g.uniform(-300, 300, (m, k)).astype(np.float32)).to(torch.float8_e4m3fn)
    w = torch.from_numpy(g.uniform(-2, 2, (experts, k, n)).astype(np.float32)).to(torch.float8_e5m2)
    scale = torch.from_numpy(g.uniform(-0.01, 0.01, (experts, n)).astype(np.float32))
    t = torch.from_numpy(g.uniform(0.5, 2, m).astype(np.float32))
    return x, w, scale, t


def _fp8_reference(x, w, scale, t, counts):
    """NumPy: float64 (x @ W[e]) · scale[e] · per_token_scale[r] of the float8 values; rows past the groups 0."""
    xv = x.float().numpy().astype(np.float64)
    wv = w.float().numpy().astype(np.float64)
    y = np.zeros((x.shape[0], w.shape[2]))
    start = 0
    for e, c in enumerate(counts):
        y[start:start + c] = xv[start:start + c] @ wv[e] * scale.numpy()[e].astype(np.float64)
        start += c
    return y if t is None else y * t.numpy().astype(np.float64)[:, None]


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("per_token", [False, True])
def test_fp8_grouped_matmul_is_the_scaled_float8_product(packed, per_token):
    """float8 x with float8 weights (Ascend950's FP8 grouped matmul): y = (x @ W[e]) · scale[e]
    (· per_token_scale[r]), float32 or int64 (npu_trans_quant_param) scales; rows past the groups 0."""
    x, w, scale, t = _fp8_operands()
    counts = [3, 0, 4]  # 2 rows past the groups
    if packed:  # FP19: the low 13 mantissa bits dropped, so the reference takes the truncated scale
        param = tn.npu_trans_quant_param(scale)
        scale = torch.from_numpy((scale.numpy().view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32))
    got = tn.npu_grouped_matmul([x], [w], scale=[param if packed else scale], per_token_scale=[t] if per_token
                                else None, group_list=torch.tensor(counts), group_type=0, group_list_type=1,
                                split_item=3, output_dtype=torch.float32)[0]
    want = _fp8_reference(x, w, scale, t if per_token else None, counts)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-5)
    assert not got[7:].any()


def test_fp8_grouped_matmul_rounds_once_and_refuses_with_the_argument_named():
    x, w, scale, _ = _fp8_operands()
    args = dict(group_list=torch.tensor([3, 3, 3]), group_type=0, group_list_type=1, split_item=3)
    y32 = tn.npu_grouped_matmul([x], [w], scale=[scale], output_dtype=torch.float32, **args)[0]
    y16 = tn.npu_grouped_matmul([x], [w], scale=[scale], output_dtype=torch.bfloat16, **args)[0]
    assert torch.equal(y16, y32.to(torch.bfloat16))
    for kwargs, arg in ((dict(scale=None, output_dtype=torch.float32), "scale"),
                        (dict(scale=[scale], output_dtype=None), "output_dtype"),
                        (dict(scale=[scale[:, :5]], output_dtype=torch.float32), "scale"),
                        (dict(scale=[scale], bias=[torch.zeros(3, 12)], output_dtype=torch.float32), "bias")):
        with pytest.raises(ValueError, match=f"npu_grouped_matmul: argument '{arg}'"):
            tn.npu_grouped_matmul([x], [w], **kwargs, **args)


class _Fp8Experts(torch.nn.Module):
    def forward(self, x, counts, w, scale, t):
        # float8 operands made in the graph (ORT's Python API feeds no float8 arrays)
        xq, wq = x.to(torch.float8_e4m3fn), w.to(torch.float8_e5m2)
        return tn.npu_grouped_matmul([xq], [wq], scale=[scale], per_token_scale=[t], group_list=counts,
                                     group_type=0, group_list_type=1, split_item=3,
                                     output_dtype=torch.float32)[0]


def test_fp8_grouped_matmul_exports_and_matches_in_onnx_runtime():
    model = _Fp8Experts().eval()
    _, w, scale, _ = _fp8_operands()
    w = w.float()
    tokens = Dim("tokens", min=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(9, 64), torch.tensor([3, 3, 3]), w, scale, torch.ones(9)),
                                 dynamic_shapes=({0: tokens}, None, None, None, {0: tokens}))
    assert "GroupedMatmul" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for tokens, counts in ((5, [2, 0, 3]), (11, [4, 5, 1])):
        g = torch.Generator().manual_seed(tokens)
        x, t, c = torch.randn(tokens, 64, generator=g) * 50, torch.rand(tokens, generator=g) + 0.5, torch.tensor(counts)
        want = model(x, c, w, scale, t).numpy()
        feeds = (x.numpy(), c.numpy(), w.numpy(), scale.numpy(), t.numpy())
        got = sess.run(None, dict(zip(names, feeds)))[0]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


class _MxExperts(torch.nn.Module):
    """The recipes' MXFP4 expert call: x quantised to MXFP8 in the graph; the packed weights and their
    scales are graph inputs, so their dequantisation runs in ONNX Runtime (not folded at export)."""

    def forward(self, x, counts, w, ws):
        xq, xs = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
        return _call(xq, xs, w, ws, counts, torch.bfloat16).float()  # ORT's Python API has no bf16


def test_mx_grouped_matmul_exports_and_matches_in_onnx_runtime():
    model = _MxExperts().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(9, 96), torch.tensor([3, 3, 3])) + _operands()[2:],
                                 dynamic_shapes=({0: Dim("tokens", min=2)}, None, None, None))
    assert "GroupedMatmul" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for tokens, counts in ((5, [2, 0, 3]), (11, [4, 5, 1])):
        x = torch.randn(tokens, 96, generator=torch.Generator().manual_seed(tokens))
        c = torch.tensor(counts)
        w, ws = _operands(seed=tokens)[2:]
        want = model(x, c, w, ws).numpy()
        got = sess.run(None, dict(zip(names, (x.numpy(), c.numpy(), w.numpy(), ws.numpy()))))[0]
        # the float32 sums may differ in the last bits by summation order: one bfloat16 step at most
        np.testing.assert_allclose(got, want, rtol=2 ** -7, atol=1e-6)


@pytest.mark.parametrize("idx_type", [0, 1])
def test_re_routing_moves_e8m0_scale_rows_with_their_float8_tokens(idx_type):
    g = np.random.default_rng(3)
    tokens = torch.from_numpy(g.uniform(-400, 400, (7, 64)).astype(np.float32)).to(torch.float8_e4m3fn)
    scales = torch.from_numpy(g.integers(0, 255, (7, 1, 2)).astype(np.uint8))
    counts = torch.tensor([[2, 1], [3, 1]], dtype=torch.int32)  # [ranks, local experts]
    out, out_scales, idx, _ = tn.npu_moe_re_routing(tokens, counts, per_token_scales=scales, idx_type=idx_type)
    # NumPy: rank r's block is its rows; regroup by local expert, ranks in order within an expert
    starts = np.concatenate([[0], np.cumsum(counts.numpy().reshape(-1))])
    order = [row for e in range(2) for r in range(2) for row in range(starts[2 * r + e], starts[2 * r + e + 1])]
    np.testing.assert_array_equal(out.view(torch.uint8).numpy(), tokens.view(torch.uint8).numpy()[order])
    np.testing.assert_array_equal(out_scales.numpy(), scales.numpy()[order])
    with pytest.raises(ValueError, match="argument 'per_token_scales'"):
        tn.npu_moe_re_routing(tokens, counts, per_token_scales=scales[:5])


def test_init_routing_moves_float8_rows_viewed_as_bfloat16_bit_exactly():
    """The recipes route MXFP8 rows as ``x_q.view(torch.bfloat16)`` (two float8 a bfloat16): the rows
    must come back with every byte, NaN-like bfloat16 patterns and negative zeros included."""
    g = np.random.default_rng(4)
    raw = g.integers(0, 256, (6, 64)).astype(np.uint8)
    raw[raw % 128 == 127] = 0  # no float8_e4m3fn NaN bytes: the quantiser never writes them
    raw[0, :4] = [0x80, 0x00, 0x00, 0x80]  # negative zeros, and a bfloat16 -0.0
    x_q = torch.from_numpy(raw).view(torch.float8_e4m3fn)
    idx = torch.from_numpy(g.integers(0, 4, (6, 2)).astype(np.int32))
    expanded, row_idx, _, _ = tn.npu_moe_init_routing_v2(
        x_q.view(torch.bfloat16), expert_idx=idx, active_num=12, expert_num=4, expert_tokens_num_type=1,
        expert_tokens_num_flag=True, active_expert_range=[0, 4], quant_mode=-1)
    got = expanded.view(x_q.dtype).view(torch.uint8).numpy()
    # row_idx[j] is where pair j (token j // k) landed
    source = np.empty(12, np.int64)
    source[row_idx.numpy()] = np.arange(12) // 2
    np.testing.assert_array_equal(got, raw[source])


class _MxReRouting(torch.nn.Module):
    def forward(self, x, counts):
        xq, s = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
        out, out_scales, idx, c = tn.npu_moe_re_routing(xq, counts, per_token_scales=s)
        return out.float(), out_scales, idx, c


def test_mx_re_routing_exports_and_matches_in_onnx_runtime_bit_exactly():
    model = _MxReRouting()
    counts = torch.tensor([[2, 1], [3, 1]], dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(7, 64), counts), dynamic_shapes=({0: Dim("tokens", min=2)}, None))
    assert "MoeReRouting" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for seed, c in ((1, [[2, 1], [3, 1]]), (2, [[0, 4], [1, 2]])):
        x = torch.randn(7, 64, generator=torch.Generator().manual_seed(seed)) * 10
        c = torch.tensor(c, dtype=torch.int32)
        for got, want in zip(sess.run(None, dict(zip(names, (x.numpy(), c.numpy())))), model(x, c)):
            np.testing.assert_array_equal(got, want.numpy())


def test_one_rank_dispatch_quant_mode_4_is_mx_quant_of_the_routed_rows():
    """quant_mode=4 (op-plugin's QUANT_MODE_MX): the rows as npu_dynamic_mx_quant quantises them to
    y_dtype, the e8m0 scales [rows, ceil(H / 32) rounded up to even] (op-plugin's dynamic_scales)."""
    g = torch.Generator().manual_seed(5)
    x = torch.randn(5, 96, generator=g).to(torch.bfloat16) * 20
    idx = torch.tensor([[0, 2], [1, 3], [2, 0], [3, 3], [1, 2]], dtype=torch.int32)
    for y_dtype in (torch.float8_e4m3fn, torch.float8_e5m2):
        expand_x, scales, _, counts, *_ = tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 1, 0, 4, quant_mode=4,
                                                                            y_dtype=y_dtype)
        rows, _, want_counts, _ = tn.npu_moe_init_routing_v2(x, idx, active_num=10, expert_num=4,
                                                             expert_tokens_num_type=1, active_expert_range=[0, 4])
        want_y, want_s = tn.npu_dynamic_mx_quant(rows, dst_type=y_dtype)
        assert expand_x.dtype == y_dtype and torch.equal(expand_x.view(torch.uint8), want_y.view(torch.uint8))
        assert scales.dtype == torch.uint8 and tuple(scales.shape) == (10, 4)  # ceil(96 / 32) = 3 -> 4
        assert torch.equal(scales, want_s.reshape(10, 4)) and torch.equal(counts, want_counts.to(counts.dtype))


@pytest.mark.parametrize(("kwargs", "arg"), [
    (dict(quant_mode=4), "y_dtype"),
    (dict(quant_mode=4, y_dtype=torch.float16), "y_dtype"),
    (dict(quant_mode=4, y_dtype=torch.float8_e4m3fn, scales=torch.ones(4, 96)), "scales"),
    (dict(quant_mode=5, y_dtype=torch.float8_e4m3fn), "quant_mode"),
    (dict(quant_mode=3), "quant_mode"),
    (dict(quant_mode=1), "quant_mode"),
])
def test_dispatch_quant_modes_outside_0_2_4_and_bad_mx_arguments_are_named(kwargs, arg):
    x, idx = torch.randn(5, 96), torch.zeros(5, 2, dtype=torch.int32)
    with pytest.raises((ValueError, NotImplementedError), match=f"argument '{arg}'"):
        tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 1, 0, 4, **kwargs)


class _MxDispatch(torch.nn.Module):
    def forward(self, x, idx):
        expand_x, scales, _, counts, *_ = tn.npu_moe_distribute_dispatch_v2(
            x, idx, "ep", 1, 0, 4, quant_mode=4, y_dtype=torch.float8_e4m3fn)
        return expand_x.float(), scales, counts


def test_mx_dispatch_exports_and_matches_in_onnx_runtime():
    model = _MxDispatch()
    tokens = Dim("tokens", min=2)
    g = torch.Generator().manual_seed(6)
    x, idx = torch.randn(5, 96, generator=g) * 20, torch.randint(0, 4, (5, 2), generator=g, dtype=torch.int32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (x, idx), dynamic_shapes=({0: tokens}, {0: tokens}))
    sess = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    for t in (5, 9):
        x, idx = torch.randn(t, 96, generator=g) * 20, torch.randint(0, 4, (t, 2), generator=g, dtype=torch.int32)
        for got, want in zip(sess.run(None, dict(zip(names, (x.numpy(), idx.numpy())))), model(x, idx)):
            np.testing.assert_array_equal(got, want.numpy())
