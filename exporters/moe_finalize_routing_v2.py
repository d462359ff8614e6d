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
from ._torch_lib import define_op, from_numpy, static_inputs, to_numpy

OP = "ascend_moe::moe_finalize_routing_v2"
D = spec.DEFAULTS
SCHEMA = ("(Tensor expanded_x, Tensor expanded_row_idx, Tensor? x1=None, Tensor? x2=None, Tensor? bias=None, "
          f"Tensor? scales=None, Tensor? expert_idx=None, int drop_pad_mode={D['drop_pad_mode']}) -> Tensor")


def _impl(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
          drop_pad_mode: int = D["drop_pad_mode"]):
    arrays = [to_numpy(t) for t in (expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx)]
    (y,) = spec.reference(*arrays, drop_pad_mode=int(drop_pad_mode))
    return from_numpy(y, expanded_x.device)


def _fake(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
          drop_pad_mode: int = D["drop_pad_mode"]):
    tensors = (expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx)
    spec.validate_inputs(static_inputs(spec.INPUT_NAMES, tensors), {"drop_pad_mode": int(drop_pad_mode)})
    return gathered_rows(expanded_x, expanded_row_idx, scales)


def gathered_rows(rows: torch.Tensor, index: torch.Tensor, weights: torch.Tensor | None) -> torch.Tensor:
    """The fake output of a weighted gather (this op, MoeTokenUnpermute): [N, H] like ``rows``, N from
    ``weights`` [N, K], or from ``index`` [N*K] without weights (K = 1)."""
    n = weights.shape[0] if weights is not None else index.shape[0]
    return rows.new_empty((n, rows.shape[-1]))


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_finalize_routing_v2 unless already defined (docs/operators.md §8.2
    through the NumPy reference)."""
    define_op(OP, SCHEMA, _impl, _fake)
