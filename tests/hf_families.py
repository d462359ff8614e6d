"""Tiny random models of the transformers MoE families (no downloads), built from each family's
config class with tiny sizes: ``model(model_type)`` is the causal LM (or the text model of a
multimodal family), seeded, with non-zero selection biases.

``FAMILIES`` lists the families and the config fields each needs beyond ``TINY``; ``EXPECTED``
their status after ``hf.patch`` (fused: every MoE layer's router fused; unfused: exported without
the fused router, with the reason printed).
"""

from __future__ import annotations

import importlib

import pytest
import torch

transformers = pytest.importorskip("transformers", reason="transformers not installed (pip install '.[hf]')")

from ascend_moe_onnx.models.layers import init_random  # noqa: E402

TINY = dict(vocab_size=96, hidden_size=32, intermediate_size=48, moe_intermediate_size=16,
            num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
            max_position_embeddings=64, num_local_experts=8, num_experts=8, n_routed_experts=8,
            moe_num_experts=8, num_experts_per_tok=2, moe_topk=2, shared_expert_intermediate_size=16,
            n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=16, kv_lora_rank=16,
            qk_rope_head_dim=8, qk_nope_head_dim=8, v_head_dim=8, pad_token_id=0, bos_token_id=1,
            eos_token_id=2, n_shared_experts=1)
_MLA = dict(num_key_value_heads=4)
# hybrid: a gated DeltaNet (linear-attention) layer, then a full-attention one (the defaults make both
# layers linear); key heads shared by 2 value heads each
_LINEAR = dict(layer_types=["linear_attention", "full_attention"], linear_num_key_heads=2,
               linear_num_value_heads=4, linear_key_head_dim=8, linear_value_head_dim=8)

# model_type -> (expected status, config fields beyond TINY)
FAMILIES = {
    "mixtral": ("fused", {}),
    "minimax": ("fused", {}),
    "qwen2_moe": ("fused", {}),
    "qwen3_moe": ("fused", {"norm_topk_prob": True}),
    "qwen3_next": ("fused", {}),
    "qwen3_5_moe": ("fused", {}),
    "qwen3_next-hybrid": ("fused", _LINEAR),
    "qwen3_5_moe-hybrid": ("fused", _LINEAR),
    "qwen3_vl_moe": ("fused", {}),
    "olmoe": ("fused", {}),
    "flex_olmo": ("fused", {}),
    "mellum": ("fused", {}),
    "hunyuan_v1_moe": ("fused", {}),
    "jamba": ("fused", {"attn_layer_period": 2, "attn_layer_offset": 1, "expert_layer_period": 1,
                        "expert_layer_offset": 0}),
    "gpt_oss": ("fused", {}),
    "granitemoe": ("fused", {}),
    "granitemoeshared": ("fused", {}),
    "granitemoe_swa": ("fused", {}),
    "aria": ("fused", {}),
    "cohere2_moe": ("fused", {}),
    "ernie4_5_moe": ("fused", {"moe_layer_start_index": 1}),
    "minimax_m2": ("fused", {}),
    "hy_v3": ("fused", {}),
    "deepseek_v3": ("fused", _MLA),
    "deepseek_v3-groups": ("fused", dict(_MLA, n_group=4, topk_group=2)),
    "deepseek_v2": ("fused", _MLA),
    "deepseek_v32": ("fused", _MLA),
    "glm4_moe": ("fused", {}),
    "glm4_moe_lite": ("fused", _MLA),
    "glm_moe_dsa": ("fused", _MLA),
    "dots1": ("fused", {}),
    "exaone_moe": ("fused", {}),
    "mimo_v2_flash": ("fused", {}),
    "solar_open": ("fused", {}),
    "mistral_large4": ("fused", _MLA),
    "mistral_large4-groups": ("fused", dict(_MLA, n_group=4, topk_group=2)),
    "laguna": ("fused", {}),
    "lara_mini": ("fused", {}),
    "deepseek_v4": ("fused", {}),
    # every attention kind (sliding window, + CSA with its indexer choosing 4 entries, its 16 heads making tied scores unlikely, + HCA) with
    # windows a 16-token prompt completes, and a hash-routed then two score-routed MoE layers
    "deepseek_v4-kinds": ("fused", {"num_hidden_layers": 3, "layer_types": [
        "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"],
        "mlp_layer_types": ["hash_moe", "moe", "moe"], "sliding_window": 8, "partial_rotary_factor": 0.5,
        "compress_rates": {"compressed_sparse_attention": 4, "heavily_compressed_attention": 8},
        "index_topk": 4, "index_n_heads": 16, "index_head_dim": 16, "o_groups": 2, "o_lora_rank": 8}),
    "sarvam_mla": ("fused", _MLA),
    "sarvam_moe": ("fused", {}),
    "glm4v_moe": ("fused", {"rope_parameters": {"rope_type": "default", "rope_theta": 10000.0,
                                                "mrope_section": [0, 1, 1], "partial_rotary_factor": 0.5}}),
    "nemotron_h": ("fused", {}),
    "muse_spark": ("fused", {}),
    "minimax_m3_vl": ("fused", {}),
    "inkling2": ("fused", {}),
    "afmoe": ("fused", {}),
    "axk1": ("fused", _MLA),
    "axk2": ("fused", _MLA),
    "kimi_linear": ("fused", {}),
    "hy_v4": ("fused", {}),
    "longcat_flash": ("fused", _MLA),
    "granitemoehybrid": ("fused", {"mamba_n_heads": 8, "mamba_d_head": 8}),
    "bailing_hybrid": ("fused", {}),
    "openai_privacy_filter": ("unfused", {}),
    "phimoe": ("unfused", {}),
    "zaya": ("unfused", {"num_experts_per_tok": 1}),
    "doge": ("unfused", {"is_moe": True, "num_experts": 16}),
    "kolibri1": ("unfused", {}),
    # chunks of 8 tokens and a NoPE layer (temperature-tuned queries), so prompts cross chunks
    "llama4": ("fused", {"num_experts_per_tok": 1, "attention_chunk_size": 8, "no_rope_layers": [1, 0]}),
    "llama4-top2": ("fused", {"num_experts_per_tok": 2}),
    "dbrx": ("fused", {"d_model": 32, "n_heads": 4, "n_layers": 2, "max_seq_len": 64,
                       "attn_config": {"kv_n_heads": 2, "rope_theta": 10000.0, "clip_qkv": 8.0},
                       "ffn_config": {"ffn_hidden_size": 16, "moe_num_experts": 8, "moe_top_k": 2}}),
    "jetmoe": ("unfused", {}),
    # multimodal / hybrid families: the text config with its per-layer lists cut to 2 layers
    "hy_v4_vl": ("fused", {"rope_parameters": {"rope_theta": 10000.0, "rope_type": "default",
                                               "mrope_section": [2, 1, 1]}, "num_key_value_heads": 4,
                           "mlp_layer_types": ["dense", "sparse"], "layer_types": ["indexed_attention"] * 2,
                           "index_n_heads": 2, "index_head_dim": 8, "index_topk": 4}),
    "glm5_next": ("fused", {"num_key_value_heads": 4, "mlp_layer_types": ["dense", "sparse"],
                            "layer_types": ["linear_attention", "indexed_attention"], "index_n_heads": 2,
                            "index_head_dim": 8, "index_topk": 16, "index_kpool": 16, "linear_head_dim": 8,
                            "linear_num_heads": 4, "qk_nope_head_dim": 8, "v_head_dim": 8, "qk_rope_head_dim": 0,
                            "head_dim": 0}),
    "flint": ("fused", {"mlp_only_layers": [0], "layer_types": ["full_attention", "sliding_attention"],
                        "sliding_window": 8}),
    "lfm2_moe": ("fused", {"num_dense_layers": 1, "layer_types": ["conv", "full_attention"]}),
    "step3p7": ("fused", {"mlp_layer_types": ["dense", "sparse"], "layer_types": ["full_attention",
                                                                                  "sliding_attention"],
                          "sliding_window": 8, "num_sliding_attention_heads": 4, "share_expert_dim": 16}),
    "unlimited_ocr": ("fused", {}),
    "deepseek_ocr2": ("fused", {"mlp_layer_types": ["dense", "sparse"], "num_key_value_heads": 4}),
    "deepseek_ocr2-groups": ("fused", {"mlp_layer_types": ["dense", "sparse"], "num_key_value_heads": 4,
                                       "topk_method": "group_limited_greedy", "n_group": 4, "topk_group": 2,
                                       "routed_scaling_factor": 2.5}),
    "qwen3_omni_moe": ("fused", {}),
    "ernie4_5_vl_moe": ("fused", {"moe_intermediate_size": [16, 16], "mlp_layer_types": ["dense", "sparse"],
                                  "moe_k": 2, "rope_parameters": {"rope_theta": 500000.0, "rope_type": "default",
                                                                  "mrope_section": [1, 1, 2]}}),
}
# Families whose MoE layers torch.onnx cannot export (HF experts with data-dependent shapes that are
# not the stacked-experts interface): the CLI says so in one line.
NO_EXPORT = {"longcat_flash": "LongcatFlashExperts (zero-computation experts) has data-dependent shapes",
             "openai_privacy_filter": "OpenAIPrivacyFilterExperts has data-dependent shapes"}
# Families whose tiny whole model (prefill LM, or the text model of a multimodal family) exports
# in seconds and matches HF eager in ONNX Runtime (tests/test_hf_families.py); the others are left
# to --layers.
WHOLE_MODEL = ("olmoe", "gpt_oss", "dbrx", "granitemoe", "minimax_m2", "ernie4_5_moe", "hunyuan_v1_moe",
               "dots1", "phimoe", "jetmoe", "mixtral", "qwen2_moe", "qwen3_moe")
# Families whose HF code fixes the sequence length of the traced whole model (refused in one line).
WHOLE_MODEL_FIXED_SEQUENCE = {"jamba": "its Mamba layers' scan loops over the sequence in Python"}
DEFAULT_RUN = ("qwen3_next", "gpt_oss", "olmoe", "minimax_m2", "ernie4_5_moe", "phimoe")


def _fields(c, extra: dict) -> dict:
    return {k: v for k, v in {**TINY, **extra}.items() if hasattr(c, k)}


def config(case: str):
    """A tiny config of a family (the text config of a multimodal one)."""
    model_type = case.split("-")[0]
    extra = FAMILIES[case][1]
    cls = transformers.CONFIG_MAPPING[model_type]
    base = cls()
    sub = base.get_text_config()  # a multimodal model's text config (Qwen3-Omni: the thinker's)
    if sub is not base:
        return type(sub)(**_fields(sub, extra))
    return cls(**_fields(base, extra))


def _model_class(cfg):
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_MAPPING

    for mapping in (MODEL_FOR_CAUSAL_LM_MAPPING, MODEL_MAPPING):
        if type(cfg) in mapping:
            return mapping[type(cfg)]
    module = importlib.import_module(type(cfg).__module__.replace("configuration_", "modeling_"))
    return next(c for c in vars(module).values() if isinstance(c, type) and getattr(c, "config_class", None)
                is type(cfg) and c.__name__.endswith("Model") and "PreTrained" not in c.__name__)


def model(case: str, seed: int = 0):
    """The tiny model of a family with seeded random weights and non-zero selection biases."""
    cfg = config(case)
    torch.manual_seed(seed)
    m = _model_class(cfg)(cfg).eval().requires_grad_(False)
    init_random(m, seed)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        for name, t in list(m.named_buffers()) + list(m.named_parameters()):
            if name.endswith(("e_score_correction_bias", "expert_bias")):
                t.copy_(torch.randn(t.shape, generator=g) * 0.1)
            if name.endswith("tid2eid"):
                t.copy_(torch.randint(0, 8, t.shape, generator=g))
    return m


def logits(m, ids: torch.Tensor) -> torch.Tensor:
    """The model's logits (or last hidden state for a text model without an LM head), no cache."""
    out = m(input_ids=ids, use_cache=False)
    return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state
