"""ONNX translations of torch.ops.npu.npu_moe_re_routing: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec

from . import registry
from .moe_re_routing import ATTR_ORDER, SCHEMA

RE_ROUTING_OP = registry.onnxscript_op(spec)


@registry.translation("npu::npu_moe_re_routing")
def re_routing_translation(tokens, expert_token_num_per_rank, per_token_scales=None,
                           expert_token_num_type=spec.DEFAULTS["expert_token_num_type"],
                           idx_type=spec.DEFAULTS["idx_type"]):
    """Dynamo translation: one MoeReRouting node carrying both attributes and all 4 outputs."""
    return RE_ROUTING_OP(
        tokens, expert_token_num_per_rank, per_token_scales,
        expert_token_num_type=int(expert_token_num_type), idx_type=int(idx_type), _num_outputs=4,
    )


@registry.symbolic("npu::npu_moe_re_routing", SCHEMA)
def re_routing_symbolic(g, tokens, expert_token_num_per_rank, per_token_scales, *attrs):
    """TorchScript symbolic of torch.ops.npu.npu_moe_re_routing (schema argument order)."""
    import torch

    inputs = [tokens, expert_token_num_per_rank]
    has_scales = per_token_scales is not None and not per_token_scales.node().mustBeNone()
    if has_scales:
        inputs.append(per_token_scales)
    kw = {f"{name}_i": int(v) for name, v in zip(ATTR_ORDER, attrs)}
    outs = g.op(registry.torchscript_name(spec), *inputs, outputs=4, **kw)
    # TorchScript cannot infer a custom op's outputs: set them from the inputs' types and shapes.
    t_type, c_type = tokens.type(), expert_token_num_per_rank.type()
    t_sizes = t_type.varyingSizes() if t_type.dim() is not None else None
    c_sizes = c_type.varyingSizes() if c_type.dim() is not None else None
    if t_sizes is not None:
        outs[0].setType(t_type)
        outs[2].setType(t_type.with_sizes(t_sizes[:1]).with_dtype(torch.int32))
        if has_scales:
            outs[1].setType(per_token_scales.type())
        else:
            outs[1].setType(t_type.with_sizes([0]).with_dtype(torch.float32))
    if c_sizes is not None:
        outs[3].setType(c_type.with_sizes(c_sizes[1:]))
    return tuple(outs)

