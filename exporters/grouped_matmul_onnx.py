"""ONNX translations of torch.ops.ascend_moe.grouped_matmul: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec

from . import registry
from .grouped_matmul import ATTR_ORDER, SCHEMA, TENSOR_INPUTS

GROUPED_MATMUL_OP = registry.onnxscript_op(spec)


@registry.translation("ascend_moe::grouped_matmul")
def grouped_matmul_translation(x, weight, group_list, bias=None, scale=None, offset=None, antiquant_scale=None,
                               antiquant_offset=None, per_token_scale=None,
                               group_list_type=spec.DEFAULTS["group_list_type"],
                               transpose_weight=spec.DEFAULTS["transpose_weight"],
                               output_dtype=spec.DEFAULTS["output_dtype"]):
    """Dynamo translation: one GroupedMatmul node carrying its attributes (output_dtype only when set)."""
    extra = {"output_dtype": int(output_dtype)} if int(output_dtype) else {}
    return GROUPED_MATMUL_OP(x, weight, group_list, bias, scale, offset, antiquant_scale, antiquant_offset,
                             per_token_scale, group_list_type=int(group_list_type),
                             transpose_weight=int(transpose_weight), **extra)


@registry.symbolic("ascend_moe::grouped_matmul", SCHEMA)
def grouped_matmul_symbolic(g, x, weight, group_list, *rest):
    """TorchScript symbolic of torch.ops.ascend_moe.grouped_matmul (schema argument order)."""
    optional, attrs = rest[:len(TENSOR_INPUTS)], rest[len(TENSOR_INPUTS):]
    present = [v is not None and not v.node().mustBeNone() for v in optional]
    last = max([i for i, p in enumerate(present) if p], default=-1)
    inputs = [x, weight, group_list] + [v if p else g.op("prim::Constant") for v, p in
                                        zip(optional[:last + 1], present[:last + 1])]
    kw = {f"{name}_i": int(v) for name, v in zip(ATTR_ORDER, attrs)}
    if not kw.get("output_dtype_i"):
        kw.pop("output_dtype_i", None)
    y = g.op(registry.torchscript_name(spec), *inputs, **kw)
    # TorchScript cannot infer a custom op's output: y is x's type (int8 x: left to ONNX), [M, N].
    x_type, w_type = x.type(), weight.type()
    if x_type.dim() == 2 and w_type.dim() == 3 and not kw.get("output_dtype_i"):
        n = w_type.varyingSizes()[1 if kw["transpose_weight_i"] else 2]
        if w_type.scalarType() == "Int" and not kw["transpose_weight_i"] and n is not None:
            n = n * spec.INT4_PER_WORD
        y.setType(x_type.with_sizes([x_type.varyingSizes()[0], n]))
    return y

