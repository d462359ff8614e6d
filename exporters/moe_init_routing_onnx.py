"""ONNX translations of torch.ops.ascend_moe.moe_init_routing: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import opset18 as op

from ascend_moe_onnx.onnx_schemas import moe_init_routing as spec

from . import registry
from .moe_init_routing import ALL_TOKENS, SCHEMA

INIT_ROUTING_V1_OP = registry.onnxscript_op(spec)


@registry.translation("ascend_moe::moe_init_routing")
def init_routing_v1_translation(x, row_idx, expert_idx, active_num):
    """Dynamo translation: one MoeInitRouting node. A symbolic active_num runs the node keeping every
    token and slices expanded_x to active_num * K rows (Slice clamps it to N * K)."""
    if isinstance(active_num, int):
        return INIT_ROUTING_V1_OP(x, row_idx, expert_idx, active_num=active_num, _num_outputs=3)
    expanded_x, row, experts = INIT_ROUTING_V1_OP(x, row_idx, expert_idx, active_num=ALL_TOKENS, _num_outputs=3)
    zero = op.Constant(value_ints=[0])
    k = op.Shape(expert_idx, start=1, end=2)
    end = op.Mul(op.Reshape(op.Cast(active_num, to=7), op.Constant(value_ints=[1])), k)  # INT64 [1]
    return op.Slice(expanded_x, zero, end, zero), row, experts


@registry.symbolic("ascend_moe::moe_init_routing", SCHEMA)
def init_routing_v1_symbolic(g, x, row_idx, expert_idx, active_num):
    """TorchScript symbolic (active_num must be a constant there)."""
    import torch

    outs = g.op(registry.torchscript_name(spec), x, row_idx, expert_idx, active_num_i=int(active_num), outputs=3)
    x_type = x.type()
    if x_type.dim() is not None:
        outs[0].setType(x_type.with_sizes([None] + x_type.varyingSizes()[1:]))
        outs[1].setType(x_type.with_sizes([None]).with_dtype(torch.int32))
        outs[2].setType(x_type.with_sizes([None]).with_dtype(torch.int32))
    return tuple(outs)

