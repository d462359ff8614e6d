"""MoE blocks whose router or experts do not follow transformers 5's common interface, patched at
block level: Llama 4 (router weights scale the experts' *inputs*; the block returns the router
logits too) and DBRX (the block ranks the router's logits; experts as three flat matrices).

Each entry of ``BLOCKS`` maps a block class name to a function that checks the block and returns
(Routing, forward) or raises HFConfigError naming the field it cannot reproduce.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import cast

import torch
import torch.nn.functional as F

from ascend_moe_onnx.models import experts as formulations
from ascend_moe_onnx.models.hf_routing import HFConfigError, Routing
from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from . import experts as ex


def _op(logits: torch.Tensor, r: Routing):
    y, idx, scores = torch.ops.custom.npu_moe_gating_top_k(logits, r.top_k, **r.op_attributes())
    if r.weights_from_scores:
        y = scores.gather(1, idx.long()) * r.routed_scaling_factor
    return y.to(logits.dtype), idx


def _silu(act, where: str) -> None:
    if not isinstance(act, torch.nn.SiLU) and type(act).__name__ not in ("SiLUActivation", "SiLU"):
        raise HFConfigError(f"{where}: activation {type(act).__name__} (the formulation is SwiGLU with SiLU)")


def llama4_forward(self, hidden_states: torch.Tensor):
    """Llama 4: sigmoid of the top-k logits (not renormalised) scales each chosen expert's input."""
    r: Routing = self._ascend_routing
    x = hidden_states.reshape(-1, self.hidden_dim)
    logits = F.linear(x, self.router.weight)
    w, idx = _op(logits, r)
    T, k = idx.shape
    rows = x.repeat_interleave(k, 0) * w.reshape(-1, 1)  # one row per (token, slot), input-scaled
    ones = torch.ones(T * k, 1, dtype=x.dtype)
    routed = ex.routed_experts(rows, ones, idx.reshape(-1, 1), self.experts, 0.0, self.experts_formulation)
    out = self.shared_expert(x) + routed.reshape(T, k, -1).sum(1)
    return out, logits


def _llama4(block) -> tuple[Routing, object]:
    experts = block.experts
    E, H, two_i = experts.gate_up_proj.shape
    _silu(experts.act_fn, "Llama4TextExperts")
    inter = two_i // 2
    experts.ascend_weights = lambda: (experts.gate_up_proj[..., :inter].transpose(1, 2),
                                      experts.gate_up_proj[..., inter:].transpose(1, 2),
                                      experts.down_proj.transpose(1, 2))
    k = block.router.top_k
    return Routing("Llama4Router", E, k, norm_type=spec.NORM_SIGMOID, renorm=0, weights_from_scores=True,
                   logits_fp32=False, weights_fp32=False), llama4_forward


def dbrx_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    """DBRX: softmax of the router logits, top-k, optionally renormalised (p = 1)."""
    r: Routing = self._ascend_routing
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    logits = self.router(x)
    w, idx = _op(logits, r)
    out = ex.routed_experts(x, w, idx, self.experts, 0.0, self.experts_formulation)
    return out.view(shape[0], -1, shape[-1])


def _dbrx(block) -> tuple[Routing, object]:
    mlp = block.experts.mlp
    _silu(mlp.activation_fn, "DbrxExpertGLU (ffn_config.ffn_act_fn)")
    p = block.moe_normalize_expert_weights
    if p not in (None, 1, 1.0):
        raise HFConfigError(f"DbrxFFN: moe_normalize_expert_weights={p!r}: the op renormalises by the sum "
                            "(p = 1) or not at all (None)")
    E, I, H = mlp.moe_num_experts, mlp.ffn_hidden_size, mlp.hidden_size
    block.experts.ascend_weights = lambda: (mlp.w1.view(E, I, H), mlp.v1.view(E, I, H),
                                            mlp.w2.view(E, I, H).transpose(1, 2))
    return Routing("DbrxRouter", E, block.top_k, norm_type=spec.NORM_SOFTMAX, renorm=int(p is not None),
                   logits_fp32=False, weights_fp32=False), dbrx_forward


BLOCKS = {"Llama4TextMoe": _llama4, "DbrxFFN": _dbrx}
_PATCHED: dict[type, type] = {}


def patch_block(block: torch.nn.Module, class_names: Iterable[str]) -> str | None:
    """Patch a block of ``BLOCKS`` (by class or base name); None when it is not one of them."""
    for name in class_names:
        if name in BLOCKS:
            r, forward = BLOCKS[name](block)
            cls = getattr(type(block), "_ascend_original", type(block))
            if cls not in _PATCHED:
                _PATCHED[cls] = type(f"Ascend{cls.__name__}", (cls,), {"forward": forward, "_ascend_original": cls})
            block._ascend_routing = r
            block.experts_formulation = formulations.DEFAULT
            experts = cast(torch.nn.Module, block.experts)
            experts.experts_formulation = formulations.DEFAULT
            block.__class__ = _PATCHED[cls]
            return ""
    return None
