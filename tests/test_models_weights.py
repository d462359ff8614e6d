"""Loading one MoE layer from a Hugging Face-style safetensors checkpoint the test writes itself."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from safetensors.torch import save_file

from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.models.weights import WeightsError
from tests.checkpoints import MIXTRAL_PROJ, assert_same_outputs, state_dict


def test_deepseek_v3_layer_with_prefix_and_config(tmp_path):
    src = presets.build("deepseek-v3", dtype="bfloat16", seed=3)
    sd = state_dict(src, "model.layers.3.mlp.")
    sd["model.layers.3.self_attn.q_proj.weight"] = torch.zeros(4, 4)  # other tensors are ignored
    sd["model.layers.2.mlp.gate_proj.weight"] = torch.zeros(4, 4)  # a dense layer is no MoE layer
    save_file(sd, tmp_path / "model-00001-of-00001.safetensors")
    (tmp_path / "config.json").write_text(json.dumps(
        {"num_experts_per_tok": 4, "n_group": 8, "topk_group": 4, "routed_scaling_factor": 2.5,
         "scoring_func": "sigmoid", "norm_topk_prob": True}))
    block = presets.build("deepseek-v3", dtype="bfloat16", weights=tmp_path)
    assert block.cfg == src.cfg
    assert_same_outputs(src, block)


def test_config_json_overrides_routing_and_sizes_come_from_shapes(tmp_path):
    src = presets.build("deepseek-v2", intermediate=8, seed=1)
    save_file(state_dict(src, "model.layers.1.mlp."), tmp_path / "w.safetensors")
    (tmp_path / "config.json").write_text(json.dumps({"num_experts_per_tok": 5, "topk_group": 4,
                                                     "routed_scaling_factor": 2.0}))
    block = presets.build("deepseek-v2", weights=tmp_path / "w.safetensors")
    assert (block.cfg.intermediate, block.cfg.shared, block.cfg.top_k, block.cfg.k_group) == (8, 2, 5, 4)
    assert block.cfg.routed_scaling_factor == 2.0


def test_mixtral_names_and_layer_choice(tmp_path):
    a = presets.build("mixtral", seed=1)
    b = presets.build("mixtral", seed=2)
    sd = {**state_dict(a, "model.layers.0.block_sparse_moe.", MIXTRAL_PROJ),
          **state_dict(b, "model.layers.1.block_sparse_moe.", MIXTRAL_PROJ)}
    save_file(sd, tmp_path / "m.safetensors")
    with pytest.raises(WeightsError, match="2 MoE layers"):
        presets.build("mixtral", weights=tmp_path)
    assert_same_outputs(b, presets.build("mixtral", weights=tmp_path, layer="1"))
    assert_same_outputs(a, presets.build("mixtral", weights=tmp_path, layer="model.layers.0."))


def test_deepseek_v4_hash_layer_original_names(tmp_path):
    src = presets.build("deepseek-v4-hash", seed=7)
    sd = state_dict(src, "layers.0.ffn.", MIXTRAL_PROJ, router_dtype=torch.float32)
    save_file(sd, tmp_path / "v4.safetensors")
    assert_same_outputs(src, presets.build("deepseek-v4-hash", weights=tmp_path))
    with pytest.raises(WeightsError, match="is a hash layer"):
        presets.build("deepseek-v4", weights=tmp_path)


def test_deepseek_v4_bias_named_gate_bias(tmp_path):
    src = presets.build("deepseek-v4", seed=8)
    sd = state_dict(src, "layers.5.ffn.", MIXTRAL_PROJ, bias_key="gate.bias", router_dtype=torch.float32)
    save_file(sd, tmp_path / "v4.safetensors")
    assert_same_outputs(src, presets.build("deepseek-v4", weights=tmp_path))


def test_loaded_layer_exports_and_verifies(tmp_path):
    src = presets.build("qwen3-moe", seed=9)
    save_file(state_dict(src, "model.layers.7.mlp."), tmp_path / "q.safetensors")
    checks = verify.verify_preset("qwen3-moe", weights=tmp_path / "q.safetensors", token_counts=[3, 20])
    assert all(c.passed for c in checks), verify.format_table(checks)


@pytest.mark.parametrize("damage,message", [
    (lambda sd: sd.pop("model.layers.0.mlp.experts.3.up_proj.weight"), "missing 'model.layers.0.mlp.experts.3.up_proj"),
    (lambda sd: sd.pop("model.layers.0.mlp.gate.e_score_correction_bias"), "has no e_score_correction_bias"),
    (lambda sd: sd.update({"model.layers.0.mlp.experts.0.gate_proj.weight_scale_inv": torch.ones(1)}),
     "quantised expert weights"),
    (lambda sd: [sd.pop(k) for k in list(sd) if "gate.weight" in k], "no MoE layer"),
])
def test_bad_checkpoints_are_clear_errors(tmp_path, damage, message):
    sd = state_dict(presets.build("kimi-k2"), "model.layers.0.mlp.")
    damage(sd)
    save_file(sd, tmp_path / "k.safetensors")
    with pytest.raises(WeightsError, match=message):
        presets.build("kimi-k2", weights=tmp_path)


def test_wrong_width_and_missing_path(tmp_path):
    sd = state_dict(presets.build("glm-4.5"), "")
    sd["experts.2.down_proj.weight"] = torch.zeros(5, 5)
    save_file(sd, tmp_path / "g.safetensors")
    with pytest.raises(WeightsError, match="'experts.2.down_proj.weight' has shape"):
        presets.build("glm-4.5", weights=tmp_path)
    with pytest.raises(FileNotFoundError, match="no such file"):
        presets.build("glm-4.5", weights=tmp_path / "missing.safetensors")
    (tmp_path / "junk").mkdir()
    (tmp_path / "junk" / "x.safetensors").write_bytes(b"not safetensors")
    with pytest.raises(WeightsError, match="not a readable safetensors"):
        presets.build("glm-4.5", weights=tmp_path / "junk")


def test_ep_block_takes_experts_from_a_layer(tmp_path):
    src = presets.build("deepseek-v3", seed=2)
    save_file(state_dict(src, "model.layers.4.mlp."), tmp_path / "w.safetensors")
    block = presets.build("ep-int8", weights=tmp_path)
    assert block.cfg.experts == src.cfg.experts and block.cfg.hidden == src.cfg.hidden
    assert torch.equal(block.experts.down_proj, src.experts.down_proj)
    inputs = block.example_inputs(30, seed=1)
    with torch.no_grad():
        out, _ = block(*inputs)
        ref, _ = block.forward_native(*inputs)
    np.testing.assert_allclose(out.numpy(), ref.numpy(), rtol=0, atol=1e-5 * float(ref.abs().max()))
