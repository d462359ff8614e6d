"""torch_npu's MC2 dispatch / combine (``npu_moe_distribute_dispatch_v2`` /
``npu_moe_distribute_combine_v2``) with their one-rank meaning.

On one rank (ep_world_size = 1, no TP group) the all-to-all moves nothing: dispatch is init routing
(rows sorted by expert, per-expert counts) and combine the weighted un-sort plus the shared
expert's output. With ep_world_size > 1 both run eagerly over torch.distributed
(``distribute_ranks.py``); such a layer exports per rank with the project's expert-parallel export.
"""

from __future__ import annotations

import torch

from . import _ops, distribute_ranks
from ._args import EXPERT_PARALLEL_DOC, require, unsupported


def _several_ranks(fn: str, ep_world_size, **unsupported_args) -> bool:
    """Whether the call takes the several-ranks path (refusing what that path does not carry)."""
    if ep_world_size == 1:
        return False
    require(isinstance(ep_world_size, int) and ep_world_size >= 1, fn, "ep_world_size", "must be >= 1",
            ep_world_size)
    for name, value in unsupported_args.items():
        if value is not None:
            unsupported(fn, name, value, "pass None (dispatch / combine of every token)")
    return True


def _one_rank(fn: str, ep_world_size, ep_rank_id, tp_world_size, moe_expert_num, expert_shard_type,
              shared_expert_num, shared_expert_rank_num, first_version) -> None:
    if tp_world_size not in (0, 1):
        raise NotImplementedError(
            f"{fn}: tp_world_size={tp_world_size}: torch_npu reserves it (0 or 1: no TP group); export each "
            f"rank's expert side with the project's expert-parallel export ({EXPERT_PARALLEL_DOC})")
    require(ep_rank_id == 0, fn, "ep_rank_id", "must be 0 with ep_world_size=1", ep_rank_id)
    # torch_npu's rules for the shared experts hold on one rank too (no shared-expert rank fits)
    distribute_ranks.rank_layout(fn, ep_world_size, moe_expert_num, shared_expert_num, shared_expert_rank_num,
                                 expert_shard_type, first_version)


def npu_moe_distribute_dispatch_v2(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
                                   scales=None, x_active_mask=None, expert_scales=None, elastic_info=None,
                                   performance_info=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                   expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                   quant_mode=0, global_bs=0, expert_token_nums_type=1, comm_alg="",
                                   zero_expert_num=0, copy_expert_num=0, const_expert_num=0, y_dtype=None,
                                   x_dtype=None, scales_dtype=None):
    """torch_npu.npu_moe_distribute_dispatch_v2 on one rank: ``(expand_x [BS·K, H], dynamic_scales
    (None; ``quant_mode=2``: float32 [BS·K]), assist_info_for_combine, expert_token_nums int64 [E],
    ep_recv_counts int32 [E], tp_recv_counts int32 [1], expand_scales (None))``.

    ``expand_x`` holds the (token, slot) rows sorted by expert (stable); ``assist_info_for_combine``
    is, per pair, its row there (pass it to npu_moe_distribute_combine_v2 unchanged, as torch_npu
    asks); ``ep_recv_counts`` is the cumsum of the counts. ``quant_mode=2``: the rows are int8,
    quantised per row after multiplying by the expert's row of ``scales`` [E, H] when given.
    ``quant_mode=4`` (MX): the rows of ``y_dtype`` and their e8m0 scales ``[BS·K, 2·ceil(H / 64)]``
    (uint8), as :func:`distribute_ranks.mx_rows` states.
    """
    return dispatch("npu_moe_distribute_dispatch_v2", False, x, expert_ids, group_ep, ep_world_size, ep_rank_id,
                    moe_expert_num, scales=scales, x_active_mask=x_active_mask, expert_scales=expert_scales,
                    elastic_info=elastic_info, tp_world_size=tp_world_size, expert_shard_type=expert_shard_type,
                    shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num,
                    quant_mode=quant_mode, global_bs=global_bs, expert_token_nums_type=expert_token_nums_type,
                    zero_expert_num=zero_expert_num, copy_expert_num=copy_expert_num,
                    const_expert_num=const_expert_num, y_dtype=y_dtype, x_dtype=x_dtype, scales_dtype=scales_dtype)


def dispatch(fn: str, first_version: bool, x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *,
             scales=None, x_active_mask=None, expert_scales=None, elastic_info=None, tp_world_size=0,
             expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0, global_bs=0,
             expert_token_nums_type=1, zero_expert_num=0, copy_expert_num=0, const_expert_num=0, y_dtype=None,
             x_dtype=None, scales_dtype=None):
    """Both versions of dispatch (``first_version``: npu_moe_distribute_dispatch, which places the
    shared experts' rows its own way); ``fn`` names the caller in errors."""
    mx = quant_mode == distribute_ranks.QUANT_MX
    if quant_mode not in (distribute_ranks.QUANT_NONE, distribute_ranks.QUANT_PER_TOKEN, distribute_ranks.QUANT_MX):
        unsupported(fn, "quant_mode", quant_mode, distribute_ranks.QUANT_MODES_DOC)
    if mx and scales is not None:
        unsupported(fn, "scales", scales, "quant_mode=4 (MX) takes no smoothing scales")
    if _several_ranks(fn, ep_world_size, elastic_info=elastic_info, y_dtype=None if mx else y_dtype,
                      x_dtype=x_dtype, scales_dtype=scales_dtype):
        _special_counts(fn, zero_expert_num, copy_expert_num, const_expert_num)
        return distribute_ranks.dispatch(
            x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, scales=scales, quant_mode=quant_mode,
            x_active_mask=x_active_mask, expert_scales=expert_scales, global_bs=global_bs,
            expert_token_nums_type=expert_token_nums_type, tp_world_size=tp_world_size,
            expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
            shared_expert_rank_num=shared_expert_rank_num, zero_expert_num=zero_expert_num,
            copy_expert_num=copy_expert_num, const_expert_num=const_expert_num, y_dtype=y_dtype,
            first_version=first_version, fn=fn)
    _one_rank(fn, ep_world_size, ep_rank_id, tp_world_size, moe_expert_num, expert_shard_type, shared_expert_num,
              shared_expert_rank_num, first_version)
    _special_counts(fn, zero_expert_num, copy_expert_num, const_expert_num)
    if scales is not None and quant_mode != 2:
        unsupported(fn, "scales", scales, "smoothing scales go with quant_mode=2; int32 (int4-packed) tokens "
                    "have no ONNX meaning here")
    for name, value in (("x_active_mask", x_active_mask), ("expert_scales", expert_scales),
                        ("elastic_info", elastic_info), ("y_dtype", None if mx else y_dtype), ("x_dtype", x_dtype),
                        ("scales_dtype", scales_dtype)):
        if value is not None:
            unsupported(fn, name, value, "pass None (dispatch of every token)")
    require(expert_token_nums_type in (0, 1), fn, "expert_token_nums_type", "must be 0 (cumsum) or 1 (count)",
            expert_token_nums_type)
    require(expert_ids.dim() == 2 and expert_ids.shape[0] == x.shape[0], fn, "expert_ids",
            lambda: f"must be [{x.shape[0]}, k]", expert_ids)
    rows, k = expert_ids.shape
    if scales is not None:
        require(scales.dim() == 2 and scales.shape[0] == moe_expert_num and scales.shape[1] == x.shape[1], fn,
                "scales", lambda: f"must be [moe_expert_num, H] = [{moe_expert_num}, {x.shape[1]}]", scales)
    # quant_mode 2 on one rank: each (token, expert) row times the expert's smoothing row, then
    # per-row dynamic int8 (init routing's quant_mode 1). Pairs routed to zero / copy / constant
    # experts (ids >= moe_expert_num) are not dispatched: outside the active range, their row is -1.
    all_experts = moe_expert_num + zero_expert_num + copy_expert_num + const_expert_num
    expand_x, row_of_pair, counts, dynamic_scales = _ops.init_routing_v2(
        x, expert_ids, scales, None, rows * k, -1, all_experts, 0, 1, True, 1 if quant_mode == 2 else -1,
        [0, moe_expert_num], 0)
    if mx:  # per row, so quantising the routed rows is quantising the tokens
        expand_x, dynamic_scales = distribute_ranks.mx_rows(fn, expand_x, y_dtype)
    ep_recv_counts = counts.cumsum(0).to(torch.int32)
    expert_token_nums = counts if expert_token_nums_type == 1 else counts.cumsum(0)
    tp_recv_counts = torch.zeros(1, dtype=torch.int32, device=x.device)
    return (expand_x, dynamic_scales if quant_mode in (2, 4) else None, row_of_pair, expert_token_nums,
            ep_recv_counts, tp_recv_counts, None)


def npu_moe_distribute_combine_v2(expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales,
                                  group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None,
                                  x_active_mask=None, expand_scales=None, shared_expert_x=None, elastic_info=None,
                                  ori_x=None, const_expert_alpha_1=None, const_expert_alpha_2=None,
                                  const_expert_v=None, performance_info=None, group_tp="", tp_world_size=0,
                                  tp_rank_id=0, expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0,
                                  global_bs=0, comm_quant_mode=0, comm_alg="", zero_expert_num=0,
                                  copy_expert_num=0, const_expert_num=0):
    """torch_npu.npu_moe_distribute_combine_v2 on one rank:
    ``out[t] = Σ_j expert_scales[t, j]·expand_x[row(t, j)] + shared_expert_x[t]`` (one finalize)."""
    return combine("npu_moe_distribute_combine_v2", False, expand_x, expert_ids, assist_info_for_combine,
                   ep_send_counts, expert_scales, group_ep, ep_world_size, ep_rank_id, moe_expert_num,
                   x_active_mask=x_active_mask, expand_scales=expand_scales, shared_expert_x=shared_expert_x,
                   elastic_info=elastic_info, ori_x=ori_x, const_expert_alpha_1=const_expert_alpha_1,
                   const_expert_alpha_2=const_expert_alpha_2, const_expert_v=const_expert_v,
                   tp_world_size=tp_world_size, expert_shard_type=expert_shard_type,
                   shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num,
                   comm_quant_mode=comm_quant_mode, zero_expert_num=zero_expert_num, copy_expert_num=copy_expert_num,
                   const_expert_num=const_expert_num)


def combine(fn: str, first_version: bool, expand_x, expert_ids, assist_info_for_combine, ep_send_counts,
            expert_scales, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, x_active_mask=None,
            expand_scales=None, shared_expert_x=None, elastic_info=None, ori_x=None, const_expert_alpha_1=None,
            const_expert_alpha_2=None, const_expert_v=None, tp_world_size=0, expert_shard_type=0,
            shared_expert_num=1, shared_expert_rank_num=0, comm_quant_mode=0, zero_expert_num=0,
            copy_expert_num=0, const_expert_num=0):
    """Both versions of combine (``first_version``: npu_moe_distribute_combine); ``fn`` names the
    caller in errors."""
    if _several_ranks(fn, ep_world_size, elastic_info=elastic_info):
        if comm_quant_mode != 0:
            unsupported(fn, "comm_quant_mode", comm_quant_mode, "use 0 (rows travel unquantised here)")
        _special_counts(fn, zero_expert_num, copy_expert_num, const_expert_num)
        require(expert_scales.shape == expert_ids.shape, fn, "expert_scales",
                lambda: f"must have expert_ids' shape {list(expert_ids.shape)}", expert_scales)
        # the first version with shared-expert ranks (Atlas A3) reserves x_active_mask, as dispatch does
        ignore_mask = first_version and shared_expert_rank_num
        active = None if ignore_mask else distribute_ranks.active_pairs(fn, x_active_mask, expert_ids)
        # the special experts' pairs stayed on this rank (dispatch sent none): their outputs from ori_x
        special = _special_experts(fn, expert_ids, expert_scales if active is None else expert_scales * active,
                                   expand_x, ori_x, moe_expert_num, zero_expert_num, copy_expert_num,
                                   const_expert_num, const_expert_alpha_1, const_expert_alpha_2, const_expert_v)
        return distribute_ranks.combine(
            expand_x, expert_ids, assist_info_for_combine, ep_send_counts, expert_scales, group_ep, ep_world_size,
            ep_rank_id, moe_expert_num, shared_expert_x=shared_expert_x, special_x=special,
            expand_scales=expand_scales, tp_world_size=tp_world_size, expert_shard_type=expert_shard_type,
            shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num,
            first_version=first_version, fn=fn)
    _one_rank(fn, ep_world_size, ep_rank_id, tp_world_size, moe_expert_num, expert_shard_type, shared_expert_num,
              shared_expert_rank_num, first_version)
    _special_counts(fn, zero_expert_num, copy_expert_num, const_expert_num)
    if comm_quant_mode != 0:
        unsupported(fn, "comm_quant_mode", comm_quant_mode, "use 0 (no quantised communication on one rank)")
    for name, value in (("x_active_mask", x_active_mask), ("expand_scales", expand_scales),
                        ("elastic_info", elastic_info)):
        if value is not None:
            unsupported(fn, name, value, "pass None")
    require(expert_scales.shape == expert_ids.shape, fn, "expert_scales",
            lambda: f"must have expert_ids' shape {list(expert_ids.shape)}", expert_scales)
    special = _special_experts(fn, expert_ids, expert_scales, expand_x, ori_x, moe_expert_num, zero_expert_num,
                               copy_expert_num, const_expert_num, const_expert_alpha_1, const_expert_alpha_2,
                               const_expert_v)
    skips = [t for t in (shared_expert_x, special) if t is not None] + [None, None]
    return _ops.finalize_routing(expand_x, skips[0], skips[1], None, expert_scales, assist_info_for_combine, None, 2)


def _special_counts(fn, zero_expert_num, copy_expert_num, const_expert_num) -> None:
    for name, value in (("zero_expert_num", zero_expert_num), ("copy_expert_num", copy_expert_num),
                        ("const_expert_num", const_expert_num)):
        require(isinstance(value, int) and value >= 0, fn, name, "must be an int >= 0", value)


def _special_experts(fn, expert_ids, expert_scales, expand_x, ori_x, experts, zero, copy, const, alpha_1, alpha_2,
                     v):
    """The zero / copy / constant experts' weighted outputs [BS, H] in expand_x's dtype (None when
    there are none): op-plugin's Moe(ori_x) = 0, ori_x, alpha_1[c]·ori_x + alpha_2[c]·v[c] for the
    ids [E, E+zero), [E+zero, E+zero+copy), [E+zero+copy, E+zero+copy+const)."""
    if copy == 0 and const == 0:
        return None
    bs, h = expert_ids.shape[0], expand_x.shape[-1]
    require(ori_x is not None and ori_x.dim() == 2 and ori_x.shape[0] == bs and ori_x.shape[1] == h, fn, "ori_x",
            lambda: f"must be the tokens before the experts [BS, H] = [{bs}, {h}] with copy or constant experts",
            ori_x)
    ids = expert_ids.to(torch.int64)
    w = expert_scales.float()
    x = ori_x.float()
    copy_start, const_start = experts + zero, experts + zero + copy
    out = (w * ((ids >= copy_start) & (ids < const_start))).sum(1, keepdim=True) * x
    if const:
        for name, t in (("const_expert_alpha_1", alpha_1), ("const_expert_alpha_2", alpha_2),
                        ("const_expert_v", v)):
            require(t is not None and tuple(t.shape) == (const, h), fn, name,
                    lambda: f"must be [const_expert_num, H] = [{const}, {h}] with constant experts", t)
        is_const = (ids >= const_start) & (ids < const_start + const)
        c = torch.where(is_const, ids - const_start, 0)  # [BS, K]
        term = alpha_1.float()[c] * x[:, None, :] + (alpha_2.float() * v.float())[c]  # [BS, K, H]
        out = out + (term * (w * is_const)[..., None]).sum(1)
    return out.to(expand_x.dtype)


__all__ = ["npu_moe_distribute_combine_v2", "npu_moe_distribute_dispatch_v2"]
