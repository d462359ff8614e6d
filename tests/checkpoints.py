"""Hugging Face-style checkpoints of the preset blocks, as the tests write them (per-expert keys,
or transformers 5's fused expert tensors), and the check that two blocks compute the same."""

from __future__ import annotations

import torch

PROJ = {"gate_proj": "gate_proj", "up_proj": "up_proj", "down_proj": "down_proj"}
MIXTRAL_PROJ = {"gate_proj": "w1", "up_proj": "w3", "down_proj": "w2"}


def _router_and_shared(block, prefix: str, proj: dict, bias_key: str, shared: str, router_dtype) -> dict:
    sd = {prefix + "gate.weight": block.gate.weight.to(router_dtype or block.dtype).clone()}
    if hasattr(block.gate, "e_score_correction_bias"):
        sd[prefix + bias_key] = block.gate.e_score_correction_bias.clone()
    if hasattr(block.gate, "tid2eid"):
        sd[prefix + "gate.tid2eid"] = block.gate.tid2eid.clone()
    if block.shared_experts is not None:
        for ours, theirs in proj.items():
            sd[f"{prefix}{shared}{theirs}.weight"] = getattr(block.shared_experts, ours).clone()
    return sd


def state_dict(block, prefix: str, proj=PROJ, bias_key="gate.e_score_correction_bias", shared="shared_experts.",
               router_dtype=None) -> dict:
    """The block's weights under Hugging Face key names (per-expert tensors)."""
    sd = _router_and_shared(block, prefix, proj, bias_key, shared, router_dtype)
    for i in range(block.cfg.experts):
        for ours, theirs in proj.items():
            sd[f"{prefix}experts.{i}.{theirs}.weight"] = getattr(block.experts, ours)[i].clone()
    return sd


def fused_state_dict(block, prefix: str) -> dict:
    """The block's weights in transformers 5's fused expert layout (gate_up_proj, down_proj)."""
    sd = _router_and_shared(block, prefix, PROJ, "gate.e_score_correction_bias", "shared_experts.", None)
    sd[prefix + "experts.gate_up_proj"] = torch.cat([block.experts.gate_proj, block.experts.up_proj], dim=1)
    sd[prefix + "experts.down_proj"] = block.experts.down_proj.clone()
    return sd


def assert_same_outputs(a, b, tokens: int = 11) -> None:
    """Blocks ``a`` and ``b`` route and compute bit for bit alike on the same inputs."""
    inputs = a.example_inputs(tokens, seed=4)
    with torch.no_grad():
        (oa, ia), (ob, ib) = a(*inputs), b(*inputs)
    assert torch.equal(ia, ib)
    assert torch.equal(oa, ob)
