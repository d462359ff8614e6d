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
           limit: float = 0.0, act_fp32: bool = False) -> torch.Tensor:
    """Export-path SwiGLU expert ``down(silu(gate(x)) * up(x))`` on compute-dtype ``x``; every op's
    result is rounded to ``dtype`` (the activation is rounded once when ``act_fp32``)."""
    g = rounded(matmul_t(x, w_gate), dtype)
    u = rounded(matmul_t(x, w_up), dtype)
    if act_fp32:
        g, u = g.float(), u.float()
    if limit:
        u = torch.clamp(u, min=-limit, max=limit)
        g = torch.clamp(g, max=limit)
    h = rounded(F.silu(g) * u, dtype).to(x.dtype) if act_fp32 else rounded(rounded(F.silu(g), dtype) * u, dtype)
    return rounded(matmul_t(h, w_down), dtype)


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
