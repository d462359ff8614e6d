"""torch_npu's first MC2 pair, ``npu_moe_distribute_dispatch`` / ``npu_moe_distribute_combine``
(op-plugin's signatures): the v2 functions' meaning, with ``expand_idx`` in the place of
``assist_info_for_combine`` (model code passes either to combine unchanged), except for
shared-expert ranks: one shared expert, each token's shared row on one shared-expert rank
(``distribute_ranks.RankLayout``)."""

from __future__ import annotations

from ._args import unsupported
from .distribute import combine, dispatch


def npu_moe_distribute_dispatch(x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num, *, scales=None,
                                x_active_mask=None, expert_scales=None, group_tp="", tp_world_size=0, tp_rank_id=0,
                                expert_shard_type=0, shared_expert_num=1, shared_expert_rank_num=0, quant_mode=0,
                                global_bs=0, expert_token_nums_type=1):
    """torch_npu.npu_moe_distribute_dispatch: ``(expand_x, dynamic_scales, expand_idx, expert_token_nums,
    ep_recv_counts, tp_recv_counts, expand_scales)`` as npu_moe_distribute_dispatch_v2 gives them."""
    return dispatch(
        "npu_moe_distribute_dispatch", True, x, expert_ids, group_ep, ep_world_size, ep_rank_id, moe_expert_num,
        scales=scales, x_active_mask=x_active_mask, expert_scales=expert_scales, tp_world_size=tp_world_size,
        expert_shard_type=expert_shard_type, shared_expert_num=shared_expert_num,
        shared_expert_rank_num=shared_expert_rank_num, quant_mode=quant_mode, global_bs=global_bs,
        expert_token_nums_type=expert_token_nums_type)


def npu_moe_distribute_combine(expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep,
                               ep_world_size, ep_rank_id, moe_expert_num, *, tp_send_counts=None, x_active_mask=None,
                               activation_scale=None, weight_scale=None, group_list=None, expand_scales=None,
                               shared_expert_x=None, group_tp="", tp_world_size=0, tp_rank_id=0, expert_shard_type=0,
                               shared_expert_num=1, shared_expert_rank_num=0, global_bs=0, out_dtype=0,
                               comm_quant_mode=0, group_list_type=0):
    """torch_npu.npu_moe_distribute_combine: npu_moe_distribute_combine_v2's result. The int32
    ``expand_x`` form (dequantised inside by ``activation_scale`` / ``weight_scale`` / ``group_list``)
    is refused: dequantise with the grouped matmul's ``scale`` / ``per_token_scale`` instead."""
    fn = "npu_moe_distribute_combine"
    for name, value in (("activation_scale", activation_scale), ("weight_scale", weight_scale),
                        ("group_list", group_list)):
        if value is not None:
            unsupported(fn, name, value, "int32 expand_x dequantised inside combine is not exported; "
                        "dequantise in npu_grouped_matmul (scale, per_token_scale) and pass None")
    if out_dtype != 0:
        unsupported(fn, "out_dtype", out_dtype, "it applies to int32 expand_x; pass 0")
    return combine(
        fn, True, expand_x, expert_ids, expand_idx, ep_send_counts, expert_scales, group_ep, ep_world_size,
        ep_rank_id, moe_expert_num, x_active_mask=x_active_mask, expand_scales=expand_scales,
        shared_expert_x=shared_expert_x, tp_world_size=tp_world_size, expert_shard_type=expert_shard_type,
        shared_expert_num=shared_expert_num, shared_expert_rank_num=shared_expert_rank_num,
        comm_quant_mode=comm_quant_mode)


__all__ = ["npu_moe_distribute_combine", "npu_moe_distribute_dispatch"]
