"""Torch front ends of the ascend.moe ops and their ONNX export.

Importing this package defines ``torch.ops.custom.npu_moe_gating_top_k``,
``torch.ops.npu.npu_moe_gating_top_k`` (front ends of ``torch.ops.ascend_moe.moe_gating_top_k_hash``),
``torch.ops.npu.npu_moe_re_routing`` and ``torch.ops.ascend_moe.grouped_matmul`` (implementation
through the NumPy references for every device, fake kernel, gating autograd) unless torch_npu already does, by calling :func:`define_torch_ops` below, and has no other side effect. Use
:func:`export` or pass :func:`custom_translation_table` to ``torch.onnx.export(..., dynamo=True)``.
"""

from __future__ import annotations

from . import (
    grouped_matmul,
    grouped_matmul_onnx,
    moe_finalize_routing_v2,
    moe_finalize_routing_v2_onnx,
    moe_gating_top_k_hash,
    moe_gating_top_k_hash_onnx,
    moe_init_routing,
    moe_init_routing_onnx,
    moe_init_routing_v3,
    moe_init_routing_v3_onnx,
    moe_re_routing,
    moe_re_routing_onnx,
    moe_token_permute,
    moe_token_permute_onnx,
    moe_token_unpermute,
    swi_glu,
    swi_glu_onnx,
)
from ._torch_lib import try_import_torch_npu
from .export import custom_translation_table, export, register_torchscript_symbolics

__all__ = ["custom_translation_table", "define_torch_ops", "export", "register_torchscript_symbolics",
           "OPS"]


def define_torch_ops() -> None:
    """Define the torch ops that neither torch_npu nor the Ascend custom-op package defines
    (idempotent). The one place they are defined; importing this package calls it."""
    try_import_torch_npu()
    moe_gating_top_k_hash.define_torch_ops()
    moe_re_routing.define_torch_ops()
    grouped_matmul.define_torch_ops()
    moe_init_routing_v3.define_torch_ops()
    moe_token_permute.define_torch_ops()
    moe_init_routing.define_torch_ops()
    moe_finalize_routing_v2.define_torch_ops()
    moe_token_unpermute.define_torch_ops()
    swi_glu.define_torch_ops()


define_torch_ops()

# (namespace, op name, dynamo translation, TorchScript symbolic) for every torch front end.
OPS = [
    ("custom", "npu_moe_gating_top_k", moe_gating_top_k_hash_onnx.gating_translation,
     moe_gating_top_k_hash_onnx.custom_gating_symbolic),
    ("npu", "npu_moe_gating_top_k", moe_gating_top_k_hash_onnx.gating_translation,
     moe_gating_top_k_hash_onnx.npu_gating_symbolic),
    ("ascend_moe", "moe_gating_top_k_hash", moe_gating_top_k_hash_onnx.router_translation,
     moe_gating_top_k_hash_onnx.router_symbolic),
    ("npu", "npu_moe_re_routing", moe_re_routing_onnx.re_routing_translation,
     moe_re_routing_onnx.re_routing_symbolic),
    ("ascend_moe", "grouped_matmul", grouped_matmul_onnx.grouped_matmul_translation,
     grouped_matmul_onnx.grouped_matmul_symbolic),
    ("ascend_moe", "moe_init_routing_v3", moe_init_routing_v3_onnx.init_routing_translation,
     moe_init_routing_v3_onnx.init_routing_symbolic),
    ("ascend_moe", "moe_token_permute", moe_token_permute_onnx.token_permute_translation,
     moe_token_permute_onnx.token_permute_symbolic),
    ("ascend_moe", "moe_init_routing", moe_init_routing_onnx.init_routing_v1_translation,
     moe_init_routing_onnx.init_routing_v1_symbolic),
    ("ascend_moe", "moe_finalize_routing_v2", moe_finalize_routing_v2_onnx.finalize_translation,
     moe_finalize_routing_v2_onnx.finalize_symbolic),
    ("ascend_moe", "moe_token_unpermute", moe_finalize_routing_v2_onnx.unpermute_translation,
     moe_finalize_routing_v2_onnx.unpermute_symbolic),
    ("ascend_moe", "swi_glu", swi_glu_onnx.swiglu_translation, swi_glu_onnx.swiglu_symbolic),
]
