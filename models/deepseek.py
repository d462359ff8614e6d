"""DeepSeek-V2 / V3 (R1), Kimi-K2 and GLM-4.5 MoE blocks (the ``DeepseekV3MoE`` layout).

Router: float32 logits ``linear(x.float(), gate.weight.float())``; softmax (V2) or sigmoid with an
``e_score_correction_bias`` that steers selection only (V3, Kimi-K2, GLM-4.5); optional
group-limited selection (V2: group max, keep 3 of 8; V3: sum of the group's two best, keep 4 of 8);
weights from the unbiased scores, renormalised for sigmoid, times ``routed_scaling_factor``.
Experts and shared expert(s) are SwiGLU; the shared expert's width is n_shared * moe_intermediate.
"""

from __future__ import annotations

import torch

from .from_hf import moe_config
from .layers import MoEConfig, RoutedMoE


def grouped_topk_reference(scores: torch.Tensor, bias: torch.Tensor | None,
                           cfg: MoEConfig) -> tuple[torch.Tensor, torch.Tensor]:
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

    def route_native(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference routing: scores, bias, group limit, top-k, renormalise, scale."""
        bias = getattr(self.gate, "e_score_correction_bias", None)
        return grouped_topk_reference(self._scores(logits), bias, self.cfg)

    def selection_scores(self, inputs: dict) -> torch.Tensor:
        """Biased scores ``s + e_score_correction_bias`` (float32)."""
        s = self._scores(self.router_logits(inputs["hidden_states"]))
        bias = getattr(self.gate, "e_score_correction_bias", None)
        return s if bias is None else s + bias.float()


# Each preset is its published HF config's routing fields (``HF``) plus sizes; tiny presets keep the
# routing structure with fewer, smaller experts. Full: published sizes (intermediate: see presets).
HF = {
    "deepseek-v3": dict(model_type="deepseek_v3", n_routed_experts=256, num_experts_per_tok=8, n_group=8,
                        topk_group=4, norm_topk_prob=True, routed_scaling_factor=2.5),
    "deepseek-v2": dict(model_type="deepseek_v2", n_routed_experts=160, num_experts_per_tok=6, n_group=8,
                        topk_group=3, topk_method="group_limited_greedy", routed_scaling_factor=16.0),
    "kimi-k2": dict(model_type="kimi_k2", n_routed_experts=384, num_experts_per_tok=8, n_group=1,
                    topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.827),
    "glm-4.5": dict(model_type="glm4_moe", n_routed_experts=160, num_experts_per_tok=8, n_group=1,
                    topk_group=1, norm_topk_prob=True, routed_scaling_factor=2.5),
}


def _entry(name: str, doc: str, tiny: dict, full: dict) -> dict:
    hf = HF[name]
    small = {**hf, "n_routed_experts": tiny.pop("experts"), "num_experts_per_tok": tiny.pop("top_k")}
    return dict(cls=DeepseekMoE, doc=doc, hf=hf, tiny=moe_config(small, **tiny), full=moe_config(hf, **full))


PRESETS = {
    "deepseek-v3": _entry("deepseek-v3", "DeepSeek-V3 / R1: sigmoid + bias, 8 groups keep 4 (top-2 sum), rsf 2.5, "
                          "1 shared expert", dict(hidden=64, experts=32, top_k=4, intermediate=32, shared=1),
                          dict(hidden=7168, intermediate=2048, shared=1)),
    "deepseek-v2": _entry("deepseek-v2", "DeepSeek-V2: softmax, 8 groups keep 3 (group max), no renormalisation, "
                          "rsf 16, 2 shared", dict(hidden=64, experts=32, top_k=3, intermediate=32, shared=2),
                          dict(hidden=5120, intermediate=1536, shared=2)),
    "kimi-k2": _entry("kimi-k2", "Kimi-K2: 384 experts, sigmoid + bias, no groups, rsf 2.827, 1 shared expert",
                      dict(hidden=64, experts=48, top_k=8, intermediate=16, shared=1),
                      dict(hidden=7168, intermediate=2048, shared=1)),
    "glm-4.5": _entry("glm-4.5", "GLM-4.5: 160 experts, sigmoid + bias, no groups, rsf 2.5, 1 shared expert",
                      dict(hidden=48, experts=20, top_k=8, intermediate=16, shared=1),
                      dict(hidden=5120, intermediate=1536, shared=1)),
}
