"""Torch op for SwiGlu (docs/operators.md §11): ``torch.ops.ascend_moe.swi_glu(x, dim=-1)``.

torch_npu's ``npu_swiglu`` calls it (exporters/torch_npu). The implementation is the NumPy
reference on any device; the fake kernel validates like it and halves the dim axis; the autograd
formula is that of ``silu(a) * b``.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import swi_glu as spec

from . import registry
from ._torch_lib import from_numpy, op_defined, static_described, to_numpy

OP = "ascend_moe::swi_glu"
SCHEMA = "(Tensor x, int dim=-1) -> Tensor"


def _impl(x, dim=-1):
    (y,) = spec.reference(to_numpy(x), dim=int(dim))
    return from_numpy(y, x.device)


def _fake(x, dim=-1):
    axis = spec.validate_inputs({"x": static_described(x)}, {"dim": int(dim)})
    shape = list(x.shape)
    shape[axis] = shape[axis] // 2
    return x.new_empty(shape)


def _setup_context(ctx, inputs, output):
    x, dim = inputs
    ctx.save_for_backward(x)
    ctx.dim = dim


def _backward(ctx, grad):
    (x,) = ctx.saved_tensors
    a, b = x.float().chunk(2, dim=ctx.dim)
    sig = torch.sigmoid(a)
    g = grad.float()
    da = g * b * sig * (1 + a * (1 - sig))
    db = g * a * sig
    return torch.cat([da, db], dim=ctx.dim).to(x.dtype), None


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.ascend_moe.swi_glu (idempotent)."""
    if op_defined("ascend_moe", "swi_glu"):
        return

    @torch.library.custom_op(OP, mutates_args=())
    def swi_glu(x: torch.Tensor, dim: int = -1) -> torch.Tensor:
        """docs/operators.md §11.2 through the NumPy reference."""
        return _impl(x, dim)

    swi_glu.register_fake(_fake)
    swi_glu.register_autograd(_backward, setup_context=_setup_context)
