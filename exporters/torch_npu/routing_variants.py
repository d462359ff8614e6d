"""torch_npu's routing variants on the project's nodes: ``npu_moe_init_routing_quant``
(aclnnMoeInitRoutingQuantV2 → MoeInitRoutingV3 with int8 quantisation) and
``npu_moe_gating_top_k_softmax_v2`` (aclnnMoeGatingTopKSoftmaxV2 → MoeGatingTopKHash)."""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as gating_spec

from . import _ops
from ._args import require, unsupported


def npu_moe_init_routing_quant(x, expert_idx, *, scale=None, offset=None, active_num=1024, expert_capacity=0,
                               expert_num=256, drop_pad_mode=0, expert_tokens_num_mode=0,
                               expert_tokens_before_capacity_flag=False, quant_mode=1):
    """torch_npu.npu_moe_init_routing_quant: ``(expanded_x int8, expanded_row_idx int32 [N·K],
    expert_token_cumsum_or_count int32 [expert_num] or None, expert_tokens_before_capacity (None),
    expanded_scale float32 [R] or None)``; one MoeInitRoutingV3 node.

    The rows sorted by expert (stably), quantised to int8: ``quant_mode=0`` static,
    ``round_half_even(fp16(x)·scale[0] (+ offset[0]))`` saturated; ``quant_mode=1`` dynamic per
    row after multiplying by the expert's row of ``scale`` ([expert_num, H] or [1, H]) when given,
    with ``expanded_scale`` the rows' scales. ``active_num`` > 0 keeps ``min(N·K, active_num)``
    rows (0: all); ``expanded_row_idx[p]`` is the row of pair p; ``expert_tokens_num_mode`` 0:
    no counts, 1: cumsum, 2: counts. Drop/pad (``drop_pad_mode=1``) is init routing v2's.
    """
    fn = "npu_moe_init_routing_quant"
    require(x.dim() == 2, fn, "x", "must be 2-dimensional [N, H]", x)
    require(expert_idx.dim() == 2 and expert_idx.shape[0] == x.shape[0], fn, "expert_idx",
            lambda: f"must be 2-dimensional [{x.shape[0]}, K]", expert_idx)
    require(drop_pad_mode in (0, 1), fn, "drop_pad_mode", "must be 0 or 1", drop_pad_mode)
    require(quant_mode in (0, 1), fn, "quant_mode", "must be 0 (static) or 1 (dynamic)", quant_mode)
    require(expert_tokens_num_mode in (0, 1, 2), fn, "expert_tokens_num_mode", "must be 0, 1 or 2",
            expert_tokens_num_mode)
    if expert_tokens_before_capacity_flag:
        unsupported(fn, "expert_tokens_before_capacity_flag", expert_tokens_before_capacity_flag,
                    "the counts before capacity have no output on MoeInitRoutingV3; pass False")
    if quant_mode == 0:
        require(scale is not None, fn, "scale", "is required for static quantisation (quant_mode=0)", None)
        if offset is None:  # optional here, required by the node: an offset of 0 adds nothing
            offset = torch.zeros(1, dtype=torch.float32, device=x.device)
    elif offset is not None:
        unsupported(fn, "offset", offset, "dynamic quantisation (quant_mode=1) takes no offset; pass None")
    if drop_pad_mode == 1:
        require(expert_capacity > 0, fn, "expert_capacity", "must be > 0 with drop_pad_mode=1", expert_capacity)
    tokens_num_type = 1 if drop_pad_mode == 1 or expert_tokens_num_mode != 1 else 0
    expanded_x, row_idx, counts, expanded_scale = _ops.init_routing_v2(
        x, expert_idx, scale, offset, active_num if active_num > 0 else -1,
        expert_capacity if drop_pad_mode == 1 else -1, expert_num, drop_pad_mode, tokens_num_type,
        drop_pad_mode == 0 and expert_tokens_num_mode > 0, quant_mode, [0, expert_num], 0)
    counts = counts.to(torch.int32) if drop_pad_mode == 0 and expert_tokens_num_mode > 0 else None
    return expanded_x, row_idx, counts, None, expanded_scale if quant_mode == 1 else None


def npu_moe_gating_top_k_softmax_v2(x, *, k=1, finished=None, renorm=0, output_softmax=False):
    """torch_npu.npu_moe_gating_top_k_softmax_v2: ``(y [..., k] in x's dtype, expert_idx int32 [..., k],
    softmax_result float32)``; one MoeGatingTopKHash node (standard Softmax / TopK beyond its E and
    k limits).

    ``renorm=0``: softmax over the E experts, then the top k (``softmax_result`` the full softmax
    [..., E] when ``output_softmax``, else empty [0]); ``renorm=1``: the top k logits, then softmax
    over those k (``softmax_result`` empty). Rows marked in ``finished`` get expert index E.
    """
    fn = "npu_moe_gating_top_k_softmax_v2"
    renorm = 0 if renorm is None else renorm
    require(isinstance(x, torch.Tensor) and x.dim() in (2, 3), fn, "x", "must be 2-D or 3-D", x)
    require(renorm in (0, 1), fn, "renorm", "must be 0 or 1", renorm)
    experts = x.shape[-1]
    require(0 < k <= experts, fn, "k", lambda: f"must be in [1, {experts}]", k)
    lead = x.shape[:-1]
    flat = x.reshape(-1, experts)
    want_softmax = bool(output_softmax) and renorm == 0
    if experts <= gating_spec.MAX_EXPERTS and k <= gating_spec.MAX_K:
        y, idx, out = _ops.gating_top_k(flat, k, None, None, None, norm_type=gating_spec.NORM_SOFTMAX, renorm=renorm,
                                        out_flag=want_softmax)
    else:  # beyond MoeGatingTopKHash's limits (torch_npu takes E = 5120): the same in standard ops
        y, idx, out = _ops.softmax_top_k(flat, k, renorm, want_softmax)
    if finished is not None:
        require(finished.dtype == torch.bool and finished.numel() == flat.shape[0], fn, "finished",
                lambda: f"must be bool with one entry per row ({list(lead)})", finished)
        idx = torch.where(finished.reshape(-1, 1), torch.full_like(idx, experts), idx)
    softmax = out.reshape(*lead, experts) if want_softmax else torch.zeros(0, dtype=torch.float32, device=x.device)
    return y.to(x.dtype).reshape(*lead, k), idx.reshape(*lead, k), softmax


__all__ = ["npu_moe_gating_top_k_softmax_v2", "npu_moe_init_routing_quant"]
