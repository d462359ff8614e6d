"""Checkpoint layouts (per-expert keys, fused gate_up_proj/down_proj, sharded with an index) and the
routing the preset blocks derive from an HF config.json, against HF's own blocks."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.models.weights import INDEX_FILE, WeightsError
from tests.checkpoints import assert_same_outputs, fused_state_dict


def test_fused_layout_and_sharded_index(tmp_path):
    src = presets.build("deepseek-v3", seed=5)
    sd = fused_state_dict(src, "model.layers.1.mlp.")
    names = sorted(sd)
    shards = {"model-00001-of-00002.safetensors": names[: len(names) // 2],
              "model-00002-of-00002.safetensors": names[len(names) // 2:]}
    for file, keys in shards.items():
        save_file({k: sd[k] for k in keys}, tmp_path / file)
    (tmp_path / INDEX_FILE).write_text(json.dumps({"weight_map": {k: f for f, ks in shards.items() for k in ks}}))
    (tmp_path / "stray.safetensors").write_bytes(b"not read: the index names the shards")
    assert_same_outputs(src, presets.build("deepseek-v3", weights=tmp_path), tokens=17)

    (tmp_path / "model-00002-of-00002.safetensors").unlink()
    with pytest.raises(WeightsError, match="names shard.*model-00002-of-00002"):
        presets.build("deepseek-v3", weights=tmp_path)


def test_fused_layout_errors(tmp_path):
    src = presets.build("qwen3-moe", seed=1)
    sd = fused_state_dict(src, "")
    sd["experts.down_proj"] = sd["experts.down_proj"][:, :, :-1].contiguous()
    save_file(sd, tmp_path / "a.safetensors")
    with pytest.raises(WeightsError, match="'experts.down_proj' has shape"):
        presets.build("qwen3-moe", weights=tmp_path / "a.safetensors")
    sd = fused_state_dict(src, "")
    sd["experts.gate_up_bias"] = torch.zeros(1)
    save_file(sd, tmp_path / "b.safetensors")
    with pytest.raises(WeightsError, match="unknown expert tensor experts.gate_up_bias"):
        presets.build("qwen3-moe", weights=tmp_path / "b.safetensors")


def _layer_checkpoint(tmp_path, src, config: dict):
    save_file(fused_state_dict(src, "model.layers.1.mlp."), tmp_path / "w.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(config))
    return tmp_path


def test_config_json_routing_follows_hf(tmp_path):
    src = presets.build("kimi-k2", seed=2)  # 48 experts
    # Kimi-K2 / GLM-4.5 with groups: ranked by the top-2 sum, as DeepSeek-V3.
    block = presets.build("kimi-k2", weights=_layer_checkpoint(tmp_path, src, {
        "model_type": "kimi_k2", "n_group": 8, "topk_group": 4, "num_experts_per_tok": 8}))
    assert (block.cfg.group_count, block.cfg.k_group, block.cfg.group_select_mode) == (8, 4, 1)
    # Sigmoid router without renormalisation: the preset block cannot, so it is refused.
    with pytest.raises(WeightsError, match="norm_topk_prob=False"):
        presets.build("kimi-k2", weights=_layer_checkpoint(tmp_path, src, {"norm_topk_prob": False}))
    # DeepSeek-V2 ignores norm_topk_prob.
    v2 = presets.build("deepseek-v2", seed=3)
    block = presets.build("deepseek-v2", weights=_layer_checkpoint(tmp_path, v2, {
        "model_type": "deepseek_v2", "norm_topk_prob": True, "topk_method": "group_limited_greedy"}))
    assert block.cfg.renorm == 0
    with pytest.raises(WeightsError, match="model_type 'qwen3_moe' is not the preset's"):
        presets.build("deepseek-v2", weights=_layer_checkpoint(tmp_path, v2, {"model_type": "qwen3_moe"}))
    v4 = presets.build("deepseek-v4", seed=4)
    with pytest.raises(WeightsError, match="norm_type 1 .* the preset uses 2"):
        presets.build("deepseek-v4", weights=_layer_checkpoint(tmp_path, v4, {"scoring_func": "sigmoid"}))
    with pytest.raises(WeightsError, match="topk_method='noaux_tc'"):
        presets.build("deepseek-v2", weights=_layer_checkpoint(tmp_path, v2, {"topk_method": "noaux_tc"}))


# ---- save_pretrained checkpoints of tiny HF models --------------------------------------------------

# case -> preset whose block runs layer 1
SAVED = {"qwen3_moe": "qwen3-moe", "qwen3_moe-no-renorm": "qwen3-moe", "mixtral": "mixtral",
         "deepseek_v3": "deepseek-v3", "kimi_k2-groups": "kimi-k2", "deepseek_v2-greedy-norm": "deepseek-v2",
         "glm4_moe": "glm-4.5"}


@pytest.mark.parametrize("original_format", [True, False], ids=["per-expert", "fused"])
@pytest.mark.parametrize("case", list(SAVED))
def test_saved_hf_checkpoint_layer_matches_the_hf_block(tmp_path, case, original_format):
    from tests import hf_cases

    model = hf_cases.model(case)
    model.save_pretrained(tmp_path, max_shard_size="40KB", save_original_format=original_format)
    assert (tmp_path / INDEX_FILE).is_file()
    block = presets.build(SAVED[case], weights=tmp_path, layer=1)
    hf_block = model.model.layers[1].mlp
    x = torch.randn(40, model.config.hidden_size, generator=torch.Generator().manual_seed(6))
    with torch.no_grad():
        ref = hf_block(x[None])[0]
        out, _ = block(x)
    err = float((out - ref).abs().max() / ref.abs().max())
    assert err <= verify.TOLERANCES["float32"], f"{case}: {err:.3g}"
    np.testing.assert_array_equal(block.gate.weight.numpy(), hf_block.gate.weight.numpy())
