"""The torch_npu stand-in: install(), argument normalisation, torch_npu's output conventions, clear
errors for what does not export; exporters.export's checks for sizes fixed by the trace and for
known idioms that stop an exporter."""

from __future__ import annotations

import sys
import types
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.exporters.export_checks import ExportError

T, H, E, K = 7, 8, 6, 2


def _routing(seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g)
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    return x, idx


def test_install_is_idempotent_and_never_replaces_a_present_torch_npu(monkeypatch):
    assert tn.install() is tn.install() is sys.modules["torch_npu"]
    other = types.ModuleType("torch_npu")
    monkeypatch.setitem(sys.modules, "torch_npu", other)
    assert tn.install() is other


def test_gating_out_is_rows_by_experts_also_without_out_flag():
    x = torch.randn(T, E)
    _, _, out = tn.npu_moe_gating_top_k(x, K, norm_type=1)
    assert out.shape == (T, E) and out.dtype == torch.float32
    _, _, scores = tn.npu_moe_gating_top_k(x, K, norm_type=1, out_flag=True)
    torch.testing.assert_close(scores, x.sigmoid())


def test_gating_hash_inputs_route_by_token_id():
    x = torch.randn(T, E)
    table = torch.tensor([[1, 3], [0, 5], [2, 4]], dtype=torch.int32)
    ids = torch.tensor([2, 0, 1, 1, 0, 2, 2])
    _, idx, _ = tn.npu_moe_gating_top_k(x, K, input_ids=ids, tid2eid=table, norm_type=1)
    assert torch.equal(idx, table[ids])
    with pytest.raises(ValueError, match="npu_moe_gating_top_k: argument 'tid2eid'"):
        tn.npu_moe_gating_top_k(x, K, input_ids=ids)


def test_gating_softmax_finished_rows_and_row_idx():
    x = torch.randn(T, E)
    finished = torch.tensor([False, True, False, False, True, False, False])
    y, idx, row_idx = tn.npu_moe_gating_top_k_softmax(x, finished, k=K)
    w, chosen = x.softmax(-1).topk(K, dim=-1)
    torch.testing.assert_close(y, w)
    assert torch.equal(idx[~finished], chosen[~finished].int()) and bool((idx[finished] == E).all())
    assert torch.equal(row_idx, torch.arange(T * K, dtype=torch.int32).view(K, T).t())


def test_init_routing_v2_sorts_stably_and_indexes_both_ways():
    x, idx = _routing()
    ex, gather, counts, _ = tn.npu_moe_init_routing_v2(x, idx, active_num=T * K, expert_num=E,
                                                       expert_tokens_num_flag=True, expert_tokens_num_type=1)
    order = np.argsort(idx.reshape(-1).numpy(), kind="stable")
    torch.testing.assert_close(ex, x[torch.from_numpy(order) // K])
    assert torch.equal(gather[torch.from_numpy(order)], torch.arange(T * K, dtype=torch.int32))
    assert torch.equal(counts, torch.bincount(idx.reshape(-1).long(), minlength=E))
    _, scatter, cumsum, _ = tn.npu_moe_init_routing_v2(x, idx, expert_num=E, row_idx_type=1,
                                                       expert_tokens_num_flag=True)
    assert torch.equal(scatter, torch.from_numpy(order).int()) and torch.equal(cumsum, counts.cumsum(0))


def test_init_routing_v2_active_expert_range():
    x, idx = _routing(1)
    ex, gather, counts, _ = tn.npu_moe_init_routing_v2(x, idx, active_num=T * K, expert_num=E,
                                                       active_expert_range=[2, 4], expert_tokens_num_type=1,
                                                       expert_tokens_num_flag=True)
    flat = idx.reshape(-1)
    inside = (flat >= 2) & (flat < 4)
    assert bool((gather[~inside] == -1).all()) and counts.tolist() == [int((flat == 2).sum()), int((flat == 3).sum())]
    for pair in torch.nonzero(inside).flatten().tolist():
        torch.testing.assert_close(ex[gather[pair]], x[pair // K])


def test_grouped_matmul_argument_forms_agree():
    g = torch.Generator().manual_seed(3)
    w = torch.randn(3, H, 5, generator=g)
    x = torch.randn(T, H, generator=g)
    counts = torch.tensor([2, 0, 5])
    ref = tn.npu_grouped_matmul([x], [w], group_list=counts, group_type=0, group_list_type=1, split_item=3)[0]
    forms = [
        tn.npu_grouped_matmul(x=[x], weight=list(w), group_list=[2, 2, 7], group_type=0, split_item=2),
        tn.npu_grouped_matmul([x], [w.transpose(1, 2).contiguous().transpose(1, 2)], group_list=counts,
                              group_type=0, group_list_type=1, split_item=2),
        # key-value rows (init routing's expert_tokens_num_type=2): non-empty experts, then (0, 0)
        tn.npu_grouped_matmul([x], [w], group_list=torch.tensor([[0, 2], [2, 5], [0, 0]]), group_type=0,
                              group_list_type=2, split_item=3),
    ]
    for (y,) in forms:
        torch.testing.assert_close(y, ref)
    torch.testing.assert_close(ref[:2], x[:2] @ w[0])
    torch.testing.assert_close(ref[2:], x[2:] @ w[2])


@pytest.mark.parametrize("kwargs, arg", [
    (dict(split_item=0), "split_item"), (dict(group_type=None), "group_type"),
    (dict(group_list_type=3), "group_list_type"), (dict(per_token_scale=[torch.ones(T)]), "per_token_scale"),
    (dict(offset=[torch.ones(3, 5)]), "offset"),
    (dict(act_type=1), "act_type"), (dict(group_list=torch.tensor([7])), "group_list"),
])
def test_grouped_matmul_refuses_with_the_argument_named(kwargs, arg):
    x, w = torch.randn(T, H), torch.randn(3, H, 5)
    call = dict(group_list=torch.tensor([2, 0, 5]), group_type=0, group_list_type=1, split_item=3) | kwargs
    with pytest.raises((ValueError, NotImplementedError), match=f"npu_grouped_matmul: argument '{arg}'"):
        tn.npu_grouped_matmul([x], [w], **call)


def test_multi_rank_dispatch_needs_a_process_group_and_points_to_the_expert_parallel_export():
    x, idx = _routing()
    with pytest.raises(ValueError, match="argument 'ep_world_size' > 1 needs an initialised torch.distributed"):
        tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 2, 0, E)

    class _Dispatch(torch.nn.Module):
        def forward(self, x):
            return tn.npu_moe_distribute_dispatch_v2(x, idx, "ep", 2, 0, E)[0]

    with pytest.raises(Exception, match="expert-parallel.md"):
        torch.export.export(_Dispatch(), (x,), strict=False)
    with pytest.raises(RuntimeError, match="argument 'tokens_dtype' must be torch_npu.hifloat8"):
        tn.npu_moe_re_routing(x.to(torch.uint8), torch.tensor([[T]]), tokens_dtype=34)


@pytest.mark.parametrize("tokens_dtype", [290, 296, 297])  # torch_npu.hifloat8, float4_e2m1fn_x2, float4_e1m2fn_x2
def test_re_routing_moves_one_byte_codes_as_bytes(tokens_dtype):
    g = torch.Generator().manual_seed(3)
    codes = torch.randint(0, 256, (8, 6), generator=g, dtype=torch.uint8)
    counts = torch.tensor([[1, 2], [3, 2]])
    moved, _, idx, _ = tn.npu_moe_re_routing(codes.view(torch.int8), counts, tokens_dtype=tokens_dtype)
    assert moved.dtype == torch.uint8
    assert torch.equal(moved, codes[idx.long()])
    with pytest.raises(RuntimeError, match="argument 'tokens' must hold one-byte codes"):
        tn.npu_moe_re_routing(codes.float(), counts, tokens_dtype=tokens_dtype)


def test_token_permute_and_unpermute_invert_each_other():
    x, idx = _routing(2)
    permuted, sorted_indices = tn.npu_moe_token_permute(x, idx)
    probs = torch.full((T, K), 1.0 / K)
    torch.testing.assert_close(tn.npu_moe_token_unpermute(permuted, sorted_indices, probs=probs), x)


def test_compute_expert_tokens_gives_group_ends():
    sorted_experts = torch.tensor([0, 0, 2, 2, 2, 5], dtype=torch.int32)
    assert tn.npu_moe_compute_expert_tokens(sorted_experts, E).tolist() == [2, 2, 5, 5, 5, 6]


class _Numel(torch.nn.Module):
    """vllm-ascend's token count idiom: specialised by non-strict tracing, symbolic in strict mode."""

    def forward(self, h):
        n = h.shape[:-1].numel()
        return h + torch.arange(n, dtype=h.dtype)[:, None]


class _Branch(torch.nn.Module):
    def forward(self, h):
        return h * 2 if h.shape[0] == 5 else h


class _WeightData(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3), requires_grad=False)

    def forward(self, x):
        return torch.matmul(x, self.weight.data)


class _StableSort(torch.nn.Module):
    def forward(self, x):
        return torch.argsort(x, stable=True)


def _export(model, x, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exporters.export(model, (x,), **kw)


def test_numel_token_count_stays_dynamic():
    proto = _export(_Numel(), torch.randn(5, 4), dynamic_shapes=({0: Dim.AUTO},))
    sess = ort.InferenceSession(proto.SerializeToString())
    for n in (3, 9):
        h = np.random.default_rng(n).standard_normal((n, 4)).astype(np.float32)
        np.testing.assert_allclose(sess.run(None, {"h": h})[0], _Numel()(torch.from_numpy(h)).numpy())


def test_a_size_fixed_by_both_tracers_is_refused_with_input_and_dim():
    with pytest.raises(ExportError, match="input 'h' dimension 0 \\(fixed at 5\\)"):
        _export(_Branch(), torch.randn(5, 4), dynamic_shapes=({0: Dim.AUTO},))


def test_known_idioms_say_what_to_do():
    with pytest.raises(ExportError, match="stable=True"):
        _export(_StableSort(), torch.randn(5), dynamic_shapes=({0: Dim("T")},))
    legacy = _export(_WeightData(), torch.randn(5, 4), dynamo=False, input_names=["x"],
                     dynamic_axes={"x": {0: "T"}})
    assert "MatMul" in [n.op_type for n in legacy.graph.node]


def test_init_routing_v1_matches_its_definition():
    x, idx = _routing(4)
    _, _, row_idx = tn.npu_moe_gating_top_k_softmax(torch.randn(T, E), k=K)
    for active in (T, 3):
        ex, expanded_row_idx, expanded_expert_idx = tn.npu_moe_init_routing(x, row_idx, idx, active)
        order = np.argsort(idx.reshape(-1).numpy(), kind="stable")  # sort by expert, ties by flat position
        dst_to_src = row_idx.reshape(-1).numpy()[order]
        assert torch.equal(expanded_expert_idx, idx.reshape(-1)[torch.from_numpy(order)])
        want = np.zeros(T * K, np.int32)
        want[dst_to_src] = np.arange(T * K)
        assert torch.equal(expanded_row_idx, torch.from_numpy(want))
        torch.testing.assert_close(ex, x[torch.from_numpy(dst_to_src[:min(active, T) * K] % T)])
