"""DeepSeek-V2 / V3 (R1), Kimi-K2 and GLM-4.5 MoE blocks (the ``DeepseekV3MoE`` layout).

Router: float32 logits ``linear(x.float(), gate.weight.float())``; softmax (V2) or sigmoid with an
``e_score_correction_bias`` that steers selection only (V3, Kimi-K2, GLM-4.5); optional
group-limited selection (V2: group max, keep 3 of 8; V3: sum of the group's two best, keep 4 of 8);
weights from the unbiased scores, renormalised for sigmoid, times ``routed_scaling_factor``.
Experts and shared expert(s) are SwiGLU; the shared expert's width is n_shared * moe_intermediate.
"""

from __future__ import annotations

import torch

from .layers import MoEConfig, RoutedMoE


def grouped_topk_reference(scores: torch.Tensor, bias: torch.Tensor | None, cfg: MoEConfig):
    """vLLM-``forward_native``-style grouped top-k on float32 scores -> (weights, expert_idx int64).

    Experts of dropped groups get -inf (Hugging Face uses 0.0, which only differs when fewer than
    k kept experts have a positive biased score); ``topk`` is sorted, so the order is descending.
    """
    T, E = scores.shape
    choice = scores if bias is None else scores + bias.float()
    if cfg.group_count > 1 and cfg.k_group < cfg.group_count:
        grouped = choice.view(T, cfg.group_count, E // cfg.group_count)
        if cfg.group_select_mode == 0:
            group_scores = grouped.max(dim=-1).values
        else:
            group_scores = grouped.topk(2, dim=-1).values.sum(dim=-1)
        group_idx = group_scores.topk(cfg.k_group, dim=-1, sorted=False).indices
        group_mask = torch.zeros_like(group_scores).scatter_(1, group_idx, 1.0)
        score_mask = group_mask.unsqueeze(-1).expand(T, cfg.group_count, E // cfg.group_count).reshape(T, E)
        choice = choice.masked_fill(~score_mask.bool(), float("-inf"))
    idx = choice.topk(cfg.top_k, dim=-1, sorted=True).indices
    w = scores.gather(1, idx)
    if cfg.norm_type != 0 or cfg.renorm:  # norm_topk_prob (always on for sigmoid routers)
        w = w / (w.sum(dim=-1, keepdim=True) + 1e-20)
    return w * cfg.routed_scaling_factor, idx


class DeepseekMoE(RoutedMoE):
    """DeepSeek-V2/V3-style routed MoE block (also Kimi-K2 and GLM-4.5)."""

    def _scores(self, logits: torch.Tensor) -> torch.Tensor:
        logits = logits.float()
        return logits.softmax(dim=-1) if self.cfg.norm_type == 0 else logits.sigmoid()

    def route_native(self, logits, inputs):
        """Reference routing: scores, bias, group limit, top-k, renormalise, scale."""
        bias = getattr(self.gate, "e_score_correction_bias", None)
        return grouped_topk_reference(self._scores(logits), bias, self.cfg)

    def selection_scores(self, inputs):
        """Biased scores ``s + e_score_correction_bias`` (float32)."""
        s = self._scores(self.router_logits(inputs["hidden_states"]))
        bias = getattr(self.gate, "e_score_correction_bias", None)
        return s if bias is None else s + bias.float()


# Tiny presets keep each model's routing structure with small sizes; full presets use the
# published sizes (intermediate: see presets.FULL_NOTE).
PRESETS = {
    "deepseek-v3": dict(
        cls=DeepseekMoE,
        doc="DeepSeek-V3 / R1: sigmoid + bias, 8 groups keep 4 (top-2 sum), rsf 2.5, 1 shared expert",
        tiny=MoEConfig(hidden=64, experts=32, top_k=4, intermediate=32, shared=1, norm_type=1, bias=True,
                       group_count=8, k_group=4, group_select_mode=1, routed_scaling_factor=2.5),
        full=MoEConfig(hidden=7168, experts=256, top_k=8, intermediate=2048, shared=1, norm_type=1,
                       bias=True, group_count=8, k_group=4, group_select_mode=1,
                       routed_scaling_factor=2.5),
    ),
    "deepseek-v2": dict(
        cls=DeepseekMoE,
        doc="DeepSeek-V2: softmax, 8 groups keep 3 (group max), no renormalisation, rsf 16, 2 shared",
        tiny=MoEConfig(hidden=64, experts=32, top_k=3, intermediate=32, shared=2, norm_type=0,
                       group_count=8, k_group=3, group_select_mode=0, routed_scaling_factor=16.0),
        full=MoEConfig(hidden=5120, experts=160, top_k=6, intermediate=1536, shared=2, norm_type=0,
                       group_count=8, k_group=3, group_select_mode=0, routed_scaling_factor=16.0),
    ),
    "kimi-k2": dict(
        cls=DeepseekMoE,
        doc="Kimi-K2: 384 experts, sigmoid + bias, no groups, rsf 2.827, 1 shared expert",
        tiny=MoEConfig(hidden=64, experts=48, top_k=8, intermediate=16, shared=1, norm_type=1, bias=True,
                       routed_scaling_factor=2.827),
        full=MoEConfig(hidden=7168, experts=384, top_k=8, intermediate=2048, shared=1, norm_type=1,
                       bias=True, routed_scaling_factor=2.827),
    ),
    "glm-4.5": dict(
        cls=DeepseekMoE,
        doc="GLM-4.5: 160 experts, sigmoid + bias, no groups, rsf 2.5, 1 shared expert",
        tiny=MoEConfig(hidden=48, experts=20, top_k=8, intermediate=16, shared=1, norm_type=1, bias=True,
                       routed_scaling_factor=2.5),
        full=MoEConfig(hidden=5120, experts=160, top_k=8, intermediate=1536, shared=1, norm_type=1,
                       bias=True, routed_scaling_factor=2.5),
    ),
}
