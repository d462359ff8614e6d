"""One rank of an MC2 MoE layer over torch.distributed (gloo), run by tests/test_torch_npu_ranks.py
(or ``torchrun --nproc-per-node N -m tests.mc2_rank_worker`` from the repository root).

Each rank routes its own tokens, dispatches them with npu_moe_distribute_dispatch_v2 (or the v1
pair), runs its local experts (npu_grouped_matmul → npu_swiglu → npu_grouped_matmul, float or w8a8
through the dispatch's quant_mode=2, or float on the MXFP8 rows of quant_mode=4), combines, and checks:
- expand_x / expert_token_nums against op-plugin's golden: one init routing over every rank's
  tokens, the rows of this rank's experts;
- the combined output against the same layer on this rank's tokens with ep_world_size=1;
- with zero and copy experts (LongCat's identity experts): their pairs stay on the source rank and
  combine adds them from ``ori_x``, as on one rank;
- vllm-ascend's form: the group named by its HCCL communicator name (``use_gloo_as_hccl``),
  ``x_active_mask`` and ``expert_scales`` / ``expand_scales``.
Prints ``rank R ok <max abs err>`` or raises.
"""

from __future__ import annotations

import os
import sys

import torch
import torch.distributed as dist

from ascend_moe_onnx.exporters import torch_npu as tn
from ascend_moe_onnx.exporters.torch_npu import mx_quant

TOKENS = (5, 3, 0, 7)  # per rank (rank 2 of 4 sends nothing)
HIDDEN, INTER, EXPERTS, TOP_K = 32, 16, 8, 2
ZERO, COPY = 2, 3  # special experts of the third configuration: ids [8, 10) zero, [10, 13) copy


def weights(experts: int, seed: int = 0):
    """The whole layer's expert weights (identical on every rank)."""
    g = torch.Generator().manual_seed(seed)
    w13 = torch.randn(experts, HIDDEN, 2 * INTER, generator=g) * 0.2
    w2 = torch.randn(experts, INTER, HIDDEN, generator=g) * 0.2
    return w13, w2


def quantized(w: torch.Tensor):
    """int8 per-output-channel weights and float32 scales [E, N]."""
    scale = w.abs().amax(dim=1) / 127
    return (w / scale[:, None, :]).round().clamp(-128, 127).to(torch.int8), scale


def experts_forward(expand_x, dynamic_scales, counts, w13, w2, quant: bool, mx: bool = False):
    """The local experts on dispatched rows (grouped by local expert, counts per expert); MX rows
    (quant_mode=4) at their float32 values."""
    if mx:
        expand_x = mx_quant.mx_dequantize(expand_x, dynamic_scales.reshape(expand_x.shape[0], -1, 2), mx_quant.E4M3)
    if not quant:
        h = tn.npu_grouped_matmul([expand_x], [w13], group_list=counts, group_type=0, group_list_type=1,
                                  split_item=3)[0]
        h = tn.npu_swiglu(h)
        return tn.npu_grouped_matmul([h], [w2], group_list=counts, group_type=0, group_list_type=1, split_item=3)[0]
    q13, s13 = quantized(w13)
    q2, s2 = quantized(w2)
    h = tn.npu_grouped_matmul([expand_x], [q13], scale=[s13], per_token_scale=[dynamic_scales], group_list=counts,
                              group_type=0, group_list_type=1, split_item=3, output_dtype=torch.float32)[0]
    h = tn.npu_swiglu(h)
    hq, hs = tn.npu_dynamic_quant(h)
    return tn.npu_grouped_matmul([hq], [q2], scale=[s2], per_token_scale=[hs], group_list=counts, group_type=0,
                                 group_list_type=1, split_item=3, output_dtype=torch.float32)[0]


def layer(x, ids, scales, ranks, rank, w13, w2, quant: bool, v1: bool, special: bool = False, group_ep="ep",
          mask=None, mx: bool = False):
    """dispatch → local experts → combine with ``ranks`` ranks (w13 / w2: this rank's experts);
    ``mask``: x_active_mask, with expert_scales sent along (vllm-ascend's MC2 arguments)."""
    dispatch = tn.npu_moe_distribute_dispatch if v1 else tn.npu_moe_distribute_dispatch_v2
    combine = tn.npu_moe_distribute_combine if v1 else tn.npu_moe_distribute_combine_v2
    extra = dict(zero_expert_num=ZERO, copy_expert_num=COPY) if special else {}
    masked = dict(x_active_mask=mask) if mask is not None else {}
    weights = dict(expert_scales=scales) if mask is not None else {}
    if mx:
        extra["y_dtype"] = torch.float8_e4m3fn
    out = dispatch(x, ids, group_ep, ranks, rank, EXPERTS, quant_mode=4 if mx else 2 if quant else 0, **extra,
                   **masked, **weights)
    extra.pop("y_dtype", None)
    expand_x, dynamic_scales, assist, counts, ep_recv_counts, tp_recv_counts, expand_scales = out
    y = experts_forward(expand_x, dynamic_scales, counts, w13, w2, quant, mx)
    if special:
        extra["ori_x"] = x
    if expand_scales is not None:
        masked["expand_scales"] = expand_scales
    return combine(y, ids, assist, ep_recv_counts, scales, group_ep, ranks, rank, EXPERTS,
                   tp_send_counts=tp_recv_counts, **extra, **masked), out


def hccl_named_group_with_mask(xs, probs, ranks, rank, w13, w2, g) -> float:
    """vllm-ascend's MC2 calls: ``group_ep`` from ``group._get_backend(torch.device("npu"))
    .get_hccl_comm_name(rank)`` on a new gloo group, ``x_active_mask`` leaving out each rank's last
    token, ``expert_scales`` coming back as ``expand_scales``. Masked tokens add nothing."""
    tn.use_gloo_as_hccl()
    group = dist.new_group(list(range(ranks)))
    name = group._get_backend(torch.device("npu")).get_hccl_comm_name(rank)
    names: list = [None] * ranks
    dist.all_gather_object(names, name)
    assert len(set(names)) == 1 and name, names
    local = EXPERTS // ranks
    mine = slice(rank * local, (rank + 1) * local)
    tokens = [x.shape[0] for x in xs]
    ids = [torch.stack([torch.randperm(EXPERTS, generator=g)[:TOP_K] for _ in range(n)]).to(torch.int32)
           if n else torch.zeros(0, TOP_K, dtype=torch.int32) for n in tokens]
    masks = [torch.arange(n) < n - 1 for n in tokens]
    got, out = layer(xs[rank], ids[rank], probs[rank], ranks, rank, w13[mine], w2[mine], False, False,
                     group_ep=name, mask=masks[rank])
    expand_scales, assist, counts = out[6], out[2].reshape(-1, 128), out[3]
    n = int(counts.sum())
    for i in range(n):  # each received row's weight: its source rank's expert_scales of that pair
        src, token, slot = (int(v) for v in assist[i, :3])
        assert masks[src][token], "a masked token's row was sent"
        assert expand_scales[i] == probs[src][token, slot], (i, src, token, slot)
    if not tokens[rank]:
        return 0.0
    want, _ = layer(xs[rank], ids[rank], probs[rank], 1, 0, w13, w2, False, False)
    want[~masks[rank]] = 0
    err = float((got - want).abs().max())
    assert err <= 1e-5 * max(1.0, float(want.abs().max())), err
    return err


def main() -> None:
    rank, ranks = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    dist.init_process_group("gloo", rank=rank, world_size=ranks)
    local = EXPERTS // ranks
    w13, w2 = weights(EXPERTS)
    tokens = TOKENS[:ranks]
    g = torch.Generator().manual_seed(100)
    xs = [torch.randn(n, HIDDEN, generator=g) for n in tokens]
    probs = [torch.rand(n, TOP_K, generator=g) for n in tokens]
    mine = slice(rank * local, (rank + 1) * local)
    worst = 0.0
    for quant, v1, special, mx in ((False, False, False, False), (True, False, False, False),
                                   (False, True, False, False), (False, False, True, False),
                                   (False, False, False, True)):
        choices = EXPERTS + (ZERO + COPY if special else 0)
        ids = [torch.stack([torch.randperm(choices, generator=g)[:TOP_K] for _ in range(n)]).to(torch.int32)
               if n else torch.zeros(0, TOP_K, dtype=torch.int32) for n in tokens]
        got, (expand_x, dyn, _, counts, _, _, _) = layer(xs[rank], ids[rank], probs[rank], ranks, rank, w13[mine],
                                                         w2[mine], quant, v1, special, mx=mx)
        # op-plugin's golden for expand_x: one init routing over all ranks' tokens, this rank's experts
        all_x, all_ids = torch.cat(xs), torch.cat(ids)
        gx, _, gcounts, gscale = tn.npu_moe_init_routing_v2(
            all_x, all_ids, active_num=all_ids.numel(), expert_num=choices, expert_tokens_num_type=1,
            expert_tokens_num_flag=True, active_expert_range=[rank * local, (rank + 1) * local],
            quant_mode=1 if quant else -1)
        n = int(gcounts.sum())
        if mx:  # MX rows: npu_dynamic_mx_quant of the golden rows, scales [A, even(ceil(H / 32))]
            gx, gscale = tn.npu_dynamic_mx_quant(gx, dst_type=torch.float8_e4m3fn)
            gscale = gscale.reshape(gx.shape[0], -1)
            assert dyn.dtype == torch.uint8 and dyn.shape[1] == (-(-HIDDEN // 32) + 1) // 2 * 2, dyn.shape
            assert torch.equal(dyn[:n], gscale[:n]), "MX scales differ from the golden"
            expand_x, gx = expand_x.view(torch.uint8), gx.view(torch.uint8)
        assert torch.equal(counts, gcounts.to(torch.int64)), (counts, gcounts)
        assert torch.equal(expand_x[:n], gx[:n]), "expand_x differs from the golden rows"
        assert not expand_x[n:].any(), "rows past the received ones must be 0"
        if quant:
            assert torch.equal(dyn[:n], gscale[:n]), "dynamic_scales differ from the golden"
        assert got.shape == xs[rank].shape and got.dtype == xs[rank].dtype
        if tokens[rank]:  # the one-rank result on this rank's tokens, every expert local
            want, _ = layer(xs[rank], ids[rank], probs[rank], 1, 0, w13, w2, quant, v1, special, mx=mx)
            err = float((got - want).abs().max())
            assert err <= 1e-5 * max(1.0, float(want.abs().max())), (quant, v1, special, mx, err)
            worst = max(worst, err)
    worst = max(worst, hccl_named_group_with_mask(xs, probs, ranks, rank, w13, w2, g))
    print(f"rank {rank} ok {worst:.3g}", flush=True)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    try:
        main()
    except Exception as exc:  # report, then fail the rank
        print(f"rank {os.environ.get('RANK')} failed: {type(exc).__name__}: {exc}", file=sys.stderr, flush=True)
        raise
