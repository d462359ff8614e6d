"""ONNX translations of torch.ops.ascend_moe.moe_init_routing_v3: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import opset18 as op

from ascend_moe_onnx.onnx_schemas import moe_init_routing_v3 as spec

from . import registry
from .moe_init_routing_v3 import SCHEMA, node_attributes

INIT_ROUTING_OP = registry.onnxscript_op(spec)
_ALL_ROWS = 2**62


@registry.translation("ascend_moe::moe_init_routing_v3")
def init_routing_translation(x, expert_idx, scale=None, offset=None, active_num=-1, expert_capacity=-1,
                             expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0,
                             expert_tokens_num_flag=False, quant_mode=-1, active_expert_range=(),
                             row_idx_type=0):
    """Dynamo translation: one MoeInitRoutingV3 node. A symbolic active_num (a graph value) runs the
    node with active_num -1 and slices expanded_x / expanded_scale to min(active_num, N*K) rows, which
    is what active_num > 0 means (rows past the kept pairs are zero either way); active_num <= 0 keeps all."""
    attrs = node_attributes(active_num, expert_capacity, expert_num, drop_pad_mode, expert_tokens_num_type,
                            expert_tokens_num_flag, quant_mode, active_expert_range, row_idx_type)
    outs = INIT_ROUTING_OP(x, expert_idx, scale, offset, **attrs, _num_outputs=4)
    if isinstance(active_num, int) or attrs["drop_pad_mode"] == spec.DROP_PAD:
        return outs
    expanded_x, row_idx, counts, expanded_scale = outs
    zero = op.Constant(value_ints=[0])
    n = op.Reshape(op.Cast(active_num, to=7), op.Constant(value_ints=[1]))  # INT64 [1]
    end = op.Where(op.Greater(n, zero), n, op.Constant(value_ints=[_ALL_ROWS]))
    return (op.Slice(expanded_x, zero, end, zero), row_idx, counts, op.Slice(expanded_scale, zero, end, zero))


@registry.symbolic("ascend_moe::moe_init_routing_v3", SCHEMA)
def init_routing_symbolic(g, x, expert_idx, scale, offset, *args):
    """TorchScript symbolic (active_num must be a constant there)."""
    import torch

    attrs = node_attributes(*args)
    inputs = [x, expert_idx] + [None if t is None or t.node().mustBeNone() else t for t in (scale, offset)]
    while inputs[-1] is None:
        inputs.pop()
    inputs = [t if t is not None else g.op("prim::Constant").setType(torch.OptionalType.ofTensor())
              for t in inputs]
    outs = g.op(registry.torchscript_name(spec), *inputs, outputs=4, **{f"{k}_i": v for k, v in attrs.items()})
    x_type = x.type()
    sizes = x_type.varyingSizes() if x_type.dim() is not None else None
    if sizes is not None:
        x_dtype = x_type.dtype() if attrs["quant_mode"] == spec.NO_QUANT else torch.int8
        rank = 3 if attrs["drop_pad_mode"] == spec.DROP_PAD else 2
        outs[0].setType(x_type.with_sizes([None] * (rank - 1) + sizes[1:]).with_dtype(x_dtype))
        outs[1].setType(x_type.with_sizes([None]).with_dtype(torch.int32))
        outs[2].setType(x_type.with_sizes(spec.counts_shape(attrs)).with_dtype(torch.int64))
        outs[3].setType(x_type.with_sizes([None]).with_dtype(torch.float32))
    return tuple(outs)

