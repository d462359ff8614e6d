"""ONNX translations of torch.ops.ascend_moe.moe_token_permute: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import opset18 as op

from ascend_moe_onnx.onnx_schemas import moe_token_permute as spec

from . import registry
from .moe_token_permute import SCHEMA, node_attributes

TOKEN_PERMUTE_OP = registry.onnxscript_op(spec)
_ALL_ROWS = 2**62


@registry.translation("ascend_moe::moe_token_permute")
def token_permute_translation(tokens, indices, num_out_tokens=None, padded_mode=False):
    """Dynamo translation: one MoeTokenPermute node. A symbolic num_out_tokens runs the node with 0
    (all rows) and slices permuted_tokens: Slice's end n > 0 keeps min(n, N*K) rows, n < 0 keeps
    max(N*K + n, 0), and n = 0 (all rows) becomes a large end."""
    attrs = node_attributes(num_out_tokens, padded_mode)
    permuted, sorted_indices = TOKEN_PERMUTE_OP(tokens, indices, **attrs, _num_outputs=2)
    if num_out_tokens is None or isinstance(num_out_tokens, int):
        return permuted, sorted_indices
    zero = op.Constant(value_ints=[0])
    n = op.Reshape(op.Cast(num_out_tokens, to=7), op.Constant(value_ints=[1]))  # INT64 [1]
    end = op.Where(op.Equal(n, zero), op.Constant(value_ints=[_ALL_ROWS]), n)
    return op.Slice(permuted, zero, end, zero), sorted_indices


@registry.symbolic("ascend_moe::moe_token_permute", SCHEMA)
def token_permute_symbolic(g, tokens, indices, num_out_tokens, padded_mode):
    """TorchScript symbolic (num_out_tokens must be a constant or None there)."""
    import torch

    attrs = node_attributes(num_out_tokens, padded_mode)
    outs = g.op(registry.torchscript_name(spec), tokens, indices, outputs=2,
                **{f"{k}_i": v for k, v in attrs.items()})
    t_type = tokens.type()
    if t_type.dim() is not None:
        outs[0].setType(t_type.with_sizes([None] + t_type.varyingSizes()[1:]))
        outs[1].setType(t_type.with_sizes([None]).with_dtype(torch.int32))
    return tuple(outs)

