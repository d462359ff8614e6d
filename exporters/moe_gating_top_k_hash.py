"""Torch ops for MoeGatingTopKHash (docs/operators.md §1) and their ONNX translations.

- ``torch.ops.custom.npu_moe_gating_top_k``: the Ascend recipe's op, with hash routing.
- ``torch.ops.npu.npu_moe_gating_top_k``: torch_npu's built-in (no hash inputs, norm_type 0/1).

Both are defined by :func:`define_torch_ops` (called by ``exporters.define_torch_ops``) unless
torch_npu / the Ascend custom-op package already defines them: the implementation is the NumPy
reference (onnx_schemas) for every device, and the fake kernel validates like it. No autograd
formula is registered (torch 2.13 cannot register one for ops with keyword-only tensors).
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from ._torch_lib import IMPL_KEY, described, from_numpy, library, onnx_type_name, op_defined, schema_default, to_numpy

D = spec.DEFAULTS

# Attribute order of each torch front end's signature (docs/operators.md §1.1); defaults come from the schema.
CUSTOM_ATTR_ORDER = ("k_group", "group_count", "routed_scaling_factor", "eps",
                     "group_select_mode", "renorm", "norm_type", "out_flag")
NPU_ATTR_ORDER = ("k_group", "group_count", "group_select_mode", "renorm", "norm_type", "out_flag",
                  "routed_scaling_factor", "eps")
_CUSTOM_TENSORS = ("bias", "input_ids", "tid2eid", "additional_bias", "additional_token_mask")
_NPU_TENSORS = ("bias",)
FLOAT_ATTRS = tuple(n for n, v in D.items() if isinstance(v, float))  # from the schema


def _signature(tensors, attrs) -> str:
    parts = ["Tensor x", "int k", "*"] + [f"Tensor? {t}=None" for t in tensors]
    for a in attrs:
        kind = "float" if a in FLOAT_ATTRS else "bool" if a == "out_flag" else "int"
        default = bool(D[a]) if a == "out_flag" else D[a]
        parts.append(f"{kind} {a}={schema_default(default)}")
    return "(" + ", ".join(parts) + ") -> (Tensor y, Tensor expert_idx, Tensor out)"


CUSTOM_SCHEMA = _signature(_CUSTOM_TENSORS, CUSTOM_ATTR_ORDER)
NPU_SCHEMA = _signature(_NPU_TENSORS, NPU_ATTR_ORDER)


def _attrs(k, **kw) -> dict:
    a = {**D, **kw, "k": k}
    return {n: float(v) if n in FLOAT_ATTRS else int(v) for n, v in a.items()}  # bool -> 0/1


def _validate(x, tensors: dict, attrs: dict) -> None:
    spec.validate_inputs(
        tuple(x.shape), onnx_type_name(x.dtype), {n: described(t) for n, t in tensors.items()}, attrs
    )


def gating_top_k(x, bias=None, input_ids=None, tid2eid=None, additional_bias=None,
                 additional_token_mask=None, **attributes):
    """docs/operators.md §1.2 through the NumPy reference, on any device; returns ``(y, expert_idx, out)``."""
    attrs = _attrs(**attributes)
    tensors = (bias, input_ids, tid2eid, additional_bias, additional_token_mask)
    y, idx, out = spec.reference(to_numpy(x), *(to_numpy(t) for t in tensors), **attrs)
    return from_numpy(y, x.device), from_numpy(idx, x.device), from_numpy(out, x.device)


def _fake(x, k, tensors: dict, attrs: dict):
    _validate(x, tensors, _attrs(k, **attrs))
    lead = tuple(x.shape[:-1])
    out_shape = tuple(x.shape) if attrs.get("out_flag", D["out_flag"]) else (0,)
    return (x.new_empty((*lead, k)), x.new_empty((*lead, k), dtype=torch.int32),
            x.new_empty(out_shape, dtype=torch.float32))


def _define(name: str, schema: str, tensor_names: tuple, check=None) -> None:
    namespace = name.split("::")[0]
    lib = library(namespace)
    torch.library.define(name, schema, lib=lib)

    def impl(x, k, **kw):
        if check is not None:
            check(kw)
        tensors = {n: kw.pop(n, None) for n in tensor_names}
        return gating_top_k(x, **tensors, k=k, **kw)

    def fake(x, k, **kw):
        if check is not None:
            check(kw)
        tensors = {n: kw.pop(n, None) for n in tensor_names}
        return _fake(x, k, tensors, kw)

    torch.library.impl(name, IMPL_KEY, lib=lib)(impl)
    torch.library.register_fake(name, lib=lib)(fake)


def _npu_norm_type(kw: dict) -> None:
    norm_type = kw.get("norm_type", D["norm_type"])
    if norm_type not in (spec.NORM_SOFTMAX, spec.NORM_SIGMOID):
        raise ValueError(
            f"{spec.OP_TYPE}: attribute 'norm_type' of torch.ops.npu.npu_moe_gating_top_k "
            f"must be 0 or 1 (use torch.ops.custom.npu_moe_gating_top_k for 2), got {norm_type}"
        )


def define_torch_ops() -> None:
    """Define both torch front ends where nothing (torch_npu, Ascend custom ops) defines them."""
    if not op_defined("custom", "npu_moe_gating_top_k"):
        _define("custom::npu_moe_gating_top_k", CUSTOM_SCHEMA, _CUSTOM_TENSORS)
    if not op_defined("npu", "npu_moe_gating_top_k"):
        _define("npu::npu_moe_gating_top_k", NPU_SCHEMA, _NPU_TENSORS, check=_npu_norm_type)
