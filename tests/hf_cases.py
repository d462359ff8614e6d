"""Tiny random Hugging Face MoE models of every supported architecture (no downloads).

``config(case)`` builds a transformers config (2 layers, hidden 32); ``block(case)`` one MoE
block with seeded random weights; ``model(case)`` the causal LM. ``CASES`` also holds the configs
that used to give silently wrong results.
"""

from __future__ import annotations

import importlib

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install '.[hf]')")

from ascend_moe_onnx.hf.patching import BLOCK_CLASSES  # noqa: E402
from ascend_moe_onnx.models.layers import init_random  # noqa: E402

_COMMON = dict(vocab_size=96, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
               num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
_MLA = dict(num_key_value_heads=4, q_lora_rank=16, kv_lora_rank=16, qk_rope_head_dim=8, qk_nope_head_dim=8,
            v_head_dim=8, head_dim=8, first_k_dense_replace=1, moe_intermediate_size=16,
            n_routed_experts=16, num_experts_per_tok=4)

# case -> (model_type, config fields)
CASES = {
    "deepseek_v3": ("deepseek_v3", dict(_MLA, n_group=4, topk_group=2, routed_scaling_factor=2.5)),
    "deepseek_v3-no-renorm": ("deepseek_v3", dict(_MLA, n_group=4, topk_group=2, norm_topk_prob=False,
                                                  routed_scaling_factor=2.5)),
    "kimi_k2-groups": ("deepseek_v3", dict(_MLA, n_group=8, topk_group=3, routed_scaling_factor=2.827)),
    "deepseek_v2": ("deepseek_v2", dict(_MLA, n_group=4, topk_group=2, topk_method="group_limited_greedy",
                                        routed_scaling_factor=16.0)),
    "deepseek_v2-greedy-norm": ("deepseek_v2", dict(_MLA, topk_method="greedy", norm_topk_prob=True,
                                                    routed_scaling_factor=16.0)),
    "glm4_moe": ("glm4_moe", dict(moe_intermediate_size=16, n_routed_experts=16, num_experts_per_tok=4,
                                  first_k_dense_replace=1, head_dim=8, routed_scaling_factor=2.5)),
    "glm4_moe-groups-no-renorm": ("glm4_moe", dict(moe_intermediate_size=16, n_routed_experts=16,
                                                   num_experts_per_tok=4, n_group=4, topk_group=2,
                                                   norm_topk_prob=False, first_k_dense_replace=1, head_dim=8)),
    "qwen3_moe": ("qwen3_moe", dict(moe_intermediate_size=16, num_experts=16, num_experts_per_tok=4,
                                    norm_topk_prob=True, head_dim=8)),
    "qwen3_moe-no-renorm": ("qwen3_moe", dict(moe_intermediate_size=16, num_experts=16, num_experts_per_tok=4,
                                              norm_topk_prob=False, head_dim=8)),
    "qwen2_moe": ("qwen2_moe", dict(moe_intermediate_size=16, num_experts=16, num_experts_per_tok=4,
                                    shared_expert_intermediate_size=24)),
    "mixtral": ("mixtral", dict(num_local_experts=8, num_experts_per_tok=2)),
    "deepseek_v4": ("deepseek_v4", dict(moe_intermediate_size=16, num_key_value_heads=1, head_dim=16,
                                        q_lora_rank=16, num_experts_per_tok=3, n_routed_experts=8, o_groups=2,
                                        o_lora_rank=16, index_n_heads=2, index_head_dim=8, index_topk=4,
                                        qk_rope_head_dim=8, sliding_window=8, hc_mult=2,
                                        mlp_layer_types=["hash_moe", "moe"], swiglu_limit=0.5)),
}
ARCHITECTURES = ("deepseek_v3", "deepseek_v2", "glm4_moe", "qwen3_moe", "qwen2_moe", "mixtral", "deepseek_v4")


def config(case: str, **changes):
    """The transformers config of a case."""
    model_type, fields = CASES[case]
    return transformers.AutoConfig.for_model(model_type, **{**_COMMON, **fields, **changes})


def _randomise(module: torch.nn.Module, seed: int, experts: int) -> None:
    init_random(module, seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, b in module.named_buffers():
            if name.endswith("tid2eid"):
                b.copy_(torch.randint(0, experts, b.shape, generator=g))


def block(case: str, layer: int = 1, seed: int = 0, dtype=torch.float32, **changes):
    """One HF MoE block of the case (layer ``layer``) with seeded random weights."""
    cfg = config(case, **changes)
    model_type = CASES[case][0]
    module = importlib.import_module(f"transformers.models.{model_type}.modeling_{model_type}")
    cls = getattr(module, BLOCK_CLASSES[model_type][0])
    b = cls(cfg, layer) if model_type == "deepseek_v4" else cls(cfg)
    b.config = cfg
    _randomise(b, seed, b.experts.num_experts)
    b = b.to(dtype).eval().requires_grad_(False)
    # As from_pretrained does: the modelling's _keep_in_fp32_modules_strict tensors stay float32.
    keep = next((c._keep_in_fp32_modules_strict for c in vars(module).values()
                 if getattr(c, "_keep_in_fp32_modules_strict", None)), [])
    with torch.no_grad():
        for sub_name, sub in b.named_modules():
            for name, t in list(sub.named_parameters(recurse=False)) + list(sub.named_buffers(recurse=False)):
                full = f"{sub_name}.{name}" if sub_name else name
                if any(k in full.split(".") or full.endswith(k) for k in keep):
                    t.data = t.data.float()
    return b


def model(case: str, seed: int = 0, **changes):
    """The tiny causal LM of the case with seeded random weights (router biases non-zero)."""
    cfg = config(case, **changes)
    torch.manual_seed(seed)
    m = transformers.AutoModelForCausalLM.from_config(cfg).eval().requires_grad_(False)
    experts = next(getattr(cfg, n) for n in ("num_local_experts", "num_experts", "n_routed_experts")
                   if getattr(cfg, n, None) is not None)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, b in m.named_buffers():
            if name.endswith("e_score_correction_bias"):
                b.copy_(torch.randn(b.shape, generator=g) * 0.1)
            if name.endswith("tid2eid"):
                b.copy_(torch.randint(0, experts, b.shape, generator=g))
    return m
