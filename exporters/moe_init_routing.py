"""Torch ops for MoeInitRouting (docs/operators.md): ``torch.ops.ascend_moe.moe_init_routing``, the
positional op behind ``torch_npu.npu_moe_init_routing(x, row_idx, expert_idx, active_num)``, and
:func:`compute_expert_tokens`, ``torch_npu.npu_moe_compute_expert_tokens`` in plain torch.

The op's implementation is the NumPy reference on any device, its fake kernel validates like it.
``active_num`` is a SymInt (model code passes the token count).
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_init_routing as spec

from . import registry
from ._torch_lib import define_op, from_numpy, static_described, to_numpy

NAME = "ascend_moe::moe_init_routing"
SCHEMA = ("(Tensor x, Tensor row_idx, Tensor expert_idx, SymInt active_num) "
          "-> (Tensor expanded_x, Tensor expanded_row_idx, Tensor expanded_expert_idx)")
# The node's active_num when the call's is symbolic: every token kept, rows sliced after the node.
ALL_TOKENS = 2**62


def _impl(x, row_idx, expert_idx, active_num):
    outs = spec.reference(to_numpy(x), to_numpy(row_idx), to_numpy(expert_idx), active_num=int(active_num))
    return tuple(from_numpy(o, x.device) for o in outs)


def _fake(x, row_idx, expert_idx, active_num):
    attrs = {"active_num": active_num if isinstance(active_num, int) else ALL_TOKENS}
    spec.validate_inputs(*(static_described(t) for t in (x, row_idx, expert_idx)), attrs)
    n, k = expert_idx.shape
    rows = spec.expanded_rows(n, k, active_num) if isinstance(active_num, int) else torch.sym_min(n, active_num) * k
    pairs = n * k
    return (x.new_empty((rows, x.shape[1])), x.new_empty((pairs,), dtype=torch.int32),
            x.new_empty((pairs,), dtype=torch.int32))


def compute_expert_tokens(sorted_experts: torch.Tensor, num_experts: int) -> torch.Tensor:
    """``torch_npu.npu_moe_compute_expert_tokens``: for each expert i < num_experts, the end of its rows
    in ``sorted_experts`` (the number of entries <= i), in the input's dtype. Plain torch (one
    comparison and a sum), so it exports to standard ONNX ops."""
    experts = torch.arange(num_experts, device=sorted_experts.device, dtype=sorted_experts.dtype)
    return (sorted_experts[None, :] <= experts[:, None]).sum(dim=1).to(sorted_experts.dtype)


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_init_routing unless already defined."""
    define_op(NAME, SCHEMA, _impl, _fake)
