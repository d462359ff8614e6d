"""Backward of MoeGatingTopKHash (docs/operators.md §1.5): the gradient of ``y`` and ``out`` with
respect to ``x``. The expert choice is piecewise constant, so only the scores of the chosen experts
carry gradient: ``y = c * s[idx]`` (softmax without renorm) or ``c * s[idx] / (sum s[idx] + eps)``,
and ``out = s``. Written in torch ops on the saved ``x``, so it runs on x's device and is itself
differentiable."""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

# Below this x, log1p(e^x) = e^x in float32 and sqrt-softplus is e^(x/2) (as in the reference).
_SOFTPLUS_TAIL = -17.0


def scores(x: torch.Tensor, norm_type: int) -> torch.Tensor:
    """The scores s of docs/operators.md §1.2 step 1 for float32 rows ``x``."""
    if norm_type == spec.NORM_SOFTMAX:
        return torch.softmax(x, dim=-1)
    if norm_type == spec.NORM_SIGMOID:
        return torch.sigmoid(x)
    stable = torch.sqrt(x.clamp(min=0) + torch.log1p(torch.exp(-x.abs())))
    return torch.where(x < _SOFTPLUS_TAIL, torch.exp(x * 0.5), stable)


def _scores_vjp(x: torch.Tensor, s: torch.Tensor, grad_s: torch.Tensor, norm_type: int) -> torch.Tensor:
    if norm_type == spec.NORM_SOFTMAX:
        return s * (grad_s - (grad_s * s).sum(dim=-1, keepdim=True))
    if norm_type == spec.NORM_SIGMOID:
        return grad_s * s * (1 - s)
    # d sqrt(softplus(x)) / dx = sigmoid(x) / (2 s); in the e^(x/2) tail that is s / 2.
    ds = torch.where(x < _SOFTPLUS_TAIL, s * 0.5, torch.sigmoid(x) / (2 * s.clamp(min=torch.finfo(s.dtype).tiny)))
    return grad_s * ds


def grad_x(x: torch.Tensor, expert_idx: torch.Tensor, attrs: dict, grad_y: torch.Tensor | None,
           grad_out: torch.Tensor | None) -> torch.Tensor:
    """dL/dx from dL/dy and dL/dout (either may be None), in x's dtype and shape."""
    E, k = x.shape[-1], attrs["k"]
    x2 = x.reshape(-1, E).float()
    s = scores(x2, attrs["norm_type"])
    grad_s = torch.zeros_like(s)
    if grad_y is not None and grad_y.numel():
        idx = expert_idx.reshape(-1, k).long()
        g = grad_y.reshape(-1, k).float() * attrs["routed_scaling_factor"]
        if attrs["norm_type"] != spec.NORM_SOFTMAX or attrs["renorm"] == 1:
            w = s.gather(-1, idx)
            d = w.sum(dim=-1, keepdim=True) + attrs["eps"]
            g = (g - (g * w).sum(dim=-1, keepdim=True) / d) / d
        grad_s = grad_s.scatter_add(-1, idx, g)  # hash rows may name an expert twice
    if attrs["out_flag"] and grad_out is not None and grad_out.numel():
        grad_s = grad_s + grad_out.reshape(-1, E).float()
    return _scores_vjp(x2, s, grad_s, attrs["norm_type"]).reshape(x.shape).to(x.dtype)
