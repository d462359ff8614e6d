"""What an expert-parallel run is checked against: the single-process plain-torch layer.

Rows are independent, so each rank checks its own tokens against ``block.forward_native`` (the
published model's formulation, no custom ops) and the ranks only exchange the error figures.

float32 dispatch: max |ep - ref| / max |ref| <= ``FLOAT32_TOL`` and identical expert choices.

int8 dispatch (symmetric per-token scales, ``layer.quantise_int8``): a token's routed experts see
``x + d`` with |d_i| <= eps = scale/2 = max|x| / 254 (round to nearest). For one SwiGLU expert
``y = W_d (silu(W_g x) * (W_u x))`` with g = W_g x, u = W_u x:

- |dg_j| <= eps * sum_i |W_g[j, i]|,   |du_j| <= eps * sum_i |W_u[j, i]|;
- |dh_j| <= S * |dg_j| * (|u_j| + |du_j|) + |silu(g_j)| * |du_j|, with S = max |silu'| = 1.0998
  (so S = 1.1 is safe);
- |dy| <= |W_d| |dh| (elementwise absolute values), and the layer output error
  <= sum over the token's k experts of |w_k| * |dy_k|.

The router and the shared experts see the exact x (they run on the source rank before any
quantisation), so this bound, plus the float32 tolerance times max |ref|, is exact worst-case
arithmetic, not an estimate. The int8 check also compares against the plain-torch layer fed the
dequantised rows (``reference_dequantised``) with the float32 tolerance: that one catches pipeline
mistakes far below the quantisation bound.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .layer import quantise_int8

FLOAT32_TOL = 1e-4
SILU_LIPSCHITZ = 1.1  # max |d silu / dx| = 1.0998 (at x ~ 2.40)


def reference(block, inputs: tuple) -> tuple[torch.Tensor, torch.Tensor]:
    """The single-process plain-torch layer -> (output float32 [T, H], expert_idx int32 [T, k])."""
    with torch.no_grad():
        out, idx = block.forward_native(*inputs)
    return out.to(torch.float32), idx


def _routing(block, inputs: tuple):
    named = dict(zip(block.input_names, inputs))
    x = named["hidden_states"]
    w, idx = block.route_native(block.router_logits_native(x), named)
    return x, w.to(torch.float32), idx.to(torch.int64)


def reference_dequantised(block, inputs: tuple) -> torch.Tensor:
    """The plain-torch layer with its routed experts fed the int8-dequantised tokens (router and
    shared experts on the exact tokens), float32 [T, H]: what the int8 pipeline computes."""
    with torch.no_grad():
        x, w, idx = _routing(block, inputs)
        q, scale = quantise_int8(x.to(torch.float32))
        x_hat = (q.to(torch.float32) * scale[:, None]).to(block.dtype)
        out = torch.zeros(x.shape, dtype=torch.float32)
        for e in range(block.cfg.experts):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                h = block.experts.expert_native(e, x_hat[tok])
                out.index_add_(0, tok, h.float() * w[tok, slot, None])
        if block.shared_experts is not None:
            out = out + block.shared_experts.forward_native(x).float()
    return out


def int8_bound(block, inputs: tuple) -> torch.Tensor:
    """Worst-case |layer(x) - layer_int8(x)| per element (module docstring), float32 [T, H]."""
    with torch.no_grad():
        x, w, idx = _routing(block, inputs)
        x = x.to(torch.float32)
        _, scale = quantise_int8(x)
        eps = (scale / 2 * (1 + 2**-20))[:, None]  # + float32 rounding of x / scale
        bound = torch.zeros(x.shape, dtype=torch.float32)
        ex = block.experts
        for e in range(block.cfg.experts):
            tok, slot = torch.where(idx == e)
            if not tok.numel():
                continue
            wg, wu, wd = (p[e].to(torch.float32) for p in (ex.gate_proj, ex.up_proj, ex.down_proj))
            g, u = F.linear(x[tok], wg), F.linear(x[tok], wu)
            dg = eps[tok] * wg.abs().sum(1)[None, :]
            du = eps[tok] * wu.abs().sum(1)[None, :]
            dh = SILU_LIPSCHITZ * dg * (u.abs() + du) + F.silu(g).abs() * du
            bound.index_add_(0, tok, F.linear(dh, wd.abs()) * w[tok, slot, None].abs())
    return bound
