"""torch_npu's MoE routing functions (names, signatures and defaults of op-plugin's
``op_plugin_functions.yaml``): gating, init routing, re-routing, permute / unpermute, finalize."""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as gating_spec

from .. import bit_views
from . import _ops, routing_quant
from ._args import require, unsupported
from .mx_quant import FLOAT4_E1M2, FLOAT4_E2M1, HIFLOAT8

# op-plugin's docs (torch_npu-npu_moe_gating_top_k_softmax.md): k <= 1024, any number of experts
SOFTMAX_MAX_K = 1024


def _gating_checks(fn: str, x, norm_type: int) -> None:
    require(x.dim() == 2, fn, "x", "must be 2-D [rows, experts]", x)
    require(norm_type in (gating_spec.NORM_SOFTMAX, gating_spec.NORM_SIGMOID), fn, "norm_type",
            "must be 0 (softmax) or 1 (sigmoid)", norm_type)


def normalised_scores_placeholder(x: torch.Tensor) -> torch.Tensor:
    """The ``out`` torch_npu returns when ``out_flag`` is false: ``[rows, E]`` float32 that the NPU
    kernel leaves unwritten; here zeros (no code may read it)."""
    return torch.zeros(x.shape, dtype=torch.float32, device=x.device)


def npu_moe_gating_top_k(x, k, *, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                         group_select_mode=0, renorm=0, norm_type=0, out_flag=False,
                         routed_scaling_factor=1.0, eps=1e-20):
    """torch_npu.npu_moe_gating_top_k: ``(y [rows, k], expert_idx int32 [rows, k], out float32 [rows, E])``.

    One MoeGatingTopKHash node; hash routing through ``input_ids`` / ``tid2eid`` (both or neither).
    ``out`` holds the normalised scores when ``out_flag``; torch_npu returns it [rows, E] either way.
    """
    fn = "npu_moe_gating_top_k"
    _gating_checks(fn, x, norm_type)
    require((input_ids is None) == (tid2eid is None), fn, "tid2eid",
            "must be given together with input_ids (hash routing)", tid2eid)
    y, idx, out = _ops.gating_top_k(x, k, bias, input_ids, tid2eid, k_group=k_group, group_count=group_count,
                                    group_select_mode=group_select_mode, renorm=renorm, norm_type=norm_type,
                                    out_flag=bool(out_flag), routed_scaling_factor=routed_scaling_factor,
                                    eps=eps)
    return y, idx, out if out_flag else normalised_scores_placeholder(x)


def npu_moe_gating_top_k_softmax(x, finished=None, k=1):
    """torch_npu.npu_moe_gating_top_k_softmax: softmax, top-k (weights not renormalised) and row_idx.

    ``y`` and ``expert_idx`` are one MoeGatingTopKHash node (norm_type 0, no groups); rows marked in
    ``finished`` get expert index E; ``row_idx[t, j] = j * rows + t`` (the order
    npu_moe_init_routing reads).
    """
    fn = "npu_moe_gating_top_k_softmax"
    require(x.dim() in (2, 3), fn, "x", "must be 2-D or 3-D", x)
    # op-plugin's docs: 0 < k <= E and k <= 1024; E itself is not limited
    require(0 < k <= min(x.shape[-1], SOFTMAX_MAX_K), fn, "k", lambda: f"must be in (0, min(E, {SOFTMAX_MAX_K})] "
            f"with E = {x.shape[-1]}", k)
    if x.shape[-1] <= gating_spec.MAX_EXPERTS and k <= gating_spec.MAX_K:
        y, idx, _ = _ops.gating_top_k(x, k, None, None, None, norm_type=gating_spec.NORM_SOFTMAX)
    else:  # beyond MoeGatingTopKHash's limits: the same softmax and top-k in standard ops
        y, idx, _ = _ops.softmax_top_k(x, k)
    if finished is not None:
        require(finished.dtype == torch.bool and tuple(finished.shape) == tuple(x.shape[:-1]), fn, "finished",
                lambda: f"must be bool of shape {list(x.shape[:-1])}", finished)
        idx = torch.where(finished[..., None], torch.full_like(idx, x.shape[-1]), idx)
    rows = y.numel() // k
    row_idx = torch.arange(rows * k, dtype=torch.int32, device=x.device).reshape(k, rows).t().reshape(y.shape)
    return y, idx, row_idx


def npu_moe_re_routing(tokens, expert_token_num_per_rank, *, per_token_scales=None, expert_token_num_type=1,
                       idx_type=0, tokens_dtype=None):
    """torch_npu.npu_moe_re_routing: tokens received from every rank regrouped by local expert
    (one MoeReRouting node). ``tokens_dtype`` names what one-byte tokens hold (hifloat8, or two
    float4 codes a byte): the rows move as bytes, so the uint8 / int8 tokens are regrouped as they
    are and returned as uint8, as torch_npu returns them."""
    fn = "npu_moe_re_routing"
    if tokens_dtype is not None:
        require(tokens_dtype in (HIFLOAT8, FLOAT4_E2M1, FLOAT4_E1M2), fn, "tokens_dtype",
                "must be torch_npu.hifloat8, float4_e2m1fn_x2, float4_e1m2fn_x2 or None (torch_npu: \"The optional "
                "parameter tokens_dtype only supports ...\")", tokens_dtype)
        require(tokens.dtype in (torch.uint8, torch.int8), fn, "tokens",
                "must hold one-byte codes (uint8 / int8) with tokens_dtype", tokens)
        tokens = tokens.view(torch.uint8)
    if isinstance(per_token_scales, torch.Tensor) and per_token_scales.dtype in (torch.uint8, torch.float8_e8m0fnu):
        return _mx_re_routing(fn, tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type,
                              idx_type)
    return _ops.re_routing(tokens, expert_token_num_per_rank, per_token_scales, expert_token_num_type, idx_type)


def _mx_re_routing(fn, tokens, counts, scales, expert_token_num_type, idx_type):
    """Ascend 950's MX form (ops-transformer's MoeReRouting regbase types): float8 tokens with their
    e8m0 block scales ``[A, ...]`` (one row of scales per token), regrouped with the tokens. The
    MoeReRouting node regroups the tokens; the scale rows follow by the permutation it returns."""
    require(tokens.dtype in (torch.float8_e4m3fn, torch.float8_e5m2), fn, "tokens",
            "must be float8_e4m3fn or float8_e5m2 with e8m0 per_token_scales (MX)", tokens)
    require(scales.dim() >= 2 and scales.shape[0] == tokens.shape[0], fn, "per_token_scales",
            lambda: f"must be [{tokens.shape[0]}, ...] e8m0 block scales, one row per token (MX)", scales)
    out, _, idx, expert_counts = _ops.re_routing(tokens, counts, None, expert_token_num_type, idx_type)
    source = idx.to(torch.int64)
    if idx_type == 1:  # scatter indices: row i of the input goes to row idx[i]; gather by the inverse
        source = torch.empty_like(source).scatter_(0, source, torch.arange(source.shape[0], device=source.device))
    return out, scales[source], idx, expert_counts


def npu_moe_init_routing_v2(x, expert_idx, *, scale=None, offset=None, active_num=-1, expert_capacity=-1,
                            expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0,
                            expert_tokens_num_flag=False, quant_mode=-1, active_expert_range=(), row_idx_type=0,
                            x_dtype=None):
    """torch_npu.npu_moe_init_routing_v2: ``(expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum,
    expanded_scale)``; one MoeInitRoutingV3 node (dropless or drop/pad, unquantised or int8). The
    Ascend950 modes (MXFP8, FP8 group / per-block, HiFloat8, MXFP4, int4) and float8 / one-byte-code
    x are the node with ``quant_mode=-1`` and standard ops after it (:mod:`.routing_quant`).

    ``active_num`` may be a SymInt (e.g. ``num_tokens * top_k`` from a dynamic shape): the token
    count stays dynamic; a Python int fixes the output rows at ``min(active_num, rows * k)``. A
    SymInt known to be at least ``rows * k`` (the usual ``num_tokens * top_k``) keeps every row, as
    -1 does, and is passed as -1: the graph then needs no Slice (a copy of every expanded row).
    """
    # no isinstance(active_num, torch.SymInt) test: under strict (dynamo) capture, which models
    # computing the token count as shape[:-1].numel() need, a SymInt is not one there
    if expert_idx.dim() == 2 and statically_known_true(active_num >= x.shape[0] * expert_idx.shape[1]):
        active_num = -1
    source = bit_views.source_of(x)
    if source is not None and quant_mode == -1 and scale is None and x_dtype is None and source.dim() == 2:
        # rows of a width-changing bit view (exporting): the source's rows move, then the view
        moved, row_idx, counts, expanded_scale = npu_moe_init_routing_v2(
            source, expert_idx, offset=offset, active_num=active_num, expert_capacity=expert_capacity,
            expert_num=expert_num, drop_pad_mode=drop_pad_mode, expert_tokens_num_type=expert_tokens_num_type,
            expert_tokens_num_flag=expert_tokens_num_flag, quant_mode=quant_mode,
            active_expert_range=active_expert_range, row_idx_type=row_idx_type)
        return moved.view(x.dtype), row_idx, counts, expanded_scale
    node_quant_mode = quant_mode if quant_mode in (0, 1) else -1

    def routing(rows, node_scale):
        # the Ascend950 modes take no offset (HiFloat8 per-tensor ignores one, as torch_npu's golden does)
        return _ops.init_routing_v2(rows, expert_idx, node_scale, offset if quant_mode in (-1, 0, 1) else None,
                                    active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_type,
                                    bool(expert_tokens_num_flag), node_quant_mode, active_expert_range, row_idx_type)

    return routing_quant.init_routing_v2("npu_moe_init_routing_v2", x, expert_idx, scale, offset, quant_mode,
                                         drop_pad_mode, expert_num, expert_capacity, expert_tokens_num_type,
                                         active_expert_range, x_dtype, routing)


def npu_moe_init_routing(x, row_idx, expert_idx, active_num):
    """torch_npu.npu_moe_init_routing: ``(expanded_x [min(rows, active_num)·k, H], expanded_row_idx,
    expanded_expert_idx)``; ``row_idx`` as npu_moe_gating_top_k_softmax returns it."""
    fn = "npu_moe_init_routing"
    require(x.dim() == 2, fn, "x", "must be 2-D [rows, H]", x)
    require(expert_idx.dim() == 2 and tuple(row_idx.shape) == tuple(expert_idx.shape), fn, "row_idx",
            lambda: f"must have expert_idx's shape {list(expert_idx.shape)}", row_idx)
    return _ops.init_routing(x, row_idx, expert_idx, active_num)


def npu_moe_compute_expert_tokens(sorted_expert_for_source_row, num_expert):
    """torch_npu.npu_moe_compute_expert_tokens: for each expert e, the end row of its group in the
    sorted rows (number of rows with expert <= e), in the input's dtype."""
    fn = "npu_moe_compute_expert_tokens"
    require(sorted_expert_for_source_row.dim() == 1, fn, "sorted_expert_for_source_row", "must be 1-D",
            sorted_expert_for_source_row)
    require(0 < num_expert <= 2048, fn, "num_expert", "must be in (0, 2048]", num_expert)
    experts = torch.arange(num_expert, device=sorted_expert_for_source_row.device)
    ends = (sorted_expert_for_source_row.to(torch.int64)[None, :] <= experts[:, None]).sum(1)
    return ends.to(sorted_expert_for_source_row.dtype)


def npu_moe_finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                             export_for_source_row, drop_pad_mode=0, k=1):
    """torch_npu.npu_moe_finalize_routing: ``skip1 + skip2 + Σ_j scales[i, j]·(rows[idx(i, j)] + bias[e])``
    (one MoeFinalizeRoutingV2 node).

    ``drop_pad_mode`` 0/1: ``expanded_src_to_dst_row`` slot-major (entry ``j·rows + i``, as
    npu_moe_init_routing gives it); 2/3: token-major (``i·k + j``, as npu_moe_init_routing_v2 gives
    it); 1/3 take ``expanded_permuted_rows`` as ``[E, C, H]``. ``k`` (torch_npu's newer argument)
    only matters without ``scales``, where the operator has one slot per row: k must be 1 there.
    """
    if scales is None and k not in (None, 1):
        unsupported("npu_moe_finalize_routing", "k", k, "without scales the operator takes one slot per row; "
                    "pass scales (their second dimension gives k)")
    return _ops.finalize_routing(expanded_permuted_rows, skip1, skip2, bias, scales, expanded_src_to_dst_row,
                                 export_for_source_row, drop_pad_mode)


def npu_moe_token_permute(tokens, indices, num_out_tokens=None, padded_mode=False):
    """torch_npu.npu_moe_token_permute: rows sorted by expert (stable) and, per (token, slot) pair,
    its row in the result (``sorted_indices``, int32)."""
    return _ops.token_permute(tokens, indices, num_out_tokens, bool(padded_mode))


def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """torch_npu.npu_moe_token_unpermute: ``out[t] = Σ_j probs[t, j]·permuted_tokens[sorted_indices[t·k + j]]``
    (one MoeTokenUnpermute node)."""
    return _ops.token_unpermute(permuted_tokens, sorted_indices, probs, bool(padded_mode), restore_shape)


__all__ = [
    "npu_moe_compute_expert_tokens", "npu_moe_finalize_routing", "npu_moe_gating_top_k",
    "npu_moe_gating_top_k_softmax", "npu_moe_init_routing", "npu_moe_init_routing_v2", "npu_moe_re_routing",
    "npu_moe_token_permute", "npu_moe_token_unpermute",
]
