"""Routing attributes from Hugging Face configs: values, refusals, and equality with HF's routers."""

from __future__ import annotations

import pytest
import torch

from ascend_moe_onnx.models import hf_routing as R
from ascend_moe_onnx.models.hf_routing import HFConfigError, routing

# ---- config.json dicts (no transformers needed) ---------------------------------------------------

DEEPSEEK_V3 = dict(model_type="deepseek_v3", n_routed_experts=256, num_experts_per_tok=8, n_group=8,
                   topk_group=4, norm_topk_prob=True, routed_scaling_factor=2.5, hidden_act="silu")
KIMI_K2 = dict(model_type="kimi_k2", n_routed_experts=384, num_experts_per_tok=8, n_group=1, topk_group=1,
               norm_topk_prob=True, routed_scaling_factor=2.827)
DEEPSEEK_V2 = dict(model_type="deepseek_v2", n_routed_experts=160, num_experts_per_tok=6, n_group=8,
                   topk_group=3, topk_method="group_limited_greedy", routed_scaling_factor=16.0)
QWEN3 = dict(model_type="qwen3_moe", num_experts=128, num_experts_per_tok=8, norm_topk_prob=True)
V4 = dict(model_type="deepseek_v4", n_routed_experts=256, num_experts_per_tok=6, routed_scaling_factor=1.5,
          scoring_func="sqrtsoftplus", swiglu_limit=10.0, mlp_layer_types=["hash_moe"] * 3 + ["moe"] * 40)


def test_published_configs_give_the_reference_attributes():
    v3 = routing(DEEPSEEK_V3)
    assert (v3.norm_type, v3.bias, v3.group_count, v3.k_group, v3.group_select_mode, v3.renorm,
            v3.routed_scaling_factor, v3.weights_from_scores) == (1, True, 8, 4, 1, 0, 2.5, False)
    kimi = routing(KIMI_K2)
    assert kimi.model_type == "deepseek_v3" and kimi.experts == 384 and kimi.group_count == 1
    v2 = routing(DEEPSEEK_V2)
    assert (v2.norm_type, v2.bias, v2.group_count, v2.k_group, v2.group_select_mode, v2.renorm) == (0, False, 8, 3, 0, 0)
    q = routing(QWEN3)
    assert (q.norm_type, q.renorm, q.logits_fp32, q.weights_fp32) == (0, 1, False, False)
    mix = routing(dict(model_type="mixtral", num_local_experts=8, num_experts_per_tok=2))
    assert (mix.renorm, mix.logits_fp32, mix.weights_fp32) == (1, False, True)
    v4 = routing(V4)
    assert (v4.norm_type, v4.bias, v4.hash_layers, v4.swiglu_limit) == (2, True, (0, 1, 2), 10.0)
    gated = routing(dict(model_type="qwen2_moe", num_experts=60, num_experts_per_tok=4))
    assert gated.shared == "gated" and gated.renorm == 0


def test_silently_wrong_configs_now_follow_hf():
    # Sigmoid router without norm_topk_prob: HF does not renormalise -> weights from the scores.
    assert routing({**DEEPSEEK_V3, "norm_topk_prob": False}).weights_from_scores
    assert routing({**KIMI_K2, "norm_topk_prob": False, "model_type": "glm4_moe"}).weights_from_scores
    # Kimi-K2 / GLM-4.5 with groups: ranked by the top-2 sum like DeepSeek-V3, never by the max.
    for model_type in ("kimi_k2", "glm4_moe"):
        r = routing({**KIMI_K2, "model_type": model_type, "n_group": 8, "topk_group": 4})
        assert (r.group_count, r.k_group, r.group_select_mode) == (8, 4, 1)
    # DeepSeek-V2 ignores norm_topk_prob.
    assert routing({**DEEPSEEK_V2, "norm_topk_prob": True}).renorm == 0


def test_multimodal_text_config_is_read():
    r = routing({"model_type": "kimi_k25", "text_config": KIMI_K2})
    assert r.experts == 384


REFUSED = [
    ({**DEEPSEEK_V2, "topk_method": "noaux_tc"}, "topk_method='noaux_tc'"),
    ({**DEEPSEEK_V3, "n_group": 7}, "n_group=7"),
    ({**DEEPSEEK_V3, "topk_group": 9}, "topk_group=9"),
    ({**DEEPSEEK_V3, "n_group": 256, "topk_group": 8}, "n_group=256"),  # groups of one expert
    ({**DEEPSEEK_V3, "topk_group": 1, "num_experts_per_tok": 40}, "num_experts_per_tok=40"),
    ({**DEEPSEEK_V3, "num_experts_per_tok": 65, "n_group": 1, "topk_group": 1}, "num_experts_per_tok=65"),
    ({**QWEN3, "num_experts": 4096}, "num_experts=4096"),
    ({**QWEN3, "hidden_act": "gelu"}, "hidden_act='gelu'"),
    ({**DEEPSEEK_V3, "routed_scaling_factor": float("inf")}, "routed_scaling_factor=inf"),
    ({**V4, "scoring_func": "softplus"}, "scoring_func='softplus'"),
    ({**V4, "swiglu_limit": 0.0}, "swiglu_limit=0.0"),
    ({**V4, "mlp_layer_types": ["dense", "moe"]}, "mlp_layer_types=['dense']"),
    ({"model_type": "gpt_oss", "num_local_experts": 32}, "model_type='gpt_oss'"),
]


@pytest.mark.parametrize("cfg,field", REFUSED, ids=[f for _, f in REFUSED])
def test_unsupported_config_fields_are_refused_by_name(cfg, field):
    with pytest.raises(HFConfigError) as e:
        routing(cfg)
    assert field in str(e.value)


# ---- against transformers ---------------------------------------------------------------------------


def test_defaults_match_the_transformers_config_classes():
    transformers = pytest.importorskip("transformers", reason="transformers not installed")
    for model_type, defaults in R.DEFAULTS.items():
        cfg = transformers.AutoConfig.for_model(model_type)
        for name, value in defaults.items():
            assert getattr(cfg, name) == value, f"{model_type}.{name}"
    v4 = transformers.AutoConfig.for_model("deepseek_v4", num_hidden_layers=5)
    assert v4.mlp_layer_types == ["hash_moe"] * R.DEFAULT_HASH_LAYERS + ["moe"] * 2
    assert routing(v4) == routing({"model_type": "deepseek_v4", "num_hidden_layers": 5})


def test_dict_and_config_object_agree():
    from tests import hf_cases

    for case in hf_cases.CASES:
        cfg = hf_cases.config(case)
        assert routing(cfg) == routing(cfg.to_dict()), case


def _sorted_routing(w, idx):
    order = idx.long().argsort(dim=-1)
    return w.float().gather(1, order), idx.long().gather(1, order)


def _router_case_ids():
    from tests import hf_cases

    return list(hf_cases.CASES)


@pytest.mark.parametrize("case", _router_case_ids())
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
def test_router_matches_the_hf_router_module(case, dtype):
    from ascend_moe_onnx.hf.patching import route, router_logits
    from tests import hf_cases

    block = hf_cases.block(case, layer=1, dtype=dtype)
    gate = block.gate
    r = routing(block.config)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(64, block.config.hidden_size, generator=g).to(dtype)
    ids = torch.randint(0, block.config.vocab_size, (64,), generator=g)
    with torch.no_grad():
        hashed = hasattr(gate, "tid2eid")
        _, ref_w, ref_idx = gate(x, ids) if hashed else gate(x)
        w, idx = route(gate, router_logits(gate, x, r), r, ids if hashed else None)
    assert w.dtype == ref_w.dtype, (w.dtype, ref_w.dtype)
    w, idx = _sorted_routing(w, idx)
    ref_w, ref_idx = _sorted_routing(ref_w, ref_idx)
    same = (idx == ref_idx).all(dim=-1)
    if dtype == torch.float32:
        assert same.all(), f"{(~same).sum()} rows choose other experts"
        torch.testing.assert_close(w, ref_w, rtol=2e-6, atol=1e-7)
    else:
        # bfloat16 (DeepSeek-V4 computes its scores in bfloat16, the op in float32): near-ties may flip.
        assert same.float().mean() >= 0.9
        torch.testing.assert_close(w[same], ref_w[same], rtol=2e-2, atol=1e-2)
