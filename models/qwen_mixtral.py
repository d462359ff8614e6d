"""Qwen3-MoE and Mixtral sparse MoE blocks.

Router: ``gate`` logits in the model dtype; softmax in float32, top-k, renormalise over the k
selected (``norm_topk_prob``; Mixtral always), weights cast back to the model dtype. This is
MoeGatingTopKHash with norm_type 0 and renorm 1 (docs/operators.md §1.4). No shared expert.
"""

from __future__ import annotations

import torch

from .from_hf import moe_config
from .layers import RoutedMoE


class SoftmaxTopKMoE(RoutedMoE):
    """Qwen3-MoE / Mixtral sparse MoE block (softmax, top-k, renormalise)."""

    def route_native(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference routing (Hugging Face): float32 softmax, top-k, renormalise, cast to dtype."""
        probs = torch.softmax(logits.float(), dim=-1)
        w, idx = torch.topk(probs, self.cfg.top_k, dim=-1)
        if self.cfg.renorm:
            w = w / w.sum(dim=-1, keepdim=True)
        return (w * self.cfg.routed_scaling_factor).to(logits.dtype), idx

    def selection_scores(self, inputs: dict) -> torch.Tensor:
        """The router logits (softmax keeps their order, and they carry the dtype's rounding)."""
        return self.router_logits(inputs["hidden_states"]).float()


# Published HF config routing fields + sizes (tiny: fewer, smaller experts).
HF = {
    "qwen3-moe": dict(model_type="qwen3_moe", num_experts=128, num_experts_per_tok=8, norm_topk_prob=True),
    "mixtral": dict(model_type="mixtral", num_local_experts=8, num_experts_per_tok=2),
}
_TINY_QWEN = {**HF["qwen3-moe"], "num_experts": 16, "num_experts_per_tok": 4}

PRESETS = {
    "qwen3-moe": dict(
        cls=SoftmaxTopKMoE, hf=HF["qwen3-moe"],
        doc="Qwen3-MoE (235B-A22B sizes): 128 experts, top-8 softmax, norm_topk_prob",
        tiny=moe_config(_TINY_QWEN, hidden=64, intermediate=32),
        full=moe_config(HF["qwen3-moe"], hidden=4096, intermediate=1536),
    ),
    "mixtral": dict(
        cls=SoftmaxTopKMoE, hf=HF["mixtral"],
        doc="Mixtral 8x7B: 8 experts, top-2 softmax, renormalised",
        tiny=moe_config(HF["mixtral"], hidden=32, intermediate=48),
        full=moe_config(HF["mixtral"], hidden=4096, intermediate=14336),
    ),
}
