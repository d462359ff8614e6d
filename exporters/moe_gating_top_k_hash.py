"""Torch ops for MoeGatingTopKHash (docs/operators.md §1) and their ONNX translations.

- ``torch.ops.custom.npu_moe_gating_top_k``: the Ascend recipe's op, with hash routing.
- ``torch.ops.npu.npu_moe_gating_top_k``: torch_npu's built-in (no hash inputs, norm_type 0/1).

Both keep torch_npu's signatures (keyword-only tensors) and are thin CompositeImplicitAutograd front
ends of one op with positional tensors in the ONNX input order,
``torch.ops.ascend_moe.moe_gating_top_k_hash``: its implementation is the NumPy reference
(onnx_schemas) for every device, its fake kernel validates like it, and it has an autograd formula
(gating_grad) -- torch 2.13 registers none for ops with keyword-only tensors. The front ends stay
whole in ``torch.export`` graphs (one ONNX node per call). All three are defined by
:func:`define_torch_ops` (called by ``exporters.define_torch_ops``) unless torch_npu / the Ascend
custom-op package already defines them.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from . import gating_grad, registry
from ._torch_lib import IMPL_KEY, described, from_numpy, library, onnx_type_name, op_defined, schema_default, to_numpy

D = spec.DEFAULTS

# Attribute order of each torch front end's signature (docs/operators.md §1.1); defaults come from the schema.
CUSTOM_ATTR_ORDER = ("k_group", "group_count", "routed_scaling_factor", "eps",
                     "group_select_mode", "renorm", "norm_type", "out_flag")
NPU_ATTR_ORDER = ("k_group", "group_count", "group_select_mode", "renorm", "norm_type", "out_flag",
                  "routed_scaling_factor", "eps")
_CUSTOM_TENSORS = spec.INPUT_NAMES[1:]
_NPU_TENSORS = ("bias",)
FLOAT_ATTRS = tuple(n for n, v in D.items() if isinstance(v, float))  # from the schema

# The positional op every front end calls: inputs in ONNX order, then k and the other attributes
# (no defaults: the front ends resolve them from the schema).
ROUTER = "ascend_moe::moe_gating_top_k_hash"
ROUTER_ATTR_ORDER = ("k",) + CUSTOM_ATTR_ORDER


def _kind(a: str) -> str:
    return "float" if a in FLOAT_ATTRS else "int"


def _signature(tensors, attrs) -> str:
    parts = ["Tensor x", "int k", "*"] + [f"Tensor? {t}=None" for t in tensors]
    for a in attrs:
        kind = "bool" if a == "out_flag" else _kind(a)
        default = bool(D[a]) if a == "out_flag" else D[a]
        parts.append(f"{kind} {a}={schema_default(default)}")
    return "(" + ", ".join(parts) + ") -> (Tensor y, Tensor expert_idx, Tensor out)"


CUSTOM_SCHEMA = _signature(_CUSTOM_TENSORS, CUSTOM_ATTR_ORDER)
NPU_SCHEMA = _signature(_NPU_TENSORS, NPU_ATTR_ORDER)
ROUTER_SCHEMA = ("(Tensor x, " + ", ".join(f"Tensor? {t}" for t in spec.INPUT_NAMES[1:]) + ", "
                 + ", ".join(f"{_kind(a)} {a}" for a in ROUTER_ATTR_ORDER)
                 + ") -> (Tensor y, Tensor expert_idx, Tensor out)")


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


def split_router_args(args) -> tuple[tuple, dict]:
    """The router op's positional arguments -> (optional tensors, attributes)."""
    n = len(_CUSTOM_TENSORS)
    return args[:n], dict(zip(ROUTER_ATTR_ORDER, args[n:]))


def _router_impl(x, *args):
    tensors, attrs = split_router_args(args)
    return gating_top_k(x, *tensors, **attrs)


def _router_fake(x, *args):
    tensors, attrs = split_router_args(args)
    _validate(x, dict(zip(_CUSTOM_TENSORS, tensors)), _attrs(**attrs))
    lead, k = tuple(x.shape[:-1]), attrs["k"]
    out_shape = tuple(x.shape) if attrs["out_flag"] else (0,)
    return (x.new_empty((*lead, k)), x.new_empty((*lead, k), dtype=torch.int32),
            x.new_empty(out_shape, dtype=torch.float32))


def _setup_context(ctx, inputs, output) -> None:
    x, *args = inputs
    ctx.attrs = split_router_args(args)[1]
    ctx.save_for_backward(x, output[1])


def _backward(ctx, grad_y, grad_idx, grad_out):
    x, expert_idx = ctx.saved_tensors
    grad_x = gating_grad.grad_x(x, expert_idx, ctx.attrs, grad_y, grad_out)
    return (grad_x,) + (None,) * (len(_CUSTOM_TENSORS) + len(ROUTER_ATTR_ORDER))


def _define_router() -> None:
    lib = library(ROUTER.split("::")[0])
    torch.library.define(ROUTER, ROUTER_SCHEMA, lib=lib)
    torch.library.impl(ROUTER, IMPL_KEY, lib=lib)(_router_impl)
    torch.library.register_fake(ROUTER, lib=lib)(_router_fake)
    torch.library.register_autograd(ROUTER, _backward, setup_context=_setup_context, lib=lib)


def router(x, k, **kw):
    """Call the router op with a front end's keyword arguments (defaults from the schema)."""
    tensors = [kw.pop(n, None) for n in _CUSTOM_TENSORS]
    attrs = _attrs(k, **kw)
    return torch.ops.ascend_moe.moe_gating_top_k_hash(x, *tensors, *(attrs[a] for a in ROUTER_ATTR_ORDER))


def _define_front_end(name: str, schema: str, check=None) -> None:
    lib = library(name.split("::")[0])
    torch.library.define(name, schema, lib=lib)

    def front_end(x, k, **kw):
        if check is not None:
            check(kw)
        return router(x, k, **kw)

    torch.library.impl(name, "CompositeImplicitAutograd", lib=lib)(front_end)


def _npu_norm_type(kw: dict) -> None:
    norm_type = kw.get("norm_type", D["norm_type"])
    if norm_type not in (spec.NORM_SOFTMAX, spec.NORM_SIGMOID):
        raise ValueError(
            f"{spec.OP_TYPE}: attribute 'norm_type' of torch.ops.npu.npu_moe_gating_top_k "
            f"must be 0 or 1 (use torch.ops.custom.npu_moe_gating_top_k for 2), got {norm_type}"
        )


@registry.torch_ops
def define_torch_ops() -> None:
    """Define the router op and both torch front ends where nothing (torch_npu, Ascend custom ops)
    defines them."""
    if not op_defined("ascend_moe", "moe_gating_top_k_hash"):
        _define_router()
    if not op_defined("custom", "npu_moe_gating_top_k"):
        _define_front_end("custom::npu_moe_gating_top_k", CUSTOM_SCHEMA)
    if not op_defined("npu", "npu_moe_gating_top_k"):
        _define_front_end("npu::npu_moe_gating_top_k", NPU_SCHEMA, check=_npu_norm_type)
