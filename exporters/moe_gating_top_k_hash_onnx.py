"""ONNX translations of the MoeGatingTopKHash torch ops: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import values

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from .moe_gating_top_k_hash import CUSTOM_ATTR_ORDER, FLOAT_ATTRS, NPU_ATTR_ORDER, split_router_args

_OPSET = values.Opset(spec.DOMAIN, spec.OPSET_VERSION)
GATING_OP = values.Op(_OPSET, spec.OP_TYPE, spec.SCHEMA)


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


def router_translation(x, *args):
    """Dynamo translation of torch.ops.ascend_moe.moe_gating_top_k_hash (positional arguments)."""
    tensors, attrs = split_router_args(args)
    return gating_translation(x, attrs.pop("k"), *tensors, **attrs)


def custom_gating_symbolic(g, x, k, bias, input_ids, tid2eid, additional_bias,
                           additional_token_mask, *attrs):
    """TorchScript symbolic of torch.ops.custom.npu_moe_gating_top_k (schema argument order)."""
    return _gating_symbolic(g, x, k, [bias, input_ids, tid2eid, additional_bias, additional_token_mask],
                            dict(zip(CUSTOM_ATTR_ORDER, attrs)))


def npu_gating_symbolic(g, x, k, bias, *attrs):
    """TorchScript symbolic of torch.ops.npu.npu_moe_gating_top_k (schema argument order)."""
    return _gating_symbolic(g, x, k, [bias], dict(zip(NPU_ATTR_ORDER, attrs)))


def router_symbolic(g, x, *args):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_gating_top_k_hash (schema argument order)."""
    tensors, attrs = split_router_args(args)
    return _gating_symbolic(g, x, attrs.pop("k"), list(tensors), attrs)


def _gating_symbolic(g, x, k, optional_tensors, attrs):
    from torch.onnx import symbolic_helper as sh

    inputs = [x] + [None if t is None or t.node().mustBeNone() else t for t in optional_tensors]
    while inputs[-1] is None:
        inputs.pop()
    # An absent middle input is an empty name in ONNX: a None constant of optional type.
    inputs = [t if t is not None else g.op("prim::Constant").setType(_none_type()) for t in inputs]
    k_val = sh._get_const(k, "i", "k")
    kw = {}
    for name, value in attrs.items():
        if name in FLOAT_ATTRS:
            kw[name + "_f"] = sh._get_const(value, "f", name)
        else:
            kw[name + "_i"] = int(sh._get_const(value, "b" if name == "out_flag" else "i", name))
    y, idx, out = g.op(f"{spec.DOMAIN}::{spec.OP_TYPE}", *inputs, k_i=k_val, outputs=3, **kw)
    # TorchScript cannot infer a custom op's outputs: set them from x's type and shape.
    x_type = x.type()
    sizes = x_type.varyingSizes() if x_type.dim() is not None else None
    if sizes is not None:
        y.setType(x_type.with_sizes(sizes[:-1] + [k_val]))
        idx.setType(x_type.with_sizes(sizes[:-1] + [k_val]).with_dtype(_torch().int32))
        out_sizes = sizes if kw.get("out_flag_i") else [0]
        out.setType(x_type.with_sizes(out_sizes).with_dtype(_torch().float32))
    return y, idx, out


def _torch():
    import torch

    return torch


def _none_type():
    import torch

    return torch._C.OptionalType.ofTensor()
