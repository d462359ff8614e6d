"""The project's expert formulation on a Hugging Face experts module's own weights.

``routed_experts`` is the one place the patched HF blocks call the project's expert formulations
(``models.experts``: routed rows only, ``ort`` / ``onnx``; ``padded`` through
``models.layers.GroupedExperts`` for comparison), so the HF path exports exactly what the project's
blocks export. The HF fused ``gate_up_proj`` [E, 2I, H] is read as two
views (gate rows first, as HF's ``chunk(2)``; interleaved rows where the module says
``is_concatenated`` False, as gpt-oss), never copied. Modules with their own gate and biases run
where ``KNOWN_GATES`` names their activation (gpt-oss).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace
from typing import cast

import torch

from ascend_moe_onnx.models import experts as formulations
from ascend_moe_onnx.models import layers


def expert_weights(experts: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(gate [E, I, H], up [E, I, H], down [E, H, I]) views of an HF experts module's parameters."""
    stacked = getattr(experts, "ascend_weights", None)
    if stacked is not None:  # a module of another layout says where its gate / up / down are
        return stacked()
    gate_up, down = cast(torch.Tensor, experts.gate_up_proj), cast(torch.Tensor, experts.down_proj)
    if getattr(experts, "is_transposed", False):  # [E, H, 2I] / [E, I, H]: the same, as views
        gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
    if not getattr(experts, "is_concatenated", True):  # rows gate 0, up 0, gate 1, ... (gpt-oss)
        return gate_up[:, 0::2], gate_up[:, 1::2], down
    inter = gate_up.shape[1] // 2
    return gate_up[:, :inter], gate_up[:, inter:], down


@dataclass(frozen=True)
class ExpertGlu:
    """An experts module's activation beyond SiLU: clamp ``limit``, g sigmoid(``alpha`` g) (u + ``beta``),
    with biases (MoeRoutedExperts' swiglu_limit, activation_alpha, activation_beta, gate_up_bias, down_bias)."""

    limit: float
    alpha: float
    beta: float


# Experts classes whose own gate (``_apply_gate``) the routed-rows formulation computes, with their
# biases: class name -> its activation's constants read from the module.
KNOWN_GATES: dict[str, Callable[[torch.nn.Module], ExpertGlu]] = {
    # gate.clamp(max=limit), up.clamp(-limit, limit), (up + 1) * gate * sigmoid(gate * alpha)
    "GptOssExperts": lambda m: ExpertGlu(float(cast(float, m.limit)), float(cast(float, m.alpha)), 1.0),
}


def known_gate(experts: torch.nn.Module) -> ExpertGlu | None:
    """The activation of an experts module whose own gate the formulation computes, else None."""
    read = KNOWN_GATES.get(type(experts).__name__) or KNOWN_GATES.get(
        getattr(type(experts), "_ascend_original", type(experts)).__name__)
    return None if read is None else read(experts)


def expert_biases(experts: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """(gate [E, I], up [E, I], down [E, H]) views of the biases of a module with a known gate, or None."""
    gate_up, down = getattr(experts, "gate_up_proj_bias", None), getattr(experts, "down_proj_bias", None)
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return None
    if not getattr(experts, "is_concatenated", True):
        return gate_up[:, 0::2], gate_up[:, 1::2], down
    inter = gate_up.shape[1] // 2
    return gate_up[:, :inter], gate_up[:, inter:], down


def fused_layout_ok(experts: torch.nn.Module) -> str:
    """'' when ``experts`` holds HF's concatenated, non-transposed SwiGLU weights, else why not."""
    gate_up, down = getattr(experts, "gate_up_proj", None), getattr(experts, "down_proj", None)
    if not isinstance(gate_up, torch.Tensor) or not isinstance(down, torch.Tensor):
        return "no gate_up_proj / down_proj expert tensors"
    has_bias = any(getattr(experts, n, None) is not None for n in ("gate_up_proj_bias", "down_proj_bias"))
    if has_bias and known_gate(experts) is None:
        return "expert biases"
    if getattr(experts, "is_transposed", False) and gate_up.dim() == 3 and down.dim() == 3:
        gate_up, down = gate_up.transpose(1, 2), down.transpose(1, 2)
    if gate_up.dim() != 3 or down.dim() != 3 or gate_up.shape[1] % 2:
        return f"expert tensors of shapes {tuple(gate_up.shape)} / {tuple(down.shape)}"
    E, two_i, H = gate_up.shape
    if tuple(down.shape) != (E, H, two_i // 2):
        return f"down_proj {tuple(down.shape)} does not match gate_up_proj {tuple(gate_up.shape)}"
    return ""


def _foreign_trace() -> bool:
    """A foreign tracer (transformers' own ONNX exporter: torch.export outside torch.onnx.export)
    cannot take the placeholder nodes that exporters.export expands, so it gets ``padded``."""
    return torch.compiler.is_exporting() and not torch.onnx.is_in_onnx_export()


def folds_shared(formulation: str, mlp: torch.nn.Module | None) -> bool:
    """Whether ``routed_experts`` runs the shared expert ``mlp`` inside the experts' call
    (models.experts.folds_shared; a plain SwiGLU MLP only)."""
    return (mlp is not None and plain_mlp(mlp) and formulations.folds_shared(formulation)
            and not _foreign_trace())


def routed_experts(x: torch.Tensor, weights: torch.Tensor, expert_idx: torch.Tensor,
                   experts: torch.nn.Module, limit: float = 0.0,
                   formulation: str = formulations.DEFAULT, shared: torch.nn.Module | None = None) -> torch.Tensor:
    """Sum over the k slots of ``weights * expert(x)`` for rows ``x`` [T, H] and ``expert_idx``
    [T, k] with the given formulation (models.experts), rounded as the project's blocks do, plus
    the shared expert ``shared`` (an HF MLP; only where ``folds_shared``). Returns [T, H] in x's dtype."""
    gate, up, down = expert_weights(experts)
    dtype = x.dtype
    compute = layers.compute_dtype(dtype)
    view = SimpleNamespace(num_experts=gate.shape[0], gate_proj=gate, up_proj=up, down_proj=down,
                           dtype=dtype, limit=limit, act_fp32=False)
    glu = known_gate(experts)
    if glu is not None:  # its own activation and biases (gpt-oss), as MoeRoutedExperts computes them
        biases = expert_biases(experts)
        view.limit, view.alpha, view.beta = glu.limit, glu.alpha, glu.beta
        if biases is not None:
            view.gate_bias, view.up_bias, view.down_bias = biases
    shared_weights = None
    if shared is not None:
        if not folds_shared(formulation, shared):
            raise ValueError(f"routed_experts: the '{formulation}' formulation cannot run this shared expert")
        gate_w, up_w, down_w = _mlp_weights(shared)
        shared_weights = SimpleNamespace(gate_proj=gate_w, up_proj=up_w, down_proj=down_w)
    if formulation != "padded" and not _foreign_trace():
        out = formulations.routed(view, x.to(compute), weights, expert_idx, formulation, shared_weights)
        return layers.rounded(out.to(compute), dtype).to(dtype)
    T, k = expert_idx.shape
    flat = expert_idx.reshape(-1).to(torch.int64)
    pos, counts = layers.padded_positions(flat, view.num_experts)
    capacity = counts.max().item()
    torch._check(capacity >= 0)
    rows = x.to(compute)[torch.arange(T * k) // k]  # one row per (token, slot)
    y = layers.GroupedExperts.forward(view, rows, flat, pos, capacity)
    routed = (y.float().reshape(T, k, x.shape[-1]) * weights.float().reshape(T, k, 1)).sum(1)
    return layers.rounded(routed.to(compute), dtype).to(dtype)


def swiglu_mlp(x: torch.Tensor, mlp: torch.nn.Module, limit: float = 0.0) -> torch.Tensor:
    """An HF gate/up/down MLP module (the shared expert) through the project's SwiGLU, x's dtype."""
    dtype = x.dtype
    out = layers.swiglu(x.to(layers.compute_dtype(dtype)), *_mlp_weights(mlp), dtype, limit)
    return out.to(dtype)


def _mlp_weights(mlp: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """The (gate, up, down) Linear weights of an HF MLP (``plain_mlp``)."""
    gate, up, down = (cast(torch.nn.Linear, getattr(mlp, n)) for n in ("gate_proj", "up_proj", "down_proj"))
    return gate.weight, up.weight, down.weight


def plain_mlp(mlp: torch.nn.Module) -> bool:
    """Whether ``mlp`` is a bias-free gate/up/down Linear SwiGLU that ``swiglu_mlp`` can run."""
    names = ("gate_proj", "up_proj", "down_proj")
    return all(isinstance(getattr(mlp, n, None), torch.nn.Linear) and getattr(mlp, n).bias is None
               for n in names)
