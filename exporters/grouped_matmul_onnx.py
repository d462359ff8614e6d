"""ONNX translations of torch.ops.ascend_moe.grouped_matmul: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import values

from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

from ._torch_lib import torchscript_symbolic
from .grouped_matmul import ATTR_ORDER, SCHEMA

_OPSET = values.Opset(spec.DOMAIN, spec.OPSET_VERSION)
GROUPED_MATMUL_OP = values.Op(_OPSET, spec.OP_TYPE, spec.SCHEMA)


def grouped_matmul_translation(x, weight, group_list, bias=None,
                               group_list_type=spec.DEFAULTS["group_list_type"],
                               transpose_weight=spec.DEFAULTS["transpose_weight"]):
    """Dynamo translation: one GroupedMatmul node carrying both attributes."""
    return GROUPED_MATMUL_OP(x, weight, group_list, bias, group_list_type=int(group_list_type),
                             transpose_weight=int(transpose_weight))


def _grouped_matmul(g, x, weight, group_list, bias, *attrs):
    """TorchScript symbolic of torch.ops.ascend_moe.grouped_matmul (schema argument order)."""
    inputs = [x, weight, group_list]
    if bias is not None and not bias.node().mustBeNone():
        inputs.append(bias)
    kw = {f"{name}_i": int(v) for name, v in zip(ATTR_ORDER, attrs)}
    y = g.op(f"{spec.DOMAIN}::{spec.OP_TYPE}", *inputs, **kw)
    # TorchScript cannot infer a custom op's output: y is x's type, [M, N].
    x_type, w_type = x.type(), weight.type()
    if x_type.dim() == 2 and w_type.dim() == 3:
        n = w_type.varyingSizes()[1 if kw["transpose_weight_i"] else 2]
        y.setType(x_type.with_sizes([x_type.varyingSizes()[0], n]))
    return y


grouped_matmul_symbolic = torchscript_symbolic(SCHEMA, _grouped_matmul)
