"""Torch front ends of the ascend.moe ops and their ONNX export.

Importing this package defines ``torch.ops.custom.npu_moe_gating_top_k``,
``torch.ops.npu.npu_moe_gating_top_k`` (front ends of ``torch.ops.ascend_moe.moe_gating_top_k_hash``),
``torch.ops.npu.npu_moe_re_routing`` and the ``torch.ops.ascend_moe`` ops of the other operators
(implementation through the NumPy references for every device, fake kernel, autograd where the op
has one) unless torch_npu already does, by calling :func:`define_torch_ops` below, and has no other
side effect. Use :func:`export` or pass :func:`custom_translation_table` to
``torch.onnx.export(..., dynamo=True)``.

Each op's front end is two modules, ``<op>.py`` (the torch ops, their ``define_torch_ops`` marked
``@registry.torch_ops``) and ``<op>_onnx.py`` (``@registry.translation`` and ``@registry.symbolic``
per torch op); this package imports every ``*_onnx`` module, which imports its ``<op>.py``.
"""

from __future__ import annotations

import importlib
import pkgutil

from . import registry
from ._torch_lib import try_import_torch_npu
from .export import custom_translation_table, export, register_torchscript_symbolics

__all__ = ["custom_translation_table", "define_torch_ops", "export", "register_torchscript_symbolics"]

for _module in pkgutil.iter_modules(__path__):
    if _module.name.endswith("_onnx"):
        importlib.import_module(f"{__name__}.{_module.name}")


def define_torch_ops() -> None:
    """Define the torch ops that neither torch_npu nor the Ascend custom-op package defines
    (idempotent). The one place they are defined; importing this package calls it."""
    try_import_torch_npu()
    for define in registry.TORCH_OP_DEFINITIONS:
        define()


define_torch_ops()
