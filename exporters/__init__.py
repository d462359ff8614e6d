"""Torch front ends of the ascend.moe ops and their ONNX export.

Importing this package defines ``torch.ops.custom.npu_moe_gating_top_k``,
``torch.ops.npu.npu_moe_gating_top_k`` and ``torch.ops.npu.npu_moe_re_routing`` (CPU
implementation + fake kernel) unless torch_npu already does, and registers nothing global besides. Use :func:`export` or pass
:func:`custom_translation_table` to ``torch.onnx.export(..., dynamo=True)``.
"""

from __future__ import annotations

# The op modules define the torch ops on import.
from . import moe_gating_top_k_hash, moe_re_routing  # noqa: F401
from . import moe_gating_top_k_hash_onnx, moe_re_routing_onnx
from .export import custom_translation_table, export, register_torchscript_symbolics

__all__ = ["custom_translation_table", "export", "register_torchscript_symbolics", "OPS"]

# (namespace, op name, dynamo translation, TorchScript symbolic) for every torch front end.
OPS = [
    ("custom", "npu_moe_gating_top_k", moe_gating_top_k_hash_onnx.gating_translation,
     moe_gating_top_k_hash_onnx.custom_gating_symbolic),
    ("npu", "npu_moe_gating_top_k", moe_gating_top_k_hash_onnx.gating_translation,
     moe_gating_top_k_hash_onnx.npu_gating_symbolic),
    ("npu", "npu_moe_re_routing", moe_re_routing_onnx.re_routing_translation,
     moe_re_routing_onnx.re_routing_symbolic),
]
