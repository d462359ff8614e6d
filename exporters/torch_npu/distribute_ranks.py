"""MC2 dispatch / combine over several ranks (``ep_world_size > 1``), run eagerly with
``torch.distributed`` (gloo on CPU), with torch_npu's semantics for expert parallelism without a TP
group (op-plugin's ``npu_moe_distribute_dispatch_v2`` documentation and test golden; for
shared-expert ranks ops-transformer's MoeDistributeDispatch(V2) / Combine(V2) kernels, see
:class:`RankLayout` and docs/ascend-code.md).

Without shared-expert ranks rank r of N owns the L = moe_expert_num / N experts ``[r·L, (r+1)·L)``
(with S of them, ranks ``[0, S)`` hold the shared experts and rank ``S + i`` the experts
``[i·L, (i+1)·L)``, L = moe_expert_num / (N - S)). Dispatch sends every
(token, slot) pair to the rank owning its expert; the receiving rank's ``expand_x`` holds its rows
ordered by local expert, then source rank, then token (the order of op-plugin's golden: one
init routing over the concatenation of every rank's tokens), zero-padded to
``A = (global_bs or BS·N) · min(L, K)`` rows; a shared-expert rank receives its tokens' rows by
source rank, then token. Combine sends each row back to its source and sums
``expert_scales[t, j] · row`` per token, plus the shared experts' rows (weight 1) or
``shared_expert_x``. Pairs routed to the zero / copy / constant experts (ids from moe_expert_num
on) never leave their rank: combine adds their outputs from ``ori_x`` there
(``distribute._special_experts``). Pairs ``x_active_mask`` leaves out are not sent and add nothing.
``group_ep`` names a group registered here, e.g. by the HCCL communicator
name ``hccl.ProcessGroupHCCL`` hands out.

Where torch_npu leaves values to the implementation (``assist_info_for_combine``: "pass it to
combine"), the stand-in writes, for expanded row i, ``(source rank, token, slot)`` at
``assist_info[128·i : 128·i + 3]``. These calls do not export: each rank's expert side exports with
the project's expert-parallel export (docs/expert-parallel.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.distributed as dist

from ._args import EXPERT_PARALLEL_DOC, fail, require, unsupported
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


# Refusals and the placement of shared-expert ranks follow torch_npu on Atlas A3 (Atlas A2 takes no
# shared-expert ranks: op-plugin docs/zh/custom_APIs/torch_npu/torch_npu-npu_moe_distribute_dispatch_v2.md:129-131).
MAX_SHARED_EXPERTS = 4  # ops-transformer moe_distribute_dispatch_v2_tiling.cpp: MAX_SHARED_EXPERT_NUM


@dataclass(frozen=True)
class RankLayout:
    """Which rank holds which experts: ranks ``[0, S)`` hold one shared expert each (shared expert
    ``s`` on ranks ``[s·R, (s+1)·R)``, R = S / shared_experts), rank ``S + i`` the MoE experts
    ``[i·L, (i+1)·L)``. ``first_version``: npu_moe_distribute_dispatch / combine, whose shared-expert
    ranks split the tokens among themselves instead of copying them to each shared expert."""

    ranks: int
    experts: int
    shared_ranks: int
    shared_experts: int  # 0 without shared-expert ranks (torch_npu's default 1 then means none)
    first_version: bool

    @property
    def local(self) -> int:
        """L, the MoE experts of one MoE rank."""
        return self.experts // (self.ranks - self.shared_ranks)

    def is_shared(self, rank: int) -> bool:
        """Whether ``rank`` holds a shared expert."""
        return rank < self.shared_ranks

    def local_experts(self, rank: int) -> int:
        """The length of expert_token_nums on ``rank``: 1 on a shared-expert rank, else L."""
        return 1 if self.is_shared(rank) else self.local

    def rows(self, rank: int, global_bs: int, k: int) -> int:
        """A, the rows of expand_x on ``rank`` (op-plugin MoeDistributeDispatchV2KernelOpApi.cpp:137-156,
        MoeDistributeDispatchKernelOpApi.cpp:53-62); ``global_bs`` is the EP domain's batch size."""
        if not self.is_shared(rank):
            return global_bs * min(self.local, k)
        if self.first_version:
            return global_bs // self.shared_ranks
        per_expert = self.shared_ranks // self.shared_experts
        return global_bs // self.ranks * -(-self.ranks // per_expert)

    def shared_rows(self, rank: int, tokens: torch.Tensor, bs: int, k: int):
        """Where this rank's ``tokens`` (the ones taking part) go to shared experts: ``(token,
        destination rank, slot K + s, shared expert s)`` per row, in token order per destination."""
        empty = torch.zeros(0, dtype=torch.int64)
        if not self.shared_ranks or not tokens.numel():
            return empty, empty, empty, empty
        if self.first_version:
            # each token to one shared-expert rank; a shared-expert rank keeps its own tokens. The
            # block of rank r for shared rank m: tokens t with t + floor(r·BS/S) in
            # [floor((m+r)·BS/S), floor((m+r+1)·BS/S)) (ops-transformer moe_distribute_dispatch.h:402-404)
            s = self.shared_ranks
            if self.is_shared(rank):
                dest = torch.full_like(tokens, rank)
            else:
                u = tokens + rank * bs // s
                dest = ((u + 1) * s + bs - 1) // bs - 1 - rank
            zero = torch.zeros_like(tokens)
            return tokens, dest, zero + k, zero
        # every token to each shared expert s, on rank (r mod R) + s·R
        # (ops-transformer moe_distribute_dispatch_v2.h:579-586)
        per_expert = self.shared_ranks // self.shared_experts
        expert = torch.arange(self.shared_experts).repeat_interleave(tokens.numel())
        token = tokens.repeat(self.shared_experts)
        return token, rank % per_expert + expert * per_expert, k + expert, expert


def rank_layout(fn: str, ep_world_size: int, moe_expert_num: int, shared_expert_num, shared_expert_rank_num,
                expert_shard_type, first_version: bool = False) -> RankLayout:
    """The layout of the EP domain, refusing what torch_npu refuses (each rule's source beside it)."""
    n, s = ep_world_size, shared_expert_rank_num
    # expert_shard_type: 0 only (shared-expert ranks first; moe_distribute_dispatch_v2_tiling.cpp:508)
    require(expert_shard_type == 0, fn, "expert_shard_type", "must be 0 (shared-expert ranks before the MoE ranks)",
            expert_shard_type)
    # op-plugin MoeDistributeDispatchV2KernelOpApi.cpp:96-103
    require(isinstance(s, int) and 0 <= s < n, fn, "shared_expert_rank_num",
            lambda: f"must be in [0, ep_world_size) = [0, {n})", s)
    if first_version:
        # ops-transformer moe_distribute_dispatch_tiling.cpp:198 and :227
        require(shared_expert_num == 1, fn, "shared_expert_num", "must be 1 (the first version's only value)",
                shared_expert_num)
        require(s == 0 or n % s == 0, fn, "shared_expert_rank_num",
                lambda: f"must divide ep_world_size={n}", s)
        shared = 1 if s else 0
    else:
        # moe_distribute_dispatch_v2_tiling.cpp:510 (at most 4), op-plugin
        # MoeDistributeDispatchV2KernelOpApi.cpp:104-122 (1 or 0 without shared-expert ranks, else a divisor)
        require(isinstance(shared_expert_num, int) and 0 <= shared_expert_num <= MAX_SHARED_EXPERTS, fn,
                "shared_expert_num", f"must be in [0, {MAX_SHARED_EXPERTS}]", shared_expert_num)
        if s == 0:
            require(shared_expert_num in (0, 1), fn, "shared_expert_num",
                    "must be 0 or 1 (none) with shared_expert_rank_num=0", shared_expert_num)
        else:
            require(shared_expert_num > 0 and s % shared_expert_num == 0, fn, "shared_expert_rank_num",
                    lambda: f"must be a multiple of shared_expert_num={shared_expert_num} (> 0)", s)
        shared = shared_expert_num if s else 0
    # moe_distribute_dispatch_v2_tiling.cpp:692
    require(isinstance(moe_expert_num, int) and moe_expert_num > 0 and moe_expert_num % (n - s) == 0, fn,
            "moe_expert_num",
            lambda: f"must be a positive multiple of ep_world_size - shared_expert_rank_num = {n - s}", moe_expert_num)
    return RankLayout(n, moe_expert_num, s, shared, first_version)


def _checks(fn, tp_world_size):
    if tp_world_size not in (0, 1):
        unsupported(fn, "tp_world_size", tp_world_size, "torch_npu reserves it (0 or 1: no TP group)")


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
             expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, zero_expert_num=0, copy_expert_num=0,
             const_expert_num=0, y_dtype=None, first_version=False, fn="npu_moe_distribute_dispatch_v2"):
    """npu_moe_distribute_dispatch_v2 with ``ep_world_size > 1`` (module docstring): ``(expand_x [A, H],
    dynamic_scales [A] (quant_mode 2), [A, 2·ceil(H / 64)] e8m0 bits (4, :func:`mx_rows`) or None,
    assist_info_for_combine int32 [A·128], expert_token_nums int64 [1 or L],
    ep_recv_counts int32 [N·(1 or L)], tp_recv_counts int32 [1], expand_scales [A] or None)``.

    Pairs that ``x_active_mask`` leaves out are not sent; ``expert_scales`` [BS, K] float32, when
    given, travel with their rows and come back as ``expand_scales`` (the received rows' weights).
    ``first_version``: npu_moe_distribute_dispatch's placement of shared-expert rows."""
    _checks(fn, tp_world_size)
    layout = rank_layout(fn, ep_world_size, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                         expert_shard_type, first_version)
    group = _group(fn, group_ep, ep_world_size, ep_rank_id)
    require(x.dim() == 2, fn, "x", "must be 2-D [BS, H]", x)
    require(expert_ids.dim() == 2 and expert_ids.shape[0] == x.shape[0], fn, "expert_ids",
            lambda: f"must be [{x.shape[0]}, K]", expert_ids)
    ranks, experts, local = ep_world_size, moe_expert_num, layout.local
    shared_num = layout.shared_experts
    bs, k = expert_ids.shape
    me = dist.get_rank(group)
    rows_per_rank = global_bs if global_bs else bs * ranks
    # moe_distribute_dispatch_v2_tiling.cpp:720-721: 0, or a multiple of ep_world_size covering every rank's BS
    require(global_bs == 0 or (global_bs >= bs * ranks and global_bs % ranks == 0), fn, "global_bs",
            lambda: f"must be 0 or max_bs·ep_world_size (a multiple of {ranks}, >= BS·{ranks} = {bs * ranks})",
            global_bs)
    flat = expert_ids.reshape(-1).to(torch.int64)
    every = experts + zero_expert_num + copy_expert_num + const_expert_num
    bad = (flat < 0) | (flat >= every)
    if bool(bad.any()):
        require(False, fn, "expert_ids", f"values must be in [0, moe_expert_num + zero_expert_num + copy_expert_num "
                f"+ const_expert_num = {every})", int(flat[bad][0]))
    # the first version with shared-expert ranks runs on Atlas A3 only, where x_active_mask is reserved
    # (op-plugin torch_npu-npu_moe_distribute_dispatch.md:42): every token takes part
    active = None if first_version and layout.shared_ranks else active_pairs(fn, x_active_mask, expert_ids)
    # moe_distribute_dispatch_v2_tiling.cpp:724-726: a mask needs the same BS on every rank
    require(active is None or global_bs <= bs * ranks, fn, "x_active_mask",
            lambda: f"needs the same BS on every rank (global_bs={global_bs} > BS·ep_world_size = {bs * ranks})",
            x_active_mask)
    if expert_scales is not None:
        require(isinstance(expert_scales, torch.Tensor) and tuple(expert_scales.shape) == (bs, k), fn,
                "expert_scales", lambda: f"must be [BS, K] = [{bs}, {k}]", expert_scales)
    if scales is not None:
        require(scales.dim() == 2 and tuple(scales.shape) == (shared_num + experts, x.shape[1]), fn, "scales",
                lambda: f"must be [shared experts + moe_expert_num, H] = [{shared_num + experts}, {x.shape[1]}]",
                scales)
    # routed pairs: the special experts' pairs stay on this rank
    sent = flat < experts if active is None else (flat < experts) & active.reshape(-1)
    routed = torch.nonzero(sent).flatten()
    expert = flat[routed]
    # shared-expert rows: every token that takes part (a [BS, K] mask: any of its pairs)
    taking_part = torch.arange(bs) if active is None else torch.nonzero(active.any(1)).flatten()
    s_token, s_dest, s_slot, s_expert = layout.shared_rows(me, taking_part, bs, k)
    token = torch.cat([routed // k, s_token])
    slot = torch.cat([routed % k, s_slot])
    dest = torch.cat([layout.shared_ranks + expert // local, s_dest])
    key = torch.cat([expert % local, torch.zeros_like(s_dest)])  # the local expert on the receiving rank
    scale_row = torch.cat([expert + shared_num, s_expert])  # scales: the shared experts' rows first
    # send order: by destination, local expert, token (contiguous per destination for all_to_all)
    order = torch.argsort((dest * max(local, 1) + key) * max(bs, 1) + token)
    token, slot, dest, key, scale_row = token[order], slot[order], dest[order], key[order], scale_row[order]
    rows = x[token]
    row_scales = None
    if quant_mode == QUANT_MX:
        rows, row_scales = mx_rows(fn, rows, y_dtype)
    if quant_mode == QUANT_PER_TOKEN:
        r = rows.float()
        if scales is not None:
            r = r * scales.float()[scale_row]
        rows, row_scales = quantize_rows(r)
    weights = None
    if expert_scales is not None:  # shared-expert rows carry weight 1 (combine adds them unweighted)
        padded = torch.cat([expert_scales.float(), torch.ones(bs, max(shared_num, 1))], 1)
        weights = padded[token, slot]
    counts = torch.bincount(dest * local + key, minlength=ranks * local).reshape(ranks, local)
    recv = _counts_exchange(counts, group, ranks)  # [N source ranks, L]
    send_splits, recv_splits = counts.sum(1).tolist(), recv.sum(1).tolist()
    meta = torch.stack([torch.full_like(token, me), token, slot, key], dim=1).to(torch.int32)
    got_rows = _exchange(rows, send_splits, recv_splits, group)
    got_meta = _exchange(meta, send_splits, recv_splits, group)
    got_scales = _exchange(row_scales, send_splits, recv_splits, group) if row_scales is not None else None
    got_weights = _exchange(weights, send_splits, recv_splits, group) if weights is not None else None
    # received: by source rank, then local expert, then token -> by local expert, then source, then token
    n = got_meta.shape[0]
    regroup = torch.argsort((got_meta[:, 3].to(torch.int64) * ranks + got_meta[:, 0].to(torch.int64)) * max(n, 1)
                            + torch.arange(n))
    a = max(layout.rows(me, rows_per_rank, k), n)
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
    mine = recv[:, :layout.local_experts(me)]
    if first_version and layout.is_shared(me):
        # the first version counts a shared-expert rank's own BS rows as the S entries
        # floor((s+1+q)·BS/S) - floor((s+q)·BS/S) (moe_distribute_dispatch.h:716-721)
        sh = layout.shared_ranks
        mine = mine.clone()
        mine[:sh, 0] = torch.tensor([(s + 1 + me) * bs // sh - (s + me) * bs // sh for s in range(sh)])
    per_expert = mine.sum(0)
    expert_token_nums = per_expert if expert_token_nums_type == 1 else per_expert.cumsum(0)
    ep_recv_counts = mine.t().reshape(-1).cumsum(0).to(torch.int32)  # (local expert, source rank)
    tp_recv_counts = torch.zeros(1, dtype=torch.int32)
    return (expand_x, dynamic_scales, assist.reshape(-1), expert_token_nums.to(torch.int64), ep_recv_counts,
            tp_recv_counts, expand_scales)


def combine(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales, group_ep, ep_world_size,
            ep_rank_id, moe_expert_num, *, shared_expert_x=None, special_x=None, expand_scales=None,
            tp_world_size=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, first_version=False,
            fn="npu_moe_distribute_combine_v2"):
    """npu_moe_distribute_combine_v2 with ``ep_world_size > 1``: ``[BS, H]`` in expand_x's dtype,
    ``out[t] = Σ_j expert_scales[t, j] · row(t, j) (+ special_x[t]) + Σ_s shared(t, s)
    (+ shared_expert_x[t])`` summed in float32 in that order (ops-transformer
    moe_distribute_combine_v2.h:1197-1253): the routed rows weighted, in slot order, the rows of
    the shared-expert ranks with weight 1; ``special_x``: the zero / copy / constant experts'
    weighted outputs on this rank's tokens, whose slots received no row. A pair dispatch did not send
    (masked out by ``x_active_mask``) received no row: it adds nothing. ``expand_scales`` (dispatch's,
    the received rows' weights) is checked, not needed: the source rank weights by ``expert_scales``."""
    _checks(fn, tp_world_size)
    layout = rank_layout(fn, ep_world_size, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                         expert_shard_type, first_version)
    if shared_expert_x is not None and layout.shared_ranks:
        # moe_distribute_combine_v2_tiling.cpp:412-417
        fail(fn, "shared_expert_x", "must be None with shared_expert_rank_num > 0 (the shared-expert ranks "
             f"compute the shared experts; shared_expert_rank_num={shared_expert_rank_num})", shared_expert_x)
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
    slots = k + layout.shared_experts  # a token's K routed slots, then one per shared expert
    require(bool(((where[:, 0] < bs) & (where[:, 1] < slots)).all()), fn, "assist_info_for_combine",
            f"must come from dispatch with these expert_ids and shared_expert_num={layout.shared_experts}",
            assist_info_for_combine)
    per_slot = torch.zeros(bs * slots, expand_x.shape[1], dtype=torch.float32)
    per_slot[where[:, 0] * slots + where[:, 1]] = rows.float()
    per_slot = per_slot.reshape(bs, slots, expand_x.shape[1])
    out = torch.zeros(bs, expand_x.shape[1], dtype=torch.float32)
    for j in range(k):
        out = out + per_slot[:, j] * expert_scales.float()[:, j:j + 1]
    if special_x is not None:
        out = out + special_x.float()
    for j in range(k, slots):
        out = out + per_slot[:, j]
    if shared_expert_x is not None:
        out = out + shared_expert_x.float().reshape(bs, -1)
    return out.to(expand_x.dtype)


__all__ = ["RankLayout", "active_pairs", "combine", "dispatch", "rank_layout", "register_group"]
