"""The one call per operator behind the torch_npu stand-in functions.

Each function here takes normalised, positional arguments and is the single place that says which
of the project's torch ops computes it (each one ONNX node on export; docs/ascend-code.md's op map).
"""

from __future__ import annotations

import torch
from torch.fx.experimental.symbolic_shapes import statically_known_true

from .. import moe_gating_top_k_hash as gating


def gating_top_k(x, k, bias, input_ids, tid2eid, **attrs):
    """MoeGatingTopKHash (torch.ops.ascend_moe.moe_gating_top_k_hash): ``(y, expert_idx, out)``."""
    return gating.router(x, k, bias=bias, input_ids=input_ids, tid2eid=tid2eid, **attrs)


def softmax_top_k(x, k, renorm: int = 0, with_softmax: bool = False):
    """Softmax (in float32) and top-k over the last dim as standard ops (Softmax, TopK, whose ties go
    to the lower index in ONNX), for the sizes beyond MoeGatingTopKHash's limits (E > 2048 or
    k > 64) that torch_npu's softmax gating accepts: ``(y in x's dtype, expert_idx int32, the full
    softmax or None)``. ``renorm`` 0: the top k of the softmax; 1: the softmax of the top k logits
    (MoeGatingTopKHash's ``renorm`` with ``norm_type`` 0)."""
    if renorm:
        logits, idx = torch.topk(x.float(), k, dim=-1, largest=True, sorted=True)
        return torch.softmax(logits, dim=-1).to(x.dtype), idx.to(torch.int32), None
    probs = torch.softmax(x.float(), dim=-1)
    y, idx = torch.topk(probs, k, dim=-1, largest=True, sorted=True)
    return y.to(x.dtype), idx.to(torch.int32), probs if with_softmax else None


def re_routing(tokens, counts, per_token_scales, expert_token_num_type, idx_type):
    """MoeReRouting (torch.ops.npu.npu_moe_re_routing)."""
    return torch.ops.npu.npu_moe_re_routing(tokens, counts, per_token_scales=per_token_scales,
                                            expert_token_num_type=expert_token_num_type, idx_type=idx_type)


def init_routing_v2(x, expert_idx, scale, offset, active_num, expert_capacity, expert_num, drop_pad_mode,
                    expert_tokens_num_type, expert_tokens_num_flag, quant_mode, active_expert_range, row_idx_type):
    """MoeInitRoutingV3 (torch.ops.ascend_moe.moe_init_routing_v3): ``(expanded_x, expanded_row_idx,
    expert_tokens_count_or_cumsum, expanded_scale)``."""
    return torch.ops.ascend_moe.moe_init_routing_v3(
        x, expert_idx, scale, offset, active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_type,
        expert_tokens_num_flag, quant_mode, list(active_expert_range or []), row_idx_type)


def init_routing(x, row_idx, expert_idx, active_num):
    """MoeInitRouting (torch.ops.ascend_moe.moe_init_routing, first version): ``(expanded_x,
    expanded_row_idx, expanded_expert_idx)``; the node checks ``row_idx`` (a permutation of
    [0, N·K)), ``expert_idx`` (int32) and ``active_num`` (>= 0) eagerly and in ONNX Runtime."""
    from ..moe_init_routing import ALL_TOKENS

    rows = expert_idx.shape[0]
    if not isinstance(active_num, int) and statically_known_true(active_num >= rows):
        active_num = ALL_TOKENS  # every row, as Ascend code's active_num = rows: no Slice after the node
    return torch.ops.ascend_moe.moe_init_routing(x, row_idx, expert_idx, active_num)


def transposed_view(weight) -> bool:
    """Whether ``weight`` [E, K, N] is a transposed view of a contiguous [E, N, K] tensor
    (torch_npu's is_weight_trans test), e.g. vllm-ascend's ``w1.transpose(1, 2)``."""
    return (not weight.is_contiguous() and weight.stride(-2) == 1 and weight.stride(-1) == weight.shape[-2])


def grouped_matmul(x, weight, bias, group_list, group_list_type, scale=None, antiquant_scale=None,
                   antiquant_offset=None, per_token_scale=None, output_dtype=0):
    """GroupedMatmul (torch.ops.ascend_moe.grouped_matmul): rows of x grouped by expert (counts or
    cumsum) times weight[e] (+ bias[e]), dequantized as the quantized inputs say; rows past the
    last group are 0. A transposed view of an [E, N, K] weight is passed as that storage (no
    Transpose in the graph)."""
    quant = dict(scale=scale, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                 per_token_scale=per_token_scale, group_list_type=group_list_type, output_dtype=output_dtype)
    if transposed_view(weight):
        return torch.ops.ascend_moe.grouped_matmul(x, weight.transpose(1, 2), group_list, bias, transpose_weight=1,
                                                   **quant)
    return torch.ops.ascend_moe.grouped_matmul(x, weight, group_list, bias, **quant)


def finalize_routing(rows, skip1, skip2, bias, scales, expanded_src_to_dst_row, expert_for_source_row,
                     drop_pad_mode):
    """MoeFinalizeRoutingV2 (torch.ops.ascend_moe.moe_finalize_routing_v2):
    ``skip1 + skip2 + Σ_j scales[i, j] · (rows[idx(i, j)] + bias[expert])``."""
    return torch.ops.ascend_moe.moe_finalize_routing_v2(rows, expanded_src_to_dst_row, skip1, skip2, bias, scales,
                                                        expert_for_source_row, drop_pad_mode)


def token_permute(tokens, indices, num_out_tokens, padded_mode):
    """MoeTokenPermute (torch.ops.ascend_moe.moe_token_permute): ``(permuted_tokens, sorted_indices)``,
    sorted_indices[p] = row of pair p."""
    return torch.ops.ascend_moe.moe_token_permute(tokens, indices, num_out_tokens, padded_mode)


def token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape):
    """MoeTokenUnpermute (torch.ops.ascend_moe.moe_token_unpermute):
    ``out[t] = Σ_j probs[t, j] · permuted_tokens[sorted_indices[t·k + j]]``."""
    return torch.ops.ascend_moe.moe_token_unpermute(permuted_tokens, sorted_indices, probs, padded_mode,
                                                    None if restore_shape is None else list(restore_shape))


def swiglu(x, dim):
    """SwiGlu (torch.ops.ascend_moe.swi_glu): ``silu(a) * b`` with ``a, b = x.chunk(2, dim)``."""
    return torch.ops.ascend_moe.swi_glu(x, dim)
