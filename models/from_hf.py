"""Block configs from Hugging Face config fields: a preset is "an HF config + sizes".

The routing attributes come from ``ascend_moe_onnx.models.hf_routing`` (the same derivation
``hf.patch`` uses, no transformers needed); the sizes the HF config does not fix for a preset
(hidden size, expert width, shared experts) are given here. A routing the project's blocks cannot
run is a ``ValueError`` naming the config field.
"""

from __future__ import annotations

from typing import Any

from ascend_moe_onnx.models.hf_routing import HFConfigError, Routing, routing

from .layers import MoEConfig

# The config field that holds the routed-expert count, per architecture (HF's own names).
EXPERTS_FIELD = {"deepseek_v2": "n_routed_experts", "deepseek_v3": "n_routed_experts",
                 "glm4_moe": "n_routed_experts", "deepseek_v4": "n_routed_experts",
                 "qwen3_moe": "num_experts", "qwen2_moe": "num_experts", "mixtral": "num_local_experts"}


def routing_fields(r: Routing) -> dict:
    """MoEConfig routing fields of a Routing; refuses what the project's blocks cannot run."""
    if r.weights_from_scores:
        raise HFConfigError(f"{r.model_type} config: norm_topk_prob=False: HF does not renormalise the "
                            "sigmoid weights and the project's blocks always do; use "
                            "ascend_moe_onnx.hf.patch (moe-onnx export --hf), which takes the weights "
                            "from the op's scores")
    if r.shared == "gated":
        raise HFConfigError(f"{r.model_type} config: the gated shared expert (shared_expert_gate) has no "
                            "preset block; use ascend_moe_onnx.hf.patch")
    return dict(experts=r.experts, top_k=r.top_k, norm_type=r.norm_type, bias=r.bias,
                group_count=r.group_count, k_group=r.k_group, group_select_mode=r.group_select_mode,
                renorm=r.renorm, routed_scaling_factor=r.routed_scaling_factor, router_fp32=r.logits_fp32,
                swiglu_limit=r.swiglu_limit)


def moe_config(hf: dict, hidden: int, intermediate: int, shared: int = 0, **extra: Any) -> MoEConfig:
    """A block config: routing from the HF config dict ``hf``, sizes given; ``extra`` overrides
    (e.g. DeepSeek-V4's float32 activation of its reference code)."""
    return MoEConfig(hidden=hidden, intermediate=intermediate, shared=shared,
                     **{**routing_fields(routing(hf)), **extra})
