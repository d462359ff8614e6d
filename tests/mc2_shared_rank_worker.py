"""One rank of an MC2 MoE layer with shared-expert ranks over torch.distributed (gloo), run by
tests/test_torch_npu_shared_ranks.py (or ``torchrun --nproc-per-node N -m tests.mc2_shared_rank_worker``
from the repository root; N = 2 or 4).

Ranks ``[0, S)`` hold the shared experts, the others the MoE experts. Each rank dispatches its
tokens, runs its side (the MoE rank its local experts, the shared-expert rank its shared expert,
both npu_grouped_matmul → npu_swiglu → npu_grouped_matmul, float or w8a8 through quant_mode=2),
combines, and checks:
- its combined output against a dense float64 reference written here token by token: the routed
  experts weighted by their routing weights plus every shared expert on the token, weight 1;
- expand_x, dynamic_scales, expert_token_nums and ep_recv_counts against a golden built from every
  rank's tokens: on a MoE rank one init routing over all tokens (op-plugin's golden), on a
  shared-expert rank the tokens of the ranks that send to it, in torch_npu's placement;
- at 2 ranks, each kind of rank's expert side exported and run in ONNX Runtime.
Prints ``rank R ok <max abs err>`` or raises.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.exporters.torch_npu.quant import quantize_rows

TOKENS = (5, 3, 6, 4)  # per rank (global_bs = 6·N); with x_active_mask every rank has MASKED_TOKENS
MASKED_TOKENS = 5
HIDDEN, INTER, EXPERTS, TOP_K = 32, 16, 6, 2  # 6 experts: 6, 3 or 2 MoE ranks
FLOAT_TOL, W8A8_TOL = 1e-5, 3e-2  # relative to the output's largest value (int8 activations: ~1/127 per step)


def weights(experts: int, seed: int):
    """SwiGLU experts ``[E, H, 2I]``, ``[E, I, H]`` (identical on every rank)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(experts, HIDDEN, 2 * INTER, generator=g) * 0.2, torch.randn(experts, INTER, HIDDEN, generator=g) * 0.2


def swiglu(x, w13, w2):
    gate, up = (x.double() @ w13.double()).chunk(2, dim=-1)
    return (torch.nn.functional.silu(gate) * up) @ w2.double()


def dense_reference(x, ids, probs, w13, w2, s13, s2, mask=None):
    """``out[t] = Σ_j probs[t, j]·expert_ids[t, j](x_t) + Σ_s shared_s(x_t)`` (float64); tokens the
    mask leaves out: 0."""
    out = torch.zeros(x.shape[0], HIDDEN, dtype=torch.float64)
    for t in range(x.shape[0]):
        if mask is not None and not mask[t]:
            continue
        for j in range(ids.shape[1]):
            e = int(ids[t, j])
            out[t] += probs[t, j].double() * swiglu(x[t:t + 1], w13[e], w2[e])[0]
        for s in range(s13.shape[0]):
            out[t] += swiglu(x[t:t + 1], s13[s], s2[s])[0]
    return out


def quantized(w: torch.Tensor):
    scale = w.abs().amax(dim=1) / 127
    return (w / scale[:, None, :]).round().clamp(-128, 127).to(torch.int8), scale


class ExpertSide(torch.nn.Module):
    """A rank's expert side on its dispatched rows: its local experts (a shared-expert rank: its one
    shared expert) as grouped matmuls over ``expert_token_nums``."""

    def __init__(self, w13, w2):
        super().__init__()
        self.w13 = torch.nn.Parameter(w13, requires_grad=False)
        self.w2 = torch.nn.Parameter(w2, requires_grad=False)

    def forward(self, expand_x, counts):
        h = tn.npu_grouped_matmul([expand_x], [self.w13], group_list=counts, group_type=0, group_list_type=1,
                                  split_item=3)[0]
        h = tn.npu_swiglu(h)
        return tn.npu_grouped_matmul([h], [self.w2], group_list=counts, group_type=0, group_list_type=1,
                                     split_item=3)[0]


def expert_side_w8a8(expand_x, dynamic_scales, counts, w13, w2):
    q13, sc13 = quantized(w13)
    q2, sc2 = quantized(w2)
    h = tn.npu_grouped_matmul([expand_x], [q13], scale=[sc13], per_token_scale=[dynamic_scales], group_list=counts,
                              group_type=0, group_list_type=1, split_item=3, output_dtype=torch.float32)[0]
    hq, hs = tn.npu_dynamic_quant(tn.npu_swiglu(h))
    return tn.npu_grouped_matmul([hq], [q2], scale=[sc2], per_token_scale=[hs], group_list=counts, group_type=0,
                                 group_list_type=1, split_item=3, output_dtype=torch.float32)[0]


def shared_golden(rank, ranks, shared_ranks, shared_num, v1, xs, masks):
    """The rows a shared-expert rank receives, as (source rank, token) pairs in expand_x's order,
    and ep_recv_counts: v2 every token of the ranks r with r mod R = rank mod R (R = S / shared
    experts), by source rank; v1 its own tokens, then the MoE ranks' contiguous blocks of
    floor((q+r+1)·BS/S) - floor((q+r)·BS/S) tokens."""
    pairs, counts = [], []
    if not v1:
        per_expert = shared_ranks // shared_num
        for r in range(ranks):
            mine = [t for t in range(len(xs[r])) if masks is None or masks[r][t]] if r % per_expert == rank % per_expert \
                else []
            pairs += [(r, t) for t in mine]
            counts.append(len(mine))
        return pairs, counts
    bs_q = len(xs[rank])
    pairs += [(rank, t) for t in range(bs_q)]
    counts += [(s + 1 + rank) * bs_q // shared_ranks - (s + rank) * bs_q // shared_ranks for s in range(shared_ranks)]
    for r in range(shared_ranks, ranks):
        bs = len(xs[r])
        start = (rank + r) * bs // shared_ranks - r * bs // shared_ranks
        size = (rank + r + 1) * bs // shared_ranks - (rank + r) * bs // shared_ranks
        pairs += [(r, t) for t in range(start, start + size)]
        counts.append(size)
    return pairs, counts


def run_case(rank, ranks, shared_ranks, shared_num, quant, v1, xs, ids, probs, w13, w2, s13, s2, masks=None,
             export=False, global_bs=0) -> float:
    """One configuration on this rank; returns the error against the dense reference."""
    dispatch = tn.npu_moe_distribute_dispatch if v1 else tn.npu_moe_distribute_dispatch_v2
    combine = tn.npu_moe_distribute_combine if v1 else tn.npu_moe_distribute_combine_v2
    common = dict(expert_shard_type=0, shared_expert_num=shared_num, shared_expert_rank_num=shared_ranks,
                  global_bs=global_bs)
    mask = masks[rank] if masks is not None else None
    extra = {"x_active_mask": mask} if mask is not None else {}
    g = torch.Generator().manual_seed(7)
    scales = torch.rand(shared_num + EXPERTS, HIDDEN, generator=g) + 0.5 if quant else None
    expand_x, dyn, assist, counts, recv_counts, tp_counts, _ = dispatch(
        xs[rank], ids[rank], "ep", ranks, rank, EXPERTS, scales=scales, quant_mode=2 if quant else 0, **common,
        **extra)
    shared = rank < shared_ranks
    local = 1 if shared else EXPERTS // (ranks - shared_ranks)
    first = (rank - shared_ranks) * local
    which = 0 if v1 else rank // (shared_ranks // shared_num)  # a shared-expert rank's shared expert
    if shared:
        my13, my2 = s13[which:which + 1], s2[which:which + 1]
        pairs, want_counts = shared_golden(rank, ranks, shared_ranks, shared_num, v1, xs, masks if not v1 else None)
        n = len(pairs)
        gx = torch.stack([xs[r][t] for r, t in pairs]) if n else torch.zeros(0, HIDDEN)
        grow = torch.full((n,), which, dtype=torch.int64)
        want_recv = torch.tensor(want_counts).cumsum(0)
    else:
        my13, my2 = w13[first:first + local], w2[first:first + local]
        # op-plugin's golden: one init routing over every rank's tokens, this rank's experts
        all_x, all_ids = torch.cat(xs), torch.cat(ids)
        keep = torch.cat(masks) if masks is not None and not v1 else torch.ones(all_x.shape[0], dtype=torch.bool)
        gx, _, gcounts, _ = tn.npu_moe_init_routing_v2(
            all_x[keep], all_ids[keep], active_num=int(keep.sum()) * TOP_K, expert_num=EXPERTS,
            expert_tokens_num_type=1, expert_tokens_num_flag=True, active_expert_range=[first, first + local])
        n = int(gcounts.sum())
        gx = gx[:n]
        grow = torch.repeat_interleave(torch.arange(first, first + local), gcounts.to(torch.int64)) + shared_num
        want_counts = gcounts.to(torch.int64).tolist()
        want_recv = None
    assert counts.shape == (local,) and int(counts.sum()) == n, (counts, n)
    if not shared:
        assert counts.tolist() == want_counts, (counts, want_counts)
    else:
        assert recv_counts.shape == (ranks,) and torch.equal(recv_counts.to(torch.int64), want_recv), \
            (recv_counts, want_recv)
    assert recv_counts.shape == (ranks * local,) and int(recv_counts[-1]) == n
    if quant:  # each row quantised after its expert's row of scales (shared experts' rows first)
        gq, gs = quantize_rows(gx.float() * scales[grow]) if n else (torch.zeros(0, HIDDEN, dtype=torch.int8),
                                                                     torch.zeros(0))
        assert torch.equal(expand_x[:n], gq) and torch.equal(dyn[:n], gs), "quantised rows differ from the golden"
    else:
        assert torch.equal(expand_x[:n], gx), "expand_x differs from the golden rows"
    assert not expand_x[n:].any(), "rows past the received ones must be 0"
    if shared:  # A on a shared-expert rank (op-plugin's allocation)
        gbs = global_bs or len(xs[rank]) * ranks
        want_a = gbs // shared_ranks if v1 else gbs // ranks * -(-ranks // (shared_ranks // shared_num))
        assert expand_x.shape[0] == max(want_a, n), (expand_x.shape, want_a, n)
    if quant:  # the smoothing scales folded into the weights, as quantised checkpoints do
        rows = torch.tensor([which]) if shared else torch.arange(first, first + local) + shared_num
        y = expert_side_w8a8(expand_x, dyn, counts, my13 / scales[rows][:, :, None], my2)
    else:
        side = ExpertSide(my13, my2)
        y = side(expand_x, counts)
        if export:
            check_export(side, expand_x, counts, y)
    out = combine(y, ids[rank], assist, recv_counts, probs[rank], "ep", ranks, rank, EXPERTS,
                  tp_send_counts=tp_counts, **common, **extra)
    assert out.shape == xs[rank].shape and out.dtype == xs[rank].dtype
    want = dense_reference(xs[rank], ids[rank], probs[rank], w13, w2, s13, s2, None if v1 else mask)
    err = float((out.double() - want).abs().max()) if out.numel() else 0.0
    tol = (W8A8_TOL if quant else FLOAT_TOL) * max(1.0, float(want.abs().max()) if want.numel() else 1.0)
    assert err <= tol, (ranks, shared_ranks, shared_num, quant, v1, err, tol)
    return err


def check_export(side: ExpertSide, expand_x, counts, eager) -> None:
    """The expert side as the project's expert-parallel export writes a rank: one ONNX model run in
    ONNX Runtime (with the custom-op library) on this rank's dispatched rows."""
    from torch.export import Dim

    from ascend_moe_onnx import exporters
    from tests.ascend_code_cases import ort_outputs

    model = exporters.export(side, (expand_x, counts), dynamic_shapes=({0: Dim("rows", min=2)}, None))
    assert "GroupedMatmul" in [node.op_type for node in model.graph.node]
    names = [i.name for i in model.graph.input]
    got = ort_outputs(model, dict(zip(names, (expand_x.numpy(), counts.numpy()))), library=True)[0]
    err = float((torch.from_numpy(got) - eager).abs().max())
    assert err <= 1e-5 * max(1.0, float(eager.abs().max())), err


def xs_ids(tokens, g):
    """Every rank's tokens, routing weights and top-k expert ids (identical on every rank)."""
    xs = [torch.randn(n, HIDDEN, generator=g) for n in tokens]
    probs = [torch.rand(n, TOP_K, generator=g) for n in tokens]
    ids = [torch.stack([torch.randperm(EXPERTS, generator=g)[:TOP_K] for _ in range(n)]).to(torch.int32)
           for n in tokens]
    return xs, probs, ids


def main() -> None:
    rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    w13, w2 = weights(EXPERTS, 0)
    s13, s2 = weights(2, 1)  # up to two shared experts
    tokens = TOKENS[:ranks]
    g = torch.Generator().manual_seed(100)
    xs, probs, ids = xs_ids(tokens, g)
    # (shared_expert_rank_num, shared_expert_num, quant, v1): every valid S at this size, both versions
    cases = [(1, 1, False, False), (1, 1, True, False), (1, 1, False, True)]
    if ranks == 4:
        cases += [(2, 1, False, False), (2, 2, False, False), (2, 2, True, False), (2, 1, False, True),
                  (2, 1, True, True)]
    worst = 0.0
    for s, num, quant, v1 in cases:
        worst = max(worst, run_case(rank, ranks, s, num, quant, v1, xs, ids, probs, w13, w2, s13[:num], s2[:num],
                                    export=ranks == 2 and not quant and not v1, global_bs=max(tokens) * ranks))
    # x_active_mask (torch_npu: the same BS on every rank then) leaves each rank's last token out: no
    # shared row for it, it adds nothing (v2); the first version with shared-expert ranks (Atlas A3)
    # reserves the mask: every token counts
    xs, probs, ids = xs_ids(ranks * [MASKED_TOKENS], g)
    masks = [torch.arange(MASKED_TOKENS) < MASKED_TOKENS - 1 for _ in range(ranks)]
    for v1 in (False, True):
        worst = max(worst, run_case(rank, ranks, 1, 1, False, v1, xs, ids, probs, w13, w2, s13[:1], s2[:1],
                                    masks=masks))
    print(f"rank {rank} ok {worst:.3g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # report, then fail the rank
        print(f"rank {os.environ.get('RANK')} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
