"""The torch_npu stand-in's w8a8 functions against NumPy statements of the Ascend definitions
(aclnnDynamicQuant, aclnnDequantSwigluQuant, npu_grouped_matmul's A8W8 mode), their refusals, and
their export as standard ONNX ops run in ONNX Runtime."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.onnx_schemas import moe_init_routing_v3 as init_spec


def _dynamic_quant_np(r: np.ndarray):
    """aclnnDynamicQuant on float32 rows: scale = rowmax|r| / 127, y = round_half_even(r / scale)."""
    r = r.astype(np.float32)
    scale = (np.abs(r).max(axis=-1) / np.float32(127)).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(scale[..., None] > 0, r / np.where(scale > 0, scale, 1)[..., None], 0)
    return np.clip(np.rint(q), -128, 127).astype(np.int8), scale


def _dequant_swiglu_quant_np(x, weight_scale, activation_scale, quant_scale, counts, activate_left=True,
                             swiglu_mode=0, clamp_limit=7.0, alpha=1.702, bias=1.0):
    """aclnnDequantSwigluQuant (dynamic), group by group as the operator's documentation states it."""
    x = np.asarray(x)
    rows, width = x.shape
    y, s = np.zeros((rows, width // 2), np.int8), np.zeros(rows, np.float32)
    start = 0
    for g, n in enumerate(counts):
        v = x[start:start + n].astype(np.float32)
        if weight_scale is not None:
            v = v * weight_scale[g] * activation_scale[start:start + n, None]
        if swiglu_mode == 1:
            act, lin = v[:, 0::2], v[:, 1::2]
        else:
            a, b = np.split(v, 2, axis=1)
            act, lin = (a, b) if activate_left else (b, a)
        with np.errstate(over="ignore"):  # exp(-act) overflows to inf for act << 0: silu -> -0
            if swiglu_mode == 0:
                out = act / (1 + np.exp(-act)) * lin
            else:
                act, lin = np.minimum(act, clamp_limit), np.clip(lin, -clamp_limit, clamp_limit)
                out = act / (1 + np.exp(-alpha * act)) * (lin + bias)
        if quant_scale is not None:
            out = out * quant_scale[g]
        y[start:start + n], s[start:start + n] = _dynamic_quant_np(out.astype(np.float32))
        start += n
    return y, s


def _close_int8(got: torch.Tensor, want: np.ndarray, max_flips: float = 0.02) -> None:
    """int8 results equal up to one step, on at most ``max_flips`` of the elements (the float
    steps before rounding differ by ulps between torch / NumPy exp and sigmoid)."""
    diff = np.abs(got.numpy().astype(np.int32) - want.astype(np.int32))
    assert diff.max() <= 1 and (diff > 0).mean() <= max_flips, (diff.max(), (diff > 0).mean())


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_dynamic_quant_is_the_documented_formula(dtype):
    g = torch.Generator().manual_seed(0)
    x = (torch.randn(2, 5, 24, generator=g) * 3).to(dtype)
    x[0, 1] = 0  # an all-zero row: scale 0, y 0
    y, scale = tn.npu_dynamic_quant(x)
    want_y, want_s = _dynamic_quant_np(x.float().numpy())
    assert y.dtype == torch.int8 and scale.dtype == torch.float32 and scale.shape == (2, 5)
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(scale.numpy(), want_s)
    # one statement in the project: init routing's quant_mode=1 quantises rows the same way
    q, s = init_spec.quantize_dynamic(x.float().reshape(-1, 24).numpy(), None)
    np.testing.assert_array_equal(q, want_y.reshape(-1, 24))
    np.testing.assert_array_equal(s, want_s.reshape(-1))


def test_dynamic_quant_matches_the_npu_kernel_order_within_one_step():
    """The A2/A3 kernel multiplies by 127 / rowmax instead of dividing by the scale: at most one
    step apart, where the two float32 results straddle a rounding boundary (op-plugin's tests allow 1)."""
    x = torch.randn(64, 512, generator=torch.Generator().manual_seed(1))
    y, _ = tn.npu_dynamic_quant(x)
    r = x.numpy()
    kernel = np.rint(r * (np.float32(127) / np.abs(r).max(-1, keepdims=True))).astype(np.int32)
    assert np.abs(y.numpy().astype(np.int32) - kernel).max() <= 1


def test_dynamic_quant_smooth_scales_and_groups():
    g = torch.Generator().manual_seed(2)
    x, smooth = torch.randn(7, 16, generator=g), torch.rand(3, 16, generator=g) + 0.5
    y, s = tn.npu_dynamic_quant(x, smooth_scales=smooth[0])
    want = _dynamic_quant_np((x * smooth[0]).numpy())
    np.testing.assert_array_equal(y.numpy(), want[0])
    ends = torch.tensor([2, 2, 7], dtype=torch.int32)  # group 1 is empty
    y, s = tn.npu_dynamic_quant(x, smooth_scales=smooth, group_index=ends)
    rows = torch.cat([x[:2] * smooth[0], x[2:] * smooth[2]])
    want_y, want_s = _dynamic_quant_np(rows.numpy())
    np.testing.assert_array_equal(y.numpy(), want_y)
    np.testing.assert_array_equal(s.numpy(), want_s)


def test_init_routing_quant_mode_1_rows_are_dynamic_quant_of_the_smoothed_rows():
    g = torch.Generator().manual_seed(3)
    x, smooth = torch.randn(5, 16, generator=g), torch.rand(4, 16, generator=g) + 0.5
    idx = torch.tensor([[0, 2], [1, 3], [2, 0], [3, 3], [1, 2]], dtype=torch.int32)
    ex, _, kv, scale = tn.npu_moe_init_routing_v2(x, idx, scale=smooth, active_num=10, expert_num=4,
                                                  expert_tokens_num_type=2, expert_tokens_num_flag=True,
                                                  active_expert_range=[0, 4], quant_mode=1)
    order = np.argsort(idx.reshape(-1).numpy(), kind="stable")
    rows = x[torch.from_numpy(order // 2)] * smooth[idx.reshape(-1)[torch.from_numpy(order)].long()]
    want_y, want_s = tn.npu_dynamic_quant(rows)
    assert torch.equal(ex, want_y) and torch.equal(scale, want_s)
    assert kv.tolist() == [[0, 2], [1, 2], [2, 3], [3, 3]]


def test_one_rank_dispatch_quant_mode_2_is_init_routing_quant_mode_1():
    g = torch.Generator().manual_seed(9)
    x, smooth = torch.randn(5, 16, generator=g), torch.rand(4, 16, generator=g) + 0.5
    idx = torch.tensor([[0, 2], [1, 3], [2, 0], [3, 3], [1, 2]], dtype=torch.int32)
    expand_x, dynamic_scales, *_ = tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 1, 0, 4, scales=smooth,
                                                                     quant_mode=2)
    ex, _, _, scale = tn.npu_moe_init_routing_v2(x, idx, scale=smooth, active_num=10, expert_num=4,
                                                 expert_tokens_num_type=1, active_expert_range=[0, 4],
                                                 quant_mode=1)
    assert expand_x.dtype == torch.int8 and torch.equal(expand_x, ex) and torch.equal(dynamic_scales, scale)
    with pytest.raises(NotImplementedError, match="argument 'quant_mode'"):
        tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 1, 0, 4, quant_mode=1)


@pytest.mark.parametrize("activate_left, swiglu_mode", [(True, 0), (False, 0), (True, 1), (True, 2), (False, 2)])
def test_dequant_swiglu_quant_is_the_documented_formula(activate_left, swiglu_mode):
    g = torch.Generator().manual_seed(4)
    rows, width, counts = 9, 32, [3, 0, 4]  # 2 rows past the groups
    x = torch.randint(-2000, 2000, (rows, width), generator=g, dtype=torch.int32)
    ws = torch.rand(3, width, generator=g) * 1e-3
    act = torch.rand(rows, generator=g) + 0.5
    qs = torch.rand(3, width // 2, generator=g) + 0.5
    y, s = tn.npu_dequant_swiglu_quant(x, weight_scale=ws, activation_scale=act, quant_scale=qs,
                                       group_index=torch.tensor(counts), activate_left=activate_left, quant_mode=1,
                                       swiglu_mode=swiglu_mode, clamp_limit=2.0, glu_alpha=1.5, glu_bias=0.5)
    want_y, want_s = _dequant_swiglu_quant_np(x.numpy(), ws.numpy(), act.numpy(), qs.numpy(), counts, activate_left,
                                              swiglu_mode, 2.0, 1.5, 0.5)
    _close_int8(y, want_y)
    np.testing.assert_allclose(s.numpy(), want_s, rtol=1e-5)
    assert not y[7:].any() and not s[7:].any()


def test_dequant_swiglu_quant_takes_key_value_group_index():
    g = torch.Generator().manual_seed(5)
    x = torch.randint(-500, 500, (6, 8), generator=g, dtype=torch.int32)
    ws, act, qs = torch.rand(4, 8, generator=g), torch.rand(6, generator=g), torch.rand(4, 4, generator=g)
    kv = torch.tensor([[1, 2], [3, 4], [0, 0], [0, 0]])
    counts = torch.tensor([0, 2, 0, 4])
    a = tn.npu_dequant_swiglu_quant(x, weight_scale=ws, activation_scale=act, quant_scale=qs, group_index=kv,
                                    activate_left=True, quant_mode=1)
    b = tn.npu_dequant_swiglu_quant(x, weight_scale=ws, activation_scale=act, quant_scale=qs, group_index=counts,
                                    activate_left=True, quant_mode=1)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def _w8a8_operands(seed=6, rows=9, k=16, n=12, experts=3):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(-128, 128, (rows, k), generator=g, dtype=torch.int8)
    w = torch.randint(-128, 128, (experts, k, n), generator=g, dtype=torch.int8)
    return x, w, torch.rand(experts, n, generator=g) * 1e-2, torch.rand(rows, generator=g)


def test_grouped_matmul_w8a8_accumulates_in_int32_and_dequantises():
    x, w, scale, pts = _w8a8_operands()
    counts = torch.tensor([4, 0, 3])  # 2 rows past the groups: 0
    acc = tn.npu_grouped_matmul([x], [w], group_list=counts, group_type=0, group_list_type=1, split_item=3,
                                output_dtype=torch.int32)[0]
    xs, ws = x.numpy().astype(np.int64), w.numpy().astype(np.int64)
    want = np.zeros((9, 12), np.int64)
    want[:4], want[4:7] = xs[:4] @ ws[0], xs[4:7] @ ws[2]
    assert acc.dtype == torch.int32 and np.array_equal(acc.numpy(), want)
    for out_dtype, cumsum in ((torch.float32, [4, 4, 7]), (torch.bfloat16, [4, 4, 7])):
        y = tn.npu_grouped_matmul([x], [w], scale=[scale], per_token_scale=[pts], group_list=cumsum, group_type=0,
                                  split_item=2, output_dtype=out_dtype)[0]
        e = np.array([0] * 4 + [2] * 3 + [0] * 2)
        deq = want * scale.numpy().astype(np.float64)[e] * pts.numpy().astype(np.float64)[:, None]
        deq[7:] = 0
        assert y.dtype == out_dtype
        ulp = 1e-6 if out_dtype == torch.float32 else 2 ** -7  # rounded once to the output type
        torch.testing.assert_close(y.double(), torch.from_numpy(deq), rtol=ulp, atol=0)
    kv = torch.tensor([[0, 4], [2, 3], [0, 0]])
    y_kv = tn.npu_grouped_matmul([x], [w], group_list=kv, group_list_type=2, group_type=0, split_item=3,
                                 output_dtype=torch.int32)[0]
    assert torch.equal(y_kv, acc)


def test_grouped_matmul_swiglu_quant_composes_matmul_and_dequant_swiglu_quant():
    x, w, scale, pts = _w8a8_operands(7, n=16)
    cumsum = torch.tensor([4, 4, 9])
    y, s, offset = tn.npu_grouped_matmul_swiglu_quant(x, w, cumsum, scale, pts)
    acc = np.concatenate([x[:4].numpy().astype(np.int64) @ w[0].numpy().astype(np.int64),
                          x[4:].numpy().astype(np.int64) @ w[2].numpy().astype(np.int64)])
    want_y, want_s = _dequant_swiglu_quant_np(acc.astype(np.int32), scale.numpy(), pts.numpy(), None, [4, 0, 5])
    _close_int8(y, want_y)
    np.testing.assert_allclose(s.numpy(), want_s, rtol=1e-5)
    assert offset.numel() == 0


@pytest.mark.parametrize("call, arg", [
    (lambda x: tn.npu_dynamic_quant(x, dst_type=torch.float8_e4m3fn), "dst_type"),
    (lambda x: tn.npu_dynamic_quant(x, quant_mode="pertensor"), "quant_mode"),
    (lambda x: tn.npu_dynamic_quant(x, smooth_scales=torch.ones(3)), "smooth_scales"),
    (lambda x: tn.npu_dynamic_quant(x[0]), "input"),
    (lambda x: tn.npu_dequant_swiglu_quant(x.int(), weight_scale=torch.ones(8), activation_scale=torch.ones(4),
                                           quant_mode=0), "quant_mode"),
    (lambda x: tn.npu_dequant_swiglu_quant(x.int(), activation_scale=torch.ones(4), quant_mode=1), "weight_scale"),
    (lambda x: tn.npu_dequant_swiglu_quant(x.int(), weight_scale=torch.ones(8), activation_scale=torch.ones(4),
                                           bias=torch.ones(8, dtype=torch.int32), quant_mode=1), "bias"),
    (lambda x: tn.npu_dequant_swiglu_quant(x.int(), weight_scale=torch.ones(6), activation_scale=torch.ones(4),
                                           quant_mode=1), "weight_scale"),
    (lambda x: tn.npu_dequant_swiglu_quant(x, quant_mode=1, swiglu_mode=1), "activate_left"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4, dtype=torch.int8)],
                                     group_list=[4, 0], group_type=0, group_list_type=1, split_item=3,
                                     output_dtype=torch.int8), "scale"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4, dtype=torch.int8)],
                                     group_list=[4, 0], group_type=0, group_list_type=1, split_item=3,
                                     output_dtype=torch.int16), "output_dtype"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4)], group_list=[4, 0], group_type=0,
                                     group_list_type=1, split_item=3, output_dtype=torch.int32), "weight"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4, dtype=torch.int8)],
                                     group_list=[4, 0], group_type=0, group_list_type=1, split_item=3,
                                     output_dtype=torch.float32), "scale"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4, dtype=torch.int8)],
                                     scale=[torch.ones(2, 4)], per_token_scale=[torch.ones(3)], group_list=[4, 0],
                                     group_type=0, group_list_type=1, split_item=3, output_dtype=torch.float32),
     "per_token_scale"),
    (lambda x: tn.npu_grouped_matmul([x.to(torch.int8)], [torch.ones(2, 8, 4, dtype=torch.int8)],
                                     antiquant_scale=[torch.ones(2, 4)], group_list=[4, 0], group_type=0,
                                     group_list_type=1, split_item=3, output_dtype=torch.float32),
     "antiquant_scale"),
])
def test_w8a8_helpers_refuse_with_the_argument_named(call, arg):
    x = torch.randn(4, 8)
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        call(x)


class _QuantHelpers(torch.nn.Module):
    """npu_dynamic_quant with smoothing, then npu_dequant_swiglu_quant on an int32 product."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(8)
        self.smooth = torch.nn.Parameter(torch.rand(16, generator=g) + 0.5, requires_grad=False)
        self.w = torch.nn.Parameter(torch.randint(-128, 128, (16, 24), generator=g).float(), requires_grad=False)
        self.ws = torch.nn.Parameter(torch.rand(24, generator=g) * 1e-2, requires_grad=False)

    def forward(self, x):
        q, s = tn.npu_dynamic_quant(x, smooth_scales=self.smooth)
        acc = (q.float() @ self.w).to(torch.int32)
        y, s2 = tn.npu_dequant_swiglu_quant(acc, weight_scale=self.ws, activation_scale=s, activate_left=True,
                                            quant_mode=1)
        return q, s, y, s2


def test_quant_helpers_export_as_standard_onnx_and_run_in_onnx_runtime():
    model = _QuantHelpers().eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(5, 16),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    domains = {n.domain for n in proto.graph.node}
    assert domains <= {"", "ai.onnx"}, domains
    assert {"ReduceMax", "Round"} <= {n.op_type for n in proto.graph.node}
    sess = ort.InferenceSession(proto.SerializeToString())
    for tokens in (5, 12):
        x = torch.randn(tokens, 16, generator=torch.Generator().manual_seed(tokens)) * 2
        want = [t.numpy() for t in model(x)]
        got = sess.run(None, {proto.graph.input[0].name: x.numpy()})
        np.testing.assert_array_equal(got[0], want[0])  # ReduceMax, Div, Round: exact
        np.testing.assert_array_equal(got[1], want[1])
        _close_int8(torch.from_numpy(got[2]), want[2])
        np.testing.assert_allclose(got[3], want[3], rtol=1e-5)
