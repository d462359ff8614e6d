"""Torch op for MoeInitRoutingV3 (docs/operators.md): ``torch.ops.ascend_moe.moe_init_routing_v3``.

The positional op behind ``torch_npu.npu_moe_init_routing_v2`` (same arguments in the same order,
all positional): the implementation is the NumPy reference (onnx_schemas) on any device, the fake
kernel validates like it. ``active_num`` is a SymInt: model code passes ``num_tokens * top_k``,
which must not pin the token count at export (the translation slices the rows then).
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_init_routing_v3 as spec

from . import registry
from ._torch_lib import define_op, from_numpy, static_described, to_numpy

NAME = "ascend_moe::moe_init_routing_v3"
D = spec.DEFAULTS
SCHEMA = (
    "(Tensor x, Tensor expert_idx, Tensor? scale=None, Tensor? offset=None, SymInt active_num=-1, "
    "int expert_capacity=-1, int expert_num=-1, int drop_pad_mode=0, int expert_tokens_num_type=0, "
    "bool expert_tokens_num_flag=False, int quant_mode=-1, int[] active_expert_range=[], int row_idx_type=0) "
    "-> (Tensor expanded_x, Tensor expanded_row_idx, Tensor expert_tokens_count_or_cumsum, Tensor expanded_scale)"
)


def node_attributes(active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_type,
                    expert_tokens_num_flag, quant_mode, active_expert_range, row_idx_type) -> dict:
    """The ONNX node's attributes from the torch arguments (``active_expert_range`` -> start / end;
    [] is the whole range). A symbolic active_num is left to the caller (taken as -1 here)."""
    rng = list(active_expert_range)
    if rng and len(rng) != 2:
        raise ValueError(f"{spec.OP_TYPE}: argument 'active_expert_range' must be [] or [start, end], got {rng}")
    start, end = (int(rng[0]), int(rng[1])) if rng else (D["active_expert_start"], D["active_expert_end"])
    return {"active_num": int(active_num) if isinstance(active_num, int) else -1,
            "expert_capacity": int(expert_capacity), "expert_num": int(expert_num),
            "drop_pad_mode": int(drop_pad_mode), "expert_tokens_num_type": int(expert_tokens_num_type),
            "expert_tokens_num_flag": int(bool(expert_tokens_num_flag)), "quant_mode": int(quant_mode),
            "active_expert_start": start, "active_expert_end": end, "row_idx_type": int(row_idx_type)}


def _attributes(active_num=-1, expert_capacity=-1, expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0,
                expert_tokens_num_flag=False, quant_mode=-1, active_expert_range=(), row_idx_type=0) -> dict:
    # the torch signature's defaults (SCHEMA), which are the ONNX schema's
    return node_attributes(active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_type,
                           expert_tokens_num_flag, quant_mode, active_expert_range, row_idx_type)


def _impl(x, expert_idx, scale=None, offset=None, *args, **kwargs):
    attrs = _attributes(*args, **kwargs)
    outs = spec.reference(to_numpy(x), to_numpy(expert_idx), to_numpy(scale), to_numpy(offset), **attrs)
    return tuple(from_numpy(o, x.device) for o in outs)


def _fake(x, expert_idx, scale=None, offset=None, *args, **kwargs):
    attrs = _attributes(*args, **kwargs)
    active_num = args[0] if args else kwargs.get("active_num", -1)
    spec.validate_inputs(*(static_described(t) for t in (x, expert_idx, scale, offset)), attrs)
    pairs = expert_idx.shape[0] * expert_idx.shape[1]
    if attrs["drop_pad_mode"] == spec.DROP_PAD:
        E, C = attrs["expert_num"], attrs["expert_capacity"]
        x_shape, rows = (E, C, x.shape[1]), E * C
    else:
        rows = spec.expanded_rows(pairs, active_num) if isinstance(active_num, int) else \
            torch.sym_min(active_num, pairs)
        x_shape = (rows, x.shape[1])
    x_dtype = x.dtype if attrs["quant_mode"] == spec.NO_QUANT else torch.int8
    return (x.new_empty(x_shape, dtype=x_dtype), x.new_empty((pairs,), dtype=torch.int32),
            x.new_empty(tuple(spec.counts_shape(attrs)), dtype=torch.int64),
            x.new_empty((rows,), dtype=torch.float32))


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.moe_init_routing_v3 unless already defined."""
    define_op(NAME, SCHEMA, _impl, _fake)
