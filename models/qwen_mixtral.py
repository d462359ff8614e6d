"""Qwen3-MoE and Mixtral sparse MoE blocks.

Router: ``gate`` logits in the model dtype; softmax in float32, top-k, renormalise over the k
selected (``norm_topk_prob``; Mixtral always), weights cast back to the model dtype. This is
MoeGatingTopKHash with norm_type 0 and renorm 1 (docs/operators.md §1.4). No shared expert.
"""

from __future__ import annotations

import torch

from .layers import MoEConfig, RoutedMoE


class SoftmaxTopKMoE(RoutedMoE):
    """Qwen3-MoE / Mixtral sparse MoE block (softmax, top-k, renormalise)."""

    def route_native(self, logits, inputs):
        """Reference routing (Hugging Face): float32 softmax, top-k, renormalise, cast to dtype."""
        probs = torch.softmax(logits.float(), dim=-1)
        w, idx = torch.topk(probs, self.cfg.top_k, dim=-1)
        if self.cfg.renorm:
            w = w / w.sum(dim=-1, keepdim=True)
        return (w * self.cfg.routed_scaling_factor).to(logits.dtype), idx

    def selection_scores(self, inputs):
        """The router logits (softmax keeps their order, and they carry the dtype's rounding)."""
        return self.router_logits(inputs["hidden_states"]).float()


PRESETS = {
    "qwen3-moe": dict(
        cls=SoftmaxTopKMoE,
        doc="Qwen3-MoE (235B-A22B sizes): 128 experts, top-8 softmax, norm_topk_prob",
        tiny=MoEConfig(hidden=64, experts=16, top_k=4, intermediate=32, norm_type=0, renorm=1,
                       router_fp32=False),
        full=MoEConfig(hidden=4096, experts=128, top_k=8, intermediate=1536, norm_type=0, renorm=1,
                       router_fp32=False),
    ),
    "mixtral": dict(
        cls=SoftmaxTopKMoE,
        doc="Mixtral 8x7B: 8 experts, top-2 softmax, renormalised",
        tiny=MoEConfig(hidden=32, experts=8, top_k=2, intermediate=48, norm_type=0, renorm=1,
                       router_fp32=False),
        full=MoEConfig(hidden=4096, experts=8, top_k=2, intermediate=14336, norm_type=0, renorm=1,
                       router_fp32=False),
    ),
}
