"""MC2 dispatch / combine over several ranks (``ep_world_size > 1``), run eagerly with
``torch.distributed`` (gloo on CPU), with torch_npu's semantics for expert parallelism without a TP
group or shared-expert ranks (op-plugin's ``npu_moe_distribute_dispatch_v2`` documentation and test
golden).

Rank r of N owns the L = moe_expert_num / N experts ``[r·L, (r+1)·L)``. Dispatch sends every
(token, slot) pair to the rank owning its expert; the receiving rank's ``expand_x`` holds its rows
ordered by local expert, then source rank, then token (the order of op-plugin's golden: one
init routing over the concatenation of every rank's tokens), zero-padded to
``A = (global_bs or BS·N) · min(L, K)`` rows. Combine sends each row back to its source and sums
``expert_scales[t, j] · row`` per token (plus ``shared_expert_x``). Pairs routed to the zero / copy /
constant experts (ids from moe_expert_num on) never leave their rank: combine adds their outputs
from ``ori_x`` there (``distribute._special_experts``). Pairs ``x_active_mask`` leaves out are not
sent and add nothing. ``group_ep`` names a group registered here, e.g. by the HCCL communicator
name ``hccl.ProcessGroupHCCL`` hands out.

Where torch_npu leaves values to the implementation (``assist_info_for_combine``: "pass it to
combine"), the stand-in writes, for expanded row i, ``(source rank, token, slot)`` at
``assist_info[128·i : 128·i + 3]``. These calls do not export: each rank's expert side exports with
the project's expert-parallel export (docs/expert-parallel.md).
"""

from __future__ import annotations

import math

import torch
import torch.distributed as dist

from ._args import EXPERT_PARALLEL_DOC, require, unsupported
from .mx_quant import E2M1, mx_format, npu_dynamic_mx_quant
from .quant import quantize_rows

ASSIST_WIDTH = 128  # torch_npu's assist_info_for_combine holds A·128 int32
# dispatch's quant_mode: op-plugin's QuantMode (op_plugin/utils/OpUtils.h) 0 none, 2 per token, 4 MX;
# 1 (static) and 3 (per group of 128) have no documented dispatch semantics, 5 (MX with clipping) none
QUANT_NONE, QUANT_PER_TOKEN, QUANT_MX = 0, 2, 4
QUANT_MODES_DOC = ("use 0 (none), 2 (per-token dynamic int8) or 4 (MX: npu_dynamic_mx_quant of each row, "
                   "y_dtype its element type)")


def mx_rows(fn: str, rows: torch.Tensor, y_dtype) -> tuple[torch.Tensor, torch.Tensor]:
    """quant_mode 4 (MX): each row quantised as ``npu_dynamic_mx_quant(row, dst_type=y_dtype)`` does
    (blocks of 32 along H, e8m0 scales; op-plugin names the mode MX and gives its outputs: expand_x
    of ``y_dtype``, dynamic_scales FLOAT8_E8M0 ``[A, ceil(H / 32)`` rounded up to even``]``).
    Returns ``(y, scales uint8 [rows, 2·ceil(H / 64)])``, the scales as npu_dynamic_mx_quant's bits."""
    if y_dtype is None:
        unsupported(fn, "y_dtype", y_dtype, "quant_mode=4 (MX) quantises to y_dtype: pass torch.float8_e4m3fn, "
                    "torch.float8_e5m2 or torch_npu.float4_e2m1fn_x2")
    fmt = mx_format(fn, y_dtype, "y_dtype")
    require(fmt is not E2M1 or rows.shape[-1] % 2 == 0, fn, "x", "must have an even H with a float4 y_dtype",
            rows)
    y, scales = npu_dynamic_mx_quant(rows, dst_type=y_dtype)
    return y, scales.flatten(-2)
_GROUPS: dict[str, dist.ProcessGroup] = {}


def register_group(name: str, group: dist.ProcessGroup) -> None:
    """Make ``group_ep=name`` (the HCCL communicator name the model code passes) mean ``group``."""
    _GROUPS[name] = group


def _group(fn: str, group_ep: str, ep_world_size: int, ep_rank_id: int):
    """The process group of ``group_ep``: a registered one, else the default group when its size is
    ``ep_world_size``."""
    if torch.compiler.is_compiling() or torch.compiler.is_exporting() or torch.onnx.is_in_onnx_export():
        raise NotImplementedError(
            f"{fn}: ep_world_size={ep_world_size} runs eagerly over torch.distributed and does not export; "
            f"export each rank's expert side with the project's expert-parallel export ({EXPERT_PARALLEL_DOC})")
    require(dist.is_available() and dist.is_initialized(), fn, "ep_world_size",
            "> 1 needs an initialised torch.distributed process group (e.g. torchrun with gloo)", ep_world_size)
    group = _GROUPS.get(group_ep)
    if group is None:
        require(dist.get_world_size() == ep_world_size, fn, "group_ep",
                lambda: f"must name a group registered with register_group(), or the default group must "
                        f"have ep_world_size={ep_world_size} ranks (it has {dist.get_world_size()})", group_ep)
    size = dist.get_world_size(group)
    require(size == ep_world_size, fn, "ep_world_size", lambda: f"must be the size of group '{group_ep}' ({size})",
            ep_world_size)
    rank = dist.get_rank(group)
    require(rank == ep_rank_id, fn, "ep_rank_id", lambda: f"must be this process's rank in '{group_ep}' ({rank})",
            ep_rank_id)
    return group


def _exchange(t: torch.Tensor, send_splits: list[int], recv_splits: list[int], group) -> torch.Tensor:
    """all_to_all_single of the rows of ``t`` (any dtype: sent as bytes, which gloo carries)."""
    width = math.prod(t.shape[1:]) * t.element_size()
    raw = t.contiguous().view(torch.uint8).reshape(t.shape[0], width) if t.numel() else \
        torch.zeros(t.shape[0], width, dtype=torch.uint8)
    out = torch.empty(sum(recv_splits), width, dtype=torch.uint8)
    dist.all_to_all_single(out, raw, recv_splits, send_splits, group=group)
    return out.view(t.dtype).reshape(sum(recv_splits), *t.shape[1:])


def _counts_exchange(counts: torch.Tensor, group, ranks: int) -> torch.Tensor:
    """Row s of the result: what rank s sent this rank (``counts`` [N, L] int64, row d: sent to d)."""
    out = torch.empty_like(counts)
    dist.all_to_all_single(out, counts.contiguous(), group=group)
    return out.reshape(ranks, -1)


def _checks(fn, ep_world_size, moe_expert_num, tp_world_size, shared_expert_rank_num):
    if tp_world_size not in (0, 1):
        unsupported(fn, "tp_world_size", tp_world_size, "torch_npu reserves it (0 or 1: no TP group)")
    require(moe_expert_num % ep_world_size == 0, fn, "moe_expert_num",
            lambda: f"must be divisible by ep_world_size={ep_world_size}", moe_expert_num)
    if shared_expert_rank_num:
        unsupported(fn, "shared_expert_rank_num", shared_expert_rank_num,
                    "several ranks run plain expert parallelism here (no shared-expert ranks)")


def active_pairs(fn: str, x_active_mask, expert_ids: torch.Tensor) -> torch.Tensor | None:
    """``x_active_mask`` as a bool [BS, K] of the pairs that take part (None: every pair). torch_npu
    takes [BS] (a token's pairs; the true entries before the false ones) or [BS, K] (each pair)."""
    if x_active_mask is None:
        return None
    bs, k = expert_ids.shape
    require(isinstance(x_active_mask, torch.Tensor) and x_active_mask.dtype == torch.bool and
            tuple(x_active_mask.shape) in ((bs,), (bs, k)), fn, "x_active_mask",
            lambda: f"must be a bool tensor [BS] = [{bs}] or [BS, K] = [{bs}, {k}]", x_active_mask)
    if x_active_mask.dim() == 1:
        first_false = int((~x_active_mask).int().argmax()) if bool((~x_active_mask).any()) else bs
        require(not bool(x_active_mask[first_false:].any()), fn, "x_active_mask",
                "must hold its true entries before its false ones (e.g. [true, false, true] is refused)",
                x_active_mask.tolist())
        return x_active_mask[:, None].expand(bs, k)
    return x_active_mask


def dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None, quant_mode=0,
             x_active_mask=None, expert_scales=None, global_bs=0, expert_token_nums_type=1, tp_world_size=0,
             shared_expert_rank_num=0, zero_expert_num=0, copy_expert_num=0, const_expert_num=0, y_dtype=None):
    """npu_moe_distribute_dispatch_v2 with ``ep_world_size > 1`` (module docstring): ``(expand_x [A, H],
    dynamic_scales [A] (quant_mode 2), [A, 2·ceil(H / 64)] e8m0 bits (4, :func:`mx_rows`) or None,
    assist_info_for_combine int32 [A·128], expert_token_nums int64 [L],
    ep_recv_counts int32 [N·L], tp_recv_counts int32 [1], expand_scales [A] or None)``.

    Pairs that ``x_active_mask`` leaves out are not sent; ``expert_scales`` [BS, K] float32, when
    given, travel with their rows and come back as ``expand_scales`` (the received rows' weights)."""
    fn = "npu_moe_distribute_dispatch_v2"
    _checks(fn, ep_world_size, moe_expert_num, tp_world_size, shared_expert_rank_num)
    group = _group(fn, group_ep, ep_world_size, ep_rank_id)
    require(x.dim() == 2, fn, "x", "must be 2-D [BS, H]", x)
    require(expert_ids.dim() == 2 and expert_ids.shape[0] == x.shape[0], fn, "expert_ids",
            lambda: f"must be [{x.shape[0]}, K]", expert_ids)
    ranks, experts = ep_world_size, moe_expert_num
    local = experts // ranks
    bs, k = expert_ids.shape
    flat = expert_ids.reshape(-1).to(torch.int64)
    every = experts + zero_expert_num + copy_expert_num + const_expert_num
    bad = (flat < 0) | (flat >= every)
    if bool(bad.any()):
        require(False, fn, "expert_ids", f"values must be in [0, moe_expert_num + zero_expert_num + copy_expert_num "
                f"+ const_expert_num = {every})", int(flat[bad][0]))
    active = active_pairs(fn, x_active_mask, expert_ids)
    if expert_scales is not None:
        require(isinstance(expert_scales, torch.Tensor) and tuple(expert_scales.shape) == (bs, k), fn,
                "expert_scales", lambda: f"must be [BS, K] = [{bs}, {k}]", expert_scales)
    # send order: by expert, then token (a token's K experts differ); the special experts' pairs stay
    sent = flat < experts if active is None else (flat < experts) & active.reshape(-1)
    routed = torch.nonzero(sent).flatten()
    order = routed[torch.argsort(flat[routed] * max(bs * k, 1) + routed)]
    src_token, src_slot = order // k, order % k
    rows = x[src_token]
    row_scales = None
    if quant_mode == QUANT_MX:
        rows, row_scales = mx_rows(fn, rows, y_dtype)
    if quant_mode == QUANT_PER_TOKEN:
        r = rows.float()
        if scales is not None:
            require(scales.dim() == 2 and tuple(scales.shape) == (experts, x.shape[1]), fn, "scales",
                    lambda: f"must be [moe_expert_num, H] = [{experts}, {x.shape[1]}]", scales)
            r = r * scales.float()[flat[order]]
        rows, row_scales = quantize_rows(r)
    row_weights = expert_scales.reshape(-1)[order].float() if expert_scales is not None else None
    counts = torch.bincount(flat[routed], minlength=experts).reshape(ranks, local)
    recv = _counts_exchange(counts, group, ranks)  # [N source ranks, L]
    send_splits, recv_splits = counts.sum(1).tolist(), recv.sum(1).tolist()
    me = torch.full_like(src_token, dist.get_rank(group))
    meta = torch.stack([me, src_token, src_slot, flat[order] % local], dim=1).to(torch.int32)
    got_rows = _exchange(rows, send_splits, recv_splits, group)
    got_meta = _exchange(meta, send_splits, recv_splits, group)
    got_scales = _exchange(row_scales, send_splits, recv_splits, group) if row_scales is not None else None
    got_weights = _exchange(row_weights, send_splits, recv_splits, group) if row_weights is not None else None
    # received: by source rank, then local expert, then token -> by local expert, then source, then token
    n = got_meta.shape[0]
    key = got_meta[:, 3].to(torch.int64) * ranks + got_meta[:, 0].to(torch.int64)
    regroup = torch.argsort(key * max(n, 1) + torch.arange(n))
    rows_per_rank = global_bs if global_bs else bs * ranks
    a = max(rows_per_rank * min(local, k), n)
    expand_x = torch.zeros(a, x.shape[1], dtype=rows.dtype)
    expand_x[:n] = got_rows[regroup]
    assist = torch.zeros(a, ASSIST_WIDTH, dtype=torch.int32)
    assist[:n, :3] = got_meta[regroup, :3]
    dynamic_scales = None
    if got_scales is not None:
        dynamic_scales = torch.zeros(a, *got_scales.shape[1:], dtype=got_scales.dtype)
        dynamic_scales[:n] = got_scales[regroup]
    expand_scales = None
    if got_weights is not None:
        expand_scales = torch.zeros(a, dtype=torch.float32)
        expand_scales[:n] = got_weights[regroup]
    per_expert = recv.sum(0)
    expert_token_nums = per_expert if expert_token_nums_type == 1 else per_expert.cumsum(0)
    ep_recv_counts = recv.t().reshape(-1).cumsum(0).to(torch.int32)  # (local expert, source rank)
    tp_recv_counts = torch.zeros(1, dtype=torch.int32)
    return (expand_x, dynamic_scales, assist.reshape(-1), expert_token_nums.to(torch.int64), ep_recv_counts,
            tp_recv_counts, expand_scales)


def combine(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales, group_ep, ep_world_size,
            ep_rank_id, moe_expert_num, *, shared_expert_x=None, special_x=None, expand_scales=None,
            tp_world_size=0, shared_expert_rank_num=0):
    """npu_moe_distribute_combine_v2 with ``ep_world_size > 1``: ``[BS, H]`` in expand_x's dtype,
    ``out[t] = Σ_j expert_scales[t, j] · row(t, j) (+ shared_expert_x[t]) (+ special_x[t])`` summed
    in float32 in slot order; ``special_x``: the zero / copy / constant experts' weighted outputs
    on this rank's tokens, whose slots received no row. A pair dispatch did not send (masked out
    by ``x_active_mask``) received no row: it adds nothing. ``expand_scales`` (dispatch's, the
    received rows' weights) is checked, not needed: the source rank weights by ``expert_scales``."""
    fn = "npu_moe_distribute_combine_v2"
    _checks(fn, ep_world_size, moe_expert_num, tp_world_size, shared_expert_rank_num)
    group = _group(fn, group_ep, ep_world_size, ep_rank_id)
    bs, k = expert_ids.shape
    require(expert_scales.shape == expert_ids.shape, fn, "expert_scales",
            lambda: f"must have expert_ids' shape {list(expert_ids.shape)}", expert_scales)
    require(ep_send_counts.dim() == 1 and ep_send_counts.numel() >= 1, fn, "ep_send_counts",
            "must be the ep_recv_counts dispatch returned", ep_send_counts)
    n = int(ep_send_counts[-1])
    info = assist_info_for_combine.reshape(-1, ASSIST_WIDTH)
    require(info.shape[0] >= n and expand_x.shape[0] >= n, fn, "assist_info_for_combine",
            "must be the assist_info_for_combine dispatch returned with these expand_x rows", assist_info_for_combine)
    if expand_scales is not None:
        require(isinstance(expand_scales, torch.Tensor) and expand_scales.dim() == 1 and expand_scales.shape[0] >= n,
                fn, "expand_scales", lambda: f"must be the expand_scales dispatch returned (1-D, >= {n} rows)",
                expand_scales)
    src = info[:n, 0].to(torch.int64)
    ranks = ep_world_size
    by_source = torch.argsort(src * max(n, 1) + torch.arange(n))
    send_counts = torch.bincount(src, minlength=ranks)
    recv = torch.empty_like(send_counts)
    dist.all_to_all_single(recv, send_counts, group=group)
    send_splits, recv_splits = send_counts.tolist(), recv.tolist()
    rows = _exchange(expand_x[:n][by_source], send_splits, recv_splits, group)
    where = _exchange(info[:n, 1:3][by_source].contiguous(), send_splits, recv_splits, group).to(torch.int64)
    per_slot = torch.zeros(bs * k, expand_x.shape[1], dtype=torch.float32)
    per_slot[where[:, 0] * k + where[:, 1]] = rows.float()
    per_slot = per_slot.reshape(bs, k, expand_x.shape[1]) * expert_scales.float()[..., None]
    out = torch.zeros(bs, expand_x.shape[1], dtype=torch.float32)
    for extra in (shared_expert_x, special_x):
        if extra is not None:
            out = out + extra.float()
    for j in range(k):
        out = out + per_slot[:, j]
    return out.to(expand_x.dtype)


__all__ = ["active_pairs", "combine", "dispatch", "register_group"]
