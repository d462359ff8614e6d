"""Torch op for MoeTokenUnpermute (docs/operators.md §9): ``torch.ops.ascend_moe.moe_token_unpermute``.

The arguments are torch_npu's ``npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
padded_mode=False, restore_shape=None)``: padded_mode must be False (the Ascend operator has no
padded mode), and restore_shape is accepted and ignored, as Ascend ignores it without padded mode
(vllm-ascend passes it; a SymInt list, so a symbolic token count in it stays symbolic). The
implementation is the NumPy reference on any device; the fake kernel validates like it and keeps
the token dim symbolic.
"""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import moe_token_unpermute as spec

from . import registry
from ._torch_lib import define_op, from_numpy, static_inputs, to_numpy
from .moe_finalize_routing_v2 import gathered_rows

OP = "ascend_moe::moe_token_unpermute"
SCHEMA = ("(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, "
          "SymInt[]? restore_shape=None) -> Tensor")


def _impl(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    (y,) = spec.reference(to_numpy(permuted_tokens), to_numpy(sorted_indices), to_numpy(probs),
                          padded_mode=int(padded_mode))
    return from_numpy(y, permuted_tokens.device)


def _fake(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    tensors = (permuted_tokens, sorted_indices, probs)
    spec.validate_inputs(static_inputs(spec.INPUT_NAMES, tensors), {"padded_mode": int(padded_mode)})
    return gathered_rows(permuted_tokens, sorted_indices, probs)


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_token_unpermute unless already defined (docs/operators.md §9.2
    through the NumPy reference)."""
    define_op(OP, SCHEMA, _impl, _fake)
