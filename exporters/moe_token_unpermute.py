"""Torch op for MoeTokenUnpermute (docs/operators.md §9): ``torch.ops.ascend_moe.moe_token_unpermute``.

The arguments are torch_npu's ``npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs=None,
padded_mode=False, restore_shape=None)``: padded_mode must be False (the Ascend operator has no
padded mode), and restore_shape is accepted and ignored, as Ascend ignores it without padded mode
(vllm-ascend passes it). The implementation is the NumPy reference on any device; the fake kernel
validates like it and keeps the token dim symbolic.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_token_unpermute as spec

from . import registry
from ._torch_lib import described, from_numpy, op_defined, to_numpy
from .moe_finalize_routing_v2 import _static

OP = "ascend_moe::moe_token_unpermute"
SCHEMA = ("(Tensor permuted_tokens, Tensor sorted_indices, Tensor? probs=None, bool padded_mode=False, "
          "int[]? restore_shape=None) -> Tensor")


def _impl(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    (y,) = spec.reference(to_numpy(permuted_tokens), to_numpy(sorted_indices), to_numpy(probs),
                          padded_mode=int(padded_mode))
    return from_numpy(y, permuted_tokens.device)


def _fake(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    tensors = (permuted_tokens, sorted_indices, probs)
    spec.validate_inputs({n: _static(described(t)) for n, t in zip(spec.INPUT_NAMES, tensors)},
                         {"padded_mode": int(padded_mode)})
    n = probs.shape[0] if probs is not None else sorted_indices.shape[0]
    return permuted_tokens.new_empty((n, permuted_tokens.shape[-1]))


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_token_unpermute (idempotent)."""
    if op_defined("ascend_moe", "moe_token_unpermute"):
        return

    @torch.library.custom_op(OP, mutates_args=())
    def moe_token_unpermute(permuted_tokens: torch.Tensor, sorted_indices: torch.Tensor,
                            probs: torch.Tensor | None = None, padded_mode: bool = False,
                            restore_shape: list[int] | None = None) -> torch.Tensor:
        """docs/operators.md §9.2 through the NumPy reference."""
        return _impl(permuted_tokens, sorted_indices, probs, padded_mode, restore_shape)

    moe_token_unpermute.register_fake(_fake)
