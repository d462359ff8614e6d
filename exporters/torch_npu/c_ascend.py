"""vllm-ascend's own gating ops, ``torch.ops._C_ascend.moe_gating_top_k`` and
``torch.ops._C_ascend.moe_gating_top_k_hash``, with the schemas of its ``csrc/torch_binding.cpp``.

Both are CompositeImplicitAutograd front ends of the MoeGatingTopKHash router op, so they export as
one node; they are defined only where vllm-ascend's library does not define them.
"""

from __future__ import annotations

from .._torch_lib import library, op_defined
from . import _ops
from ._args import require
from .routing import normalised_scores_placeholder

NAMESPACE = "_C_ascend"
GATING_SCHEMA = ("(Tensor x, int k, int k_group, int group_count, int group_select_mode, int renorm, "
                 "int norm_type, bool out_flag, float routed_scaling_factor, float eps, Tensor? bias_opt=None) "
                 "-> (Tensor y, Tensor expert_idx, Tensor out)")
GATING_HASH_SCHEMA = ("(Tensor x, int k, Tensor? bias=None, Tensor? input_ids=None, Tensor? tid2eid=None, "
                      "int k_group=1, int group_count=1, float routed_scaling_factor=1.0, float eps=1e-20, "
                      "int group_select_mode=0, int renorm=0, int norm_type=0, bool out_flag=False) "
                      "-> (Tensor y, Tensor expert_idx, Tensor out)")


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


def define_ops() -> None:
    """Define both ops unless vllm-ascend already did (idempotent)."""
    lib = library(NAMESPACE)
    for name, schema, fn in (("moe_gating_top_k", GATING_SCHEMA, moe_gating_top_k),
                             ("moe_gating_top_k_hash", GATING_HASH_SCHEMA, moe_gating_top_k_hash)):
        if op_defined(NAMESPACE, name):
            continue
        lib.define(name + schema)
        lib.impl(name, fn, "CompositeImplicitAutograd")
