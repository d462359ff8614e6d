"""The SwiGLU expert and the rounding the export path uses (models.layers' "Numerics"): shared by
the blocks (models.layers) and the expert formulations (models.experts)."""

from __future__ import annotations

import torch
import torch.nn.functional as F


def rounded(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``t`` rounded to ``dtype`` but kept in its own dtype (emulates an op with ``dtype`` output)."""
    return t if t.dtype == dtype else t.to(dtype).to(t.dtype)


def matmul_t(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """``x @ w^T`` for 2-D or batched ``[E, out, in]`` weights, in x's dtype."""
    return torch.matmul(x, w.to(x.dtype).transpose(-1, -2))


def swiglu(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor, dtype: torch.dtype,
           limit: float = 0.0, act_fp32: bool = False, biases: tuple | None = None, alpha: float = 1.0,
           beta: float = 0.0) -> torch.Tensor:
    """Export-path SwiGLU expert ``down(silu(gate(x)) * up(x))`` on compute-dtype ``x``; every op's
    result is rounded to ``dtype`` (the activation is rounded once when ``act_fp32``). ``biases``
    (gate, up, down; broadcast against the projections) and ``alpha`` / ``beta`` make it
    ``down(g sigmoid(alpha g) (u + beta)) + down_bias`` (gpt-oss's experts, MoeRoutedExperts'
    activation_alpha / activation_beta)."""
    g, u = matmul_t(x, w_gate), matmul_t(x, w_up)
    if biases is not None:
        g, u = g + biases[0], u + biases[1]
    g, u = rounded(g, dtype), rounded(u, dtype)
    if act_fp32:
        g, u = g.float(), u.float()
    if limit:
        u = torch.clamp(u, min=-limit, max=limit)
        g = torch.clamp(g, max=limit)
    silu = F.silu(g) if alpha == 1.0 else g * torch.sigmoid(alpha * g)
    if beta:
        u = u + beta
    h = rounded(silu * u, dtype).to(x.dtype) if act_fp32 else rounded(rounded(silu, dtype) * u, dtype)
    out = matmul_t(h, w_down)
    return rounded(out if biases is None else out + biases[2], dtype)


def swiglu_native(x: torch.Tensor, w_gate: torch.Tensor, w_up: torch.Tensor, w_down: torch.Tensor,
                  limit: float = 0.0, act_fp32: bool = False) -> torch.Tensor:
    """Reference SwiGLU expert with native torch ops in x's dtype (Hugging Face style)."""
    g, u = F.linear(x, w_gate), F.linear(x, w_up)
    if act_fp32:
        g, u = g.float(), u.float()
    if limit:
        u = torch.clamp(u, min=-limit, max=limit)
        g = torch.clamp(g, max=limit)
    return F.linear((F.silu(g) * u).to(x.dtype), w_down)
