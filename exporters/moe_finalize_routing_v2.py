"""Torch op for MoeFinalizeRoutingV2 (docs/operators.md §8): ``torch.ops.ascend_moe.moe_finalize_routing_v2``.

A positional op in the ONNX input order (expanded_x, expanded_row_idx, x1, x2, bias, scales,
expert_idx, drop_pad_mode); torch_npu's ``npu_moe_finalize_routing(expanded_permuted_rows, skip1,
skip2, bias, scales, expanded_src_to_dst_row, export_for_source_row, drop_pad_mode)`` maps onto it
argument for argument. The implementation is the NumPy reference on any device; the fake kernel
validates like it and keeps the token dim symbolic.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_finalize_routing_v2 as spec

from . import registry
from ._torch_lib import described, from_numpy, op_defined, to_numpy

OP = "ascend_moe::moe_finalize_routing_v2"
D = spec.DEFAULTS
SCHEMA = ("(Tensor expanded_x, Tensor expanded_row_idx, Tensor? x1=None, Tensor? x2=None, Tensor? bias=None, "
          f"Tensor? scales=None, Tensor? expert_idx=None, int drop_pad_mode={D['drop_pad_mode']}) -> Tensor")


def _static(desc):
    """``(shape, type)`` with symbolic dims replaced by None (the validators skip unknown dims)."""
    if desc is None:
        return None
    shape, dtype = desc
    return tuple(d if isinstance(d, int) else None for d in shape), dtype


def _impl(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
          drop_pad_mode: int = D["drop_pad_mode"]):
    arrays = [to_numpy(t) for t in (expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx)]
    (y,) = spec.reference(*arrays, drop_pad_mode=int(drop_pad_mode))
    return from_numpy(y, expanded_x.device)


def _fake(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
          drop_pad_mode: int = D["drop_pad_mode"]):
    tensors = (expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx)
    spec.validate_inputs({n: _static(described(t)) for n, t in zip(spec.INPUT_NAMES, tensors)},
                         {"drop_pad_mode": int(drop_pad_mode)})
    n = scales.shape[0] if scales is not None else expanded_row_idx.shape[0]
    return expanded_x.new_empty((n, expanded_x.shape[-1]))


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_finalize_routing_v2 (idempotent)."""
    if op_defined("ascend_moe", "moe_finalize_routing_v2"):
        return

    @torch.library.custom_op(OP, mutates_args=())
    def moe_finalize_routing_v2(expanded_x: torch.Tensor, expanded_row_idx: torch.Tensor,
                                x1: torch.Tensor | None = None, x2: torch.Tensor | None = None,
                                bias: torch.Tensor | None = None, scales: torch.Tensor | None = None,
                                expert_idx: torch.Tensor | None = None,
                                drop_pad_mode: int = D["drop_pad_mode"]) -> torch.Tensor:
        """docs/operators.md §8.2 through the NumPy reference."""
        return _impl(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode)

    moe_finalize_routing_v2.register_fake(_fake)
