"""Hugging Face ``transformers`` MoE models with the fused Ascend router.

- ``routing(config)``: MoeGatingTopKHash attributes from an HF config, one function per
  architecture (``models.hf_routing``, which the presets use too; no transformers needed:
  config.json dicts work too);
- ``patch(model)`` / ``unpatch(model)``: route every supported MoE block of a loaded model with
  ``torch.ops.custom.npu_moe_gating_top_k`` and the project's expert formulation, in place;
- ``export``: one MoE layer, several, or the whole causal LM (prefill) to ONNX.
See docs/huggingface.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ascend_moe_onnx.models.hf_routing import HFConfigError, Routing, routing

if TYPE_CHECKING:
    import torch

__all__ = ["HFConfigError", "Routing", "routing", "patch", "unpatch"]


def patch(model: torch.nn.Module, *, quiet: bool = False) -> list[str]:
    """Route every supported MoE block of ``model`` with the fused op, in place (see ``hf.patching``)."""
    from .patching import patch as _patch

    return _patch(model, quiet=quiet)


def unpatch(model: torch.nn.Module) -> int:
    """Restore the HF classes of every patched block."""
    from .patching import unpatch as _unpatch

    return _unpatch(model)
