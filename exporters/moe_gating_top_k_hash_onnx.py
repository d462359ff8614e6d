"""ONNX translations of the MoeGatingTopKHash torch ops: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from . import registry
from ._torch_lib import symbolic_inputs
from .moe_gating_top_k_hash import (
    CUSTOM_ATTR_ORDER,
    CUSTOM_SCHEMA,
    FLOAT_ATTRS,
    NPU_ATTR_ORDER,
    NPU_SCHEMA,
    ROUTER_SCHEMA,
    split_router_args,
)

GATING_OP = registry.onnxscript_op(spec)


@registry.translation("custom::npu_moe_gating_top_k")
@registry.translation("npu::npu_moe_gating_top_k")
def gating_translation(x, k, bias=None, input_ids=None, tid2eid=None, additional_bias=None,
                       additional_token_mask=None, **attributes):
    """Dynamo translation: one MoeGatingTopKHash node carrying every attribute and all outputs.

    Attributes the call leaves out take the schema's defaults; both torch front ends and the
    router op share it.
    """
    attrs = {**spec.DEFAULTS, **attributes, "k": k}
    typed = {n: float(v) if isinstance(spec.DEFAULTS[n], float) else int(v) for n, v in attrs.items()}
    return GATING_OP(x, bias, input_ids, tid2eid, additional_bias, additional_token_mask,
                     **typed, _num_outputs=3)


@registry.translation("ascend_moe::moe_gating_top_k_hash")
def router_translation(x, *args):
    """Dynamo translation of torch.ops.ascend_moe.moe_gating_top_k_hash (positional arguments)."""
    tensors, attrs = split_router_args(args)
    return gating_translation(x, attrs.pop("k"), *tensors, **attrs)


@registry.symbolic("custom::npu_moe_gating_top_k", CUSTOM_SCHEMA)
def custom_gating_symbolic(g, x, k, bias, input_ids, tid2eid, additional_bias, additional_token_mask, *attrs):
    """TorchScript symbolic of torch.ops.custom.npu_moe_gating_top_k (schema argument order)."""
    return _gating_symbolic(g, x, k, [bias, input_ids, tid2eid, additional_bias, additional_token_mask],
                            dict(zip(CUSTOM_ATTR_ORDER, attrs)))


@registry.symbolic("npu::npu_moe_gating_top_k", NPU_SCHEMA)
def npu_gating_symbolic(g, x, k, bias, *attrs):
    """TorchScript symbolic of torch.ops.npu.npu_moe_gating_top_k (schema argument order)."""
    return _gating_symbolic(g, x, k, [bias], dict(zip(NPU_ATTR_ORDER, attrs)))


@registry.symbolic("ascend_moe::moe_gating_top_k_hash", ROUTER_SCHEMA)
def router_symbolic(g, x, *args):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_gating_top_k_hash (schema argument order)."""
    tensors, attrs = split_router_args(args)
    return _gating_symbolic(g, x, attrs.pop("k"), list(tensors), attrs)


def _gating_symbolic(g, x, k: int, optional_tensors, attrs):
    import torch

    inputs = symbolic_inputs(g, [x, *optional_tensors])
    kw = {f"{name}_f" if name in FLOAT_ATTRS else f"{name}_i": float(v) if name in FLOAT_ATTRS else int(v)
          for name, v in attrs.items()}
    y, idx, out = g.op(registry.torchscript_name(spec), *inputs, k_i=k, outputs=3, **kw)
    # TorchScript cannot infer a custom op's outputs: set them from x's type and shape.
    x_type = x.type()
    sizes = x_type.varyingSizes() if x_type.dim() is not None else None
    if sizes is not None:
        y.setType(x_type.with_sizes(sizes[:-1] + [k]))
        idx.setType(x_type.with_sizes(sizes[:-1] + [k]).with_dtype(torch.int32))
        out_sizes = sizes if kw.get("out_flag_i") else [0]
        out.setType(x_type.with_sizes(out_sizes).with_dtype(torch.float32))
    return y, idx, out
