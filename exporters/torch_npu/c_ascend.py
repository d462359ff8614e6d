"""vllm-ascend's own ops, ``torch.ops._C_ascend.moe_gating_top_k``, ``moe_gating_top_k_hash``,
``grouped_matmul_swiglu_quant_weight_nz_tensor_list`` and its one-tensor forms
``grouped_matmul_swiglu_quant`` / ``_weight_nz``, with the schemas of its ``csrc/torch_binding.cpp``.

All are CompositeImplicitAutograd front ends of the project's ops (the gating ones of the
MoeGatingTopKHash router op, one node; the fused w8a8 one of a GroupedMatmul node and the
npu_dequant_swiglu_quant decomposition); they are defined only where vllm-ascend's library does not
define them.
"""

from __future__ import annotations

import torch

from .._torch_lib import library, op_defined
from . import _ops
from ._args import require, stacked_weight, unsupported
from .quant import npu_dequant_swiglu_quant
from .routing import normalised_scores_placeholder

NAMESPACE = "_C_ascend"
GATING_SCHEMA = ("(Tensor x, int k, int k_group, int group_count, int group_select_mode, int renorm, "
                 "int norm_type, bool out_flag, float routed_scaling_factor, float eps, Tensor? bias_opt=None) "
                 "-> (Tensor y, Tensor expert_idx, Tensor out)")
GATING_HASH_SCHEMA = ("(Tensor x, int k, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
                      "int k_group=1, int group_count=1, float routed_scaling_factor=1.0, float eps=1e-20, "
                      "int group_select_mode=0, int renorm=0, int norm_type=0, bool out_flag=False) "
                      "-> (Tensor y, Tensor expert_idx, Tensor out)")
GMM_SWIGLU_QUANT_NZ_LIST_SCHEMA = ("(Tensor x, Tensor[] weight, Tensor[] weight_scale, Tensor x_scale, "
                                   "Tensor group_list, *, Tensor? bias=None, Tensor? offset=None, "
                                   "float swiglu_limit=0.0) -> (Tensor output, Tensor output_scale, "
                                   "Tensor output_offset)")


def moe_gating_top_k(x, k, k_group, group_count, group_select_mode, renorm, norm_type, out_flag,
                     routed_scaling_factor, eps, bias_opt=None):
    """_C_ascend.moe_gating_top_k: softmax / sigmoid gating, renorm 0 or 1 (L1 renormalisation)."""
    fn = "_C_ascend.moe_gating_top_k"
    require(x.dim() == 2, fn, "x", "must be 2-D [rows, experts]", x)
    require(norm_type in (0, 1), fn, "norm_type", "must be 0 (softmax) or 1 (sigmoid)", norm_type)
    y, idx, out = _ops.gating_top_k(x, k, bias_opt, None, None, k_group=k_group, group_count=group_count,
                                    group_select_mode=group_select_mode, renorm=renorm, norm_type=norm_type,
                                    out_flag=out_flag, routed_scaling_factor=routed_scaling_factor, eps=eps)
    return y, idx, out if out_flag else normalised_scores_placeholder(x)


def moe_gating_top_k_hash(x, k, bias=None, input_ids=None, tid2eid=None, k_group=1, group_count=1,
                          routed_scaling_factor=1.0, eps=1e-20, group_select_mode=0, renorm=0, norm_type=0,
                          out_flag=False):
    """_C_ascend.moe_gating_top_k_hash: DeepSeek-V4 gating (norm_type 2 = sqrt(softplus)), hash routing."""
    fn = "_C_ascend.moe_gating_top_k_hash"
    require(x.dim() == 2, fn, "x", "must be 2-D [rows, experts]", x)
    require(renorm == 0, fn, "renorm", "must be 0 (the vllm-ascend kernel's only mode)", renorm)
    y, idx, out = _ops.gating_top_k(x, k, bias, input_ids, tid2eid, k_group=k_group, group_count=group_count,
                                    group_select_mode=group_select_mode, renorm=renorm, norm_type=norm_type,
                                    out_flag=out_flag, routed_scaling_factor=routed_scaling_factor, eps=eps)
    return y, idx, out if out_flag else normalised_scores_placeholder(x)


def grouped_matmul_swiglu_quant_weight_nz_tensor_list(x, weight, weight_scale, x_scale, group_list, bias=None,
                                                      offset=None, swiglu_limit=0.0):
    """_C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list: ``(y int8 [M, N/2], y_scale
    float32 [M], y_offset (empty))``.

    ``x`` int8 [M, K] grouped by ``group_list`` (cumsum [E]); ``weight`` E int8 [K, N] (or one
    [E, K, N]; NZ is a storage layout of the same values); ``weight_scale`` E [N] (or one [E, N]);
    ``x_scale`` float32 [M]. The int32 sums dequantised by both scales, then swiglu with the left
    half activated (``swiglu_limit`` > 0: the left half clamped above at the limit, the right half
    to ±limit, as the kernel does) and per-row dynamic int8. Rows past the groups are 0.
    """
    fn = "_C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list"
    if bias is not None:
        unsupported(fn, "bias", bias, "pass None (the w8a8 MoE paths add no bias here)")
    if offset is not None:
        unsupported(fn, "offset", offset, "symmetric quantisation has no offset; pass None")
    require(x.dtype == torch.int8 and x.dim() == 2, fn, "x", "must be int8 [M, K]", x)
    w = stacked_weight(fn, weight)
    require(w.dtype == torch.int8, fn, "weight", "must be int8", w)
    experts = w.shape[0]
    scales = list(weight_scale)
    ws = scales[0] if len(scales) == 1 and scales[0].dim() == 2 else torch.stack(scales) if scales else None
    require(ws is not None and tuple(ws.shape) == (experts, w.shape[2]), fn, "weight_scale",
            lambda: f"must be {experts} tensors [N] or one [E, N] = [{experts}, {w.shape[2]}]", weight_scale)
    require(group_list.dim() == 1 and group_list.shape[0] == experts, fn, "group_list",
            lambda: f"must be the cumsum of the rows per expert, [{experts}]", group_list)
    require(swiglu_limit >= 0.0, fn, "swiglu_limit", "must be non-negative", swiglu_limit)
    acc = _ops.grouped_matmul(x, w, None, group_list, 0, output_dtype=6)  # int32 sums
    ends = group_list.to(torch.int64)
    counts = torch.cat([ends[:1], ends[1:] - ends[:-1]])
    clamped = swiglu_limit > 1e-8  # the kernel's test
    y, scale = npu_dequant_swiglu_quant(acc, weight_scale=ws.float(), activation_scale=x_scale, group_index=counts,
                                        activate_left=True, quant_mode=1, swiglu_mode=2 if clamped else 0,
                                        clamp_limit=float(swiglu_limit), glu_alpha=1.0, glu_bias=0.0)
    return y, scale, torch.empty(0, dtype=torch.float32, device=x.device)


GMM_SWIGLU_QUANT_SCHEMA = ("(Tensor x, Tensor weight, Tensor weight_scale, Tensor x_scale, Tensor group_list, *, "
                           "Tensor? bias=None, Tensor? offset=None, float swiglu_limit=0.0) -> (Tensor output, "
                           "Tensor output_scale, Tensor output_offset)")


def grouped_matmul_swiglu_quant(x, weight, weight_scale, x_scale, group_list, bias=None, offset=None,
                                swiglu_limit=0.0):
    """_C_ascend.grouped_matmul_swiglu_quant (and ``_weight_nz``, NZ being a storage layout of the
    same values): the tensor-list op's computation with one stacked ``weight`` int8 [E, K, N] and one
    ``weight_scale`` [E, N] (vllm-ascend's csrc/gmm/grouped_matmul_swiglu_quant README)."""
    require(isinstance(weight, torch.Tensor) and weight.dim() == 3, "_C_ascend.grouped_matmul_swiglu_quant",
            "weight", "must be one tensor [E, K, N]", weight)
    require(isinstance(weight_scale, torch.Tensor) and weight_scale.dim() == 2,
            "_C_ascend.grouped_matmul_swiglu_quant", "weight_scale", "must be one tensor [E, N]", weight_scale)
    return grouped_matmul_swiglu_quant_weight_nz_tensor_list(x, [weight], [weight_scale], x_scale, group_list,
                                                             bias=bias, offset=offset, swiglu_limit=swiglu_limit)


def define_ops() -> None:
    """Define the ops unless vllm-ascend already did (idempotent)."""
    lib = library(NAMESPACE)
    for name, schema, fn in (("moe_gating_top_k", GATING_SCHEMA, moe_gating_top_k),
                             ("moe_gating_top_k_hash", GATING_HASH_SCHEMA, moe_gating_top_k_hash),
                             ("grouped_matmul_swiglu_quant_weight_nz_tensor_list", GMM_SWIGLU_QUANT_NZ_LIST_SCHEMA,
                              grouped_matmul_swiglu_quant_weight_nz_tensor_list),
                             ("grouped_matmul_swiglu_quant", GMM_SWIGLU_QUANT_SCHEMA, grouped_matmul_swiglu_quant),
                             ("grouped_matmul_swiglu_quant_weight_nz", GMM_SWIGLU_QUANT_SCHEMA,
                              grouped_matmul_swiglu_quant)):
        if op_defined(NAMESPACE, name):
            continue
        lib.define(name + schema)
        lib.impl(name, fn, "CompositeImplicitAutograd")
