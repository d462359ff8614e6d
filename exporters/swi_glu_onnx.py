"""ONNX translations of torch.ops.ascend_moe.swi_glu: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import swi_glu as spec

from . import registry
from .swi_glu import OP, SCHEMA

SWIGLU_OP = registry.onnxscript_op(spec)


@registry.translation(OP)
def swiglu_translation(x, dim=spec.DEFAULTS["dim"]):
    """Dynamo translation: one SwiGlu node."""
    return SWIGLU_OP(x, dim=int(dim))


@registry.symbolic(OP, SCHEMA)
def swiglu_symbolic(g, x, dim):
    """TorchScript symbolic of torch.ops.ascend_moe.swi_glu."""
    y = g.op(registry.torchscript_name(spec), x, dim_i=int(dim))
    t = x.type()
    if t.dim() is not None:  # TorchScript cannot infer a custom op's output
        sizes = list(t.varyingSizes())
        axis = int(dim) % len(sizes)
        sizes[axis] = None if sizes[axis] is None else sizes[axis] // 2
        y.setType(t.with_sizes(sizes))
    return y

