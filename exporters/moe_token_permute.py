"""Torch op for MoeTokenPermute (docs/operators.md): ``torch.ops.ascend_moe.moe_token_permute``.

The positional op behind ``torch_npu.npu_moe_token_permute(tokens, indices, num_out_tokens=None,
padded_mode=False)``: the implementation is the NumPy reference on any device, the fake kernel
validates like it. ``num_out_tokens`` is a SymInt (model code computes it from the token count).
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_token_permute as spec

from . import registry
from ._torch_lib import define_op, from_numpy, static_described, to_numpy

NAME = "ascend_moe::moe_token_permute"
SCHEMA = ("(Tensor tokens, Tensor indices, SymInt? num_out_tokens=None, bool padded_mode=False) "
          "-> (Tensor permuted_tokens, Tensor sorted_indices)")


def node_attributes(num_out_tokens, padded_mode) -> dict:
    """The node's attributes (None -> 0; a symbolic num_out_tokens is left to the caller, 0 here)."""
    n = num_out_tokens if isinstance(num_out_tokens, int) else 0
    return {"num_out_tokens": n, "padded_mode": int(bool(padded_mode))}


def _impl(tokens, indices, num_out_tokens=None, padded_mode=False):
    outs = spec.reference(to_numpy(tokens), to_numpy(indices), **node_attributes(num_out_tokens, padded_mode))
    return tuple(from_numpy(o, tokens.device) for o in outs)


def _fake(tokens, indices, num_out_tokens=None, padded_mode=False):
    attrs = node_attributes(num_out_tokens, padded_mode)
    spec.validate_inputs(static_described(tokens), static_described(indices), attrs)
    if tokens.dim() == 2 and indices.dim() in (1, 2):
        # the rows the validator checks on static dims, stated for symbolic ones too: ids of a
        # data-dependent length (repeat_interleave by counts) then share the tokens' size
        torch._check(indices.shape[0] == tokens.shape[0])
    pairs = indices.numel()
    if num_out_tokens is None or isinstance(num_out_tokens, int):
        rows = spec.out_rows(pairs, attrs["num_out_tokens"])
    else:  # a SymInt: model code passes a positive count
        rows = torch.sym_min(num_out_tokens, pairs)
    return tokens.new_empty((rows, tokens.shape[1])), tokens.new_empty((pairs,), dtype=torch.int32)


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_token_permute unless already defined."""
    define_op(NAME, SCHEMA, _impl, _fake)
