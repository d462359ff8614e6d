"""torch.ops.ascend_moe.gated_delta_rule: the gated delta rule recurrence of linear-attention layers
(Qwen3.5-MoE's and Qwen3-Next's gated DeltaNet) over a whole sequence, from and to a recurrent state.

It exports as ONNX Runtime's ``com.microsoft`` ``LinearAttention`` (update_rule ``gated_delta``),
whose layouts it takes: query / key [batch, sequence, heads * key_dim], value [batch, sequence,
heads * value_dim], state [batch, heads, key_dim, value_dim] (float32), decay (log space) and beta
[batch, sequence, heads]. Per token t, with S the state::

    S = exp(decay_t) * S;  S += k_t (x) beta_t * (v_t - S^T k_t);  o_t = scale * S^T q_t

A traced model needs it because the eager recurrence loops over the sequence (or over chunks of
it) in Python, which would fix the graph's sequence length.
"""

from __future__ import annotations

import torch

from . import registry
from ._torch_lib import define_op

OP = "ascend_moe::gated_delta_rule"
SCHEMA = ("(Tensor query, Tensor key, Tensor value, Tensor state, Tensor decay, Tensor beta, int heads, "
          "float scale) -> (Tensor, Tensor)")


def _impl(query, key, value, state, decay, beta, heads: int, scale: float):
    b, t, _ = query.shape
    q = query.float().reshape(b, t, heads, -1)
    k = key.float().reshape(b, t, heads, -1)
    v = value.float().reshape(b, t, heads, -1)
    s = state.float().clone()
    out = torch.empty(b, t, heads, v.shape[-1], dtype=torch.float32, device=query.device)
    for i in range(t):
        s = s * decay[:, i].float().exp()[..., None, None]
        memory = (s * k[:, i, :, :, None]).sum(-2)
        delta = (v[:, i] - memory) * beta[:, i].float()[..., None]
        s = s + k[:, i, :, :, None] * delta[:, :, None, :]
        out[:, i] = scale * (s * q[:, i, :, :, None]).sum(-2)
    return out.reshape(b, t, -1).to(query.dtype), s.to(state.dtype)


def _fake(query, key, value, state, decay, beta, heads: int, scale: float):
    b, t, _ = query.shape
    return value.new_empty(b, t, value.shape[-1]).to(query.dtype), state.new_empty(state.shape)


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.gated_delta_rule (idempotent): the recurrence token by token."""
    define_op(OP, SCHEMA, _impl, _fake)
