"""npu_moe_init_routing_quant, npu_moe_gating_top_k_softmax_v2 and the first MC2 pair
(npu_moe_distribute_dispatch / combine) of the torch_npu stand-in: op-plugin's test goldens
(test_npu_moe_init_routing_quant.py, test_npu_moe_gating_top_k_softmax_v2.py) restated in NumPy,
refusals, export to the project's nodes and ONNX Runtime."""

from __future__ import annotations

import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from ascend_moe_onnx.exporters import torch_npu as tn


def _init_routing_quant_np(x, expert_idx, scale, offset, expert_num, quant_mode):
    """op-plugin's cpu_op_exec (dropless, every expert active)."""
    rows, h = x.shape
    k = expert_idx.shape[1]
    flat = expert_idx.reshape(-1)
    order = np.argsort(flat, kind="stable")
    row_idx = np.empty(rows * k, np.int32)
    row_idx[order] = np.arange(rows * k)
    if quant_mode == 0:
        v = x.astype(np.float16)[order // k] * scale.astype(np.float16)[0]
        if offset is not None:
            v = v + offset.astype(np.float16)[0]
        expanded, exp_scale = np.clip(np.rint(v), -128, 127).astype(np.int8), None
    else:
        v = x[order // k].astype(np.float32)
        if scale is not None:
            v = v * scale[flat[order]]
        exp_scale = np.abs(v).max(-1) / np.float32(127)
        expanded = np.rint(v / exp_scale[:, None]).astype(np.int8)
    counts = np.bincount(flat, minlength=expert_num).astype(np.int32)
    return expanded, row_idx, counts, exp_scale


@pytest.mark.parametrize("quant_mode, with_scale, with_offset", [(0, True, True), (0, True, False), (1, False, False),
                                                                 (1, True, False)])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16])
def test_init_routing_quant_is_op_plugins_golden(quant_mode, with_scale, with_offset, dtype):
    rng = np.random.default_rng(0)
    rows, h, k, experts = 4, 64, 8, 32
    x = rng.uniform(-1, 1, (rows, h)).astype(np.float32)
    x = torch.tensor(x).to(dtype).float().numpy()  # the values the op sees
    idx = rng.integers(0, experts, (rows, k)).astype(np.int32)
    shape = (1,) if quant_mode == 0 else (experts, h)
    scale = rng.uniform(-1, 1, shape).astype(np.float32) if with_scale else None
    offset = rng.uniform(-1, 1, shape).astype(np.float32) if with_offset else None
    out = tn.npu_moe_init_routing_quant(
        torch.tensor(x).to(dtype), torch.tensor(idx), scale=None if scale is None else torch.tensor(scale),
        offset=None if offset is None else torch.tensor(offset), active_num=0, expert_capacity=0,
        expert_num=experts, drop_pad_mode=0, expert_tokens_num_mode=2, quant_mode=quant_mode)
    ex, row_idx, counts, before, exp_scale = out
    want_x, want_row, want_counts, want_scale = _init_routing_quant_np(x, idx, scale, offset, experts, quant_mode)
    assert ex.dtype == torch.int8 and np.abs(ex.numpy().astype(int) - want_x).max() <= 1  # op-plugin allows 1
    np.testing.assert_array_equal(row_idx.numpy(), want_row)
    assert counts.dtype == torch.int32 and before is None
    np.testing.assert_array_equal(counts.numpy(), want_counts)
    if quant_mode == 1:
        np.testing.assert_allclose(exp_scale.numpy(), want_scale, rtol=1e-6)
    else:
        assert exp_scale is None


def test_init_routing_quant_counts_modes_and_active_rows():
    g = torch.Generator().manual_seed(1)
    x, idx = torch.randn(6, 16, generator=g), torch.randint(0, 4, (6, 2), generator=g, dtype=torch.int32)
    _, _, none, _, _ = tn.npu_moe_init_routing_quant(x, idx, expert_num=4, expert_tokens_num_mode=0, active_num=0)
    _, _, cumsum, _, _ = tn.npu_moe_init_routing_quant(x, idx, expert_num=4, expert_tokens_num_mode=1, active_num=0)
    _, _, count, _, _ = tn.npu_moe_init_routing_quant(x, idx, expert_num=4, expert_tokens_num_mode=2, active_num=0)
    assert none is None and torch.equal(count.cumsum(0).to(torch.int32), cumsum)
    ex, _, _, _, sc = tn.npu_moe_init_routing_quant(x, idx, expert_num=4, active_num=5)
    assert ex.shape == (5, 16) and sc.shape == (5,)


def _softmax(v):
    e = np.exp(v - v.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


@pytest.mark.parametrize("renorm", [0, 1])
@pytest.mark.parametrize("output_softmax", [True, False])
# E = 5120 and k = 80 (op-plugin's cases) are beyond MoeGatingTopKHash's limits: standard ops there
@pytest.mark.parametrize("shape, k", [((10, 200), 4), ((2, 5, 64), 5), ((6, 5120), 8), ((4, 300), 80)])
def test_gating_top_k_softmax_v2_is_op_plugins_golden(renorm, output_softmax, shape, k):
    rng = np.random.default_rng(2)
    x = rng.uniform(-1, 1, shape).astype(np.float32)
    finished = rng.uniform(-1, 1, shape[:-1]) > 0
    y, idx, sm = tn.npu_moe_gating_top_k_softmax_v2(torch.tensor(x), k=k, finished=torch.tensor(finished),
                                                     renorm=renorm, output_softmax=output_softmax)
    flat = x.reshape(-1, shape[-1])
    full = _softmax(flat)
    if renorm:
        want_i = np.argsort(-flat, axis=-1, kind="stable")[:, :k]
        want_y = _softmax(np.take_along_axis(flat, want_i, -1))
    else:
        want_i = np.argsort(-full, axis=-1, kind="stable")[:, :k]
        want_y = np.take_along_axis(full, want_i, -1)
    want_i = np.where(finished.reshape(-1, 1), shape[-1], want_i)
    np.testing.assert_allclose(y.numpy().reshape(-1, k), want_y, rtol=1e-5, atol=1e-7)
    np.testing.assert_array_equal(idx.numpy().reshape(-1, k), want_i)
    assert idx.dtype == torch.int32 and tuple(y.shape) == (*shape[:-1], k)
    if renorm == 0 and output_softmax:
        np.testing.assert_allclose(sm.numpy().reshape(-1, shape[-1]), full, rtol=1e-5, atol=1e-7)
    else:
        assert sm.shape == (0,) and sm.dtype == torch.float32


@pytest.mark.parametrize("call, arg", [
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, quant_mode=2), "quant_mode"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, drop_pad_mode=2), "drop_pad_mode"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, expert_tokens_num_mode=3), "expert_tokens_num_mode"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, quant_mode=0), "scale"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, offset=torch.ones(1)), "offset"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x[0], i), "x"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i[:2]), "expert_idx"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, drop_pad_mode=1, expert_capacity=0), "expert_capacity"),
    (lambda x, i: tn.npu_moe_init_routing_quant(x, i, drop_pad_mode=1, expert_capacity=2,
                                                expert_tokens_before_capacity_flag=True),
     "expert_tokens_before_capacity_flag"),
    (lambda x, i: tn.npu_moe_gating_top_k_softmax_v2(x, k=2, renorm=2), "renorm"),
    (lambda x, i: tn.npu_moe_gating_top_k_softmax_v2(x[0], k=2), "x"),
    (lambda x, i: tn.npu_moe_gating_top_k_softmax_v2(x, k=99), "k"),
    (lambda x, i: tn.npu_moe_gating_top_k_softmax_v2(x, k=2, finished=torch.ones(3)), "finished"),
    (lambda x, i: tn.npu_moe_distribute_combine(x, i, torch.zeros(8, dtype=torch.int32), torch.tensor([8]),
                                                torch.ones(4, 2), "ep", 1, 0, 8,
                                                weight_scale=torch.ones(8, 16)), "weight_scale"),
    (lambda x, i: tn.npu_moe_distribute_combine(x, i, torch.zeros(8, dtype=torch.int32), torch.tensor([8]),
                                                torch.ones(4, 2), "ep", 1, 0, 8, out_dtype=1), "out_dtype"),
])
def test_routing_variants_refuse_with_the_argument_named(call, arg):
    x = torch.randn(4, 16)
    idx = torch.tensor([[0, 1], [2, 3], [1, 0], [3, 2]], dtype=torch.int32)
    with pytest.raises((ValueError, NotImplementedError), match=f": argument '{arg}'"):
        call(x, idx)


def test_distribute_v1_is_v2_on_one_rank():
    g = torch.Generator().manual_seed(3)
    x, idx = torch.randn(5, 16, generator=g), torch.tensor([[0, 2], [1, 3], [2, 0], [3, 3], [1, 2]],
                                                              dtype=torch.int32)
    idx[3, 1] = 1
    probs = torch.rand(5, 2, generator=g)
    v1 = tn.npu_moe_distribute_dispatch(x, idx, "ep", 1, 0, 4)
    v2 = tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 1, 0, 4)
    for a, b in zip(v1, v2):
        assert (a is None and b is None) or torch.equal(a, b)
    rows = v1[0] * 2.0
    out1 = tn.npu_moe_distribute_combine(rows, idx, v1[2], v1[4], probs, "ep", 1, 0, 4)
    out2 = tn.npu_moe_distribute_combine_v2(rows, idx, v2[2], v2[4], probs, "ep", 1, 0, 4)
    assert torch.equal(out1, out2)
    torch.testing.assert_close(out1, 2.0 * (probs[..., None] * x[:, None]).sum(1))


class _Routing(torch.nn.Module):
    def forward(self, logits, x):
        y, idx, _ = tn.npu_moe_gating_top_k_softmax_v2(logits, k=2, renorm=1)
        ex, row_idx, counts, _, scale = tn.npu_moe_init_routing_quant(x, idx, expert_num=logits.shape[-1],
                                                                      expert_tokens_num_mode=2, active_num=0)
        return y, idx, ex, row_idx, counts, scale


def test_routing_variants_export_to_the_project_nodes_and_run_in_onnx_runtime(library_path):
    model = _Routing().eval()
    tokens = Dim("tokens", min=2)
    g = torch.Generator().manual_seed(4)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (torch.randn(6, 8, generator=g), torch.randn(6, 16, generator=g)),
                                 dynamic_shapes=({0: tokens}, {0: tokens}))
    kinds = {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    assert {"MoeGatingTopKHash", "MoeInitRoutingV3"} <= kinds, kinds
    so = ort.SessionOptions()
    so.register_custom_ops_library(library_path)
    sess = ort.InferenceSession(proto.SerializeToString(), so)
    names = [i.name for i in proto.graph.input]
    for t in (6, 13):
        logits, x = torch.randn(t, 8, generator=g), torch.randn(t, 16, generator=g)
        want = [v.numpy() for v in model(logits, x)]
        got = sess.run(None, dict(zip(names, (logits.numpy(), x.numpy()))))
        for a, b in zip(got, want):
            if b.dtype.kind == "f":
                np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-7)
            else:
                np.testing.assert_array_equal(a, b)
