"""Torch ops for MoeGatingTopKHash (docs/operators.md §1) and their ONNX translations.

- ``torch.ops.custom.npu_moe_gating_top_k``: the Ascend recipe's op, with hash routing.
- ``torch.ops.npu.npu_moe_gating_top_k``: torch_npu's built-in (no hash inputs, norm_type 0/1).

Both are defined here with a CPU implementation and a fake kernel unless torch_npu / the Ascend
custom-op package already defines them; the export side is added in every case.
"""

from __future__ import annotations

import numpy as np
import torch

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from ._torch_lib import described, library, onnx_type_name, op_defined, schema_default, try_import_torch_npu

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


def _rank_key(b: torch.Tensor) -> torch.Tensor:
    # float64 key: numbers keep their order, -inf below them, NaN below -inf; -inf (float64)
    # itself is left for experts outside the kept groups.
    key = b.double()
    key = torch.where(torch.isneginf(b), torch.full_like(key, -1e300), key)
    return torch.where(torch.isnan(b), torch.full_like(key, -1e301), key)


def _normalise(x2: torch.Tensor, norm_type: int) -> torch.Tensor:
    if norm_type == spec.NORM_SOFTMAX:
        e = torch.exp(x2 - x2.amax(dim=-1, keepdim=True))
        return e * (1.0 / e.sum(dim=-1, keepdim=True))
    if norm_type == spec.NORM_SIGMOID:
        return 1.0 / (1.0 + torch.exp(-x2))
    return torch.sqrt(torch.clamp_min(x2, 0) + torch.log1p(torch.exp(-x2.abs())))


def _select(b: torch.Tensor, attrs: dict) -> torch.Tensor:
    R, E = b.shape
    key = _rank_key(b)
    if spec.grouping_effective(attrs) and R:
        G = attrs["group_count"]
        P = E // G
        order = torch.sort(key.view(R, G, P), dim=-1, descending=True, stable=True).indices
        top = torch.gather(b.view(R, G, P), -1, order[..., :2])
        score = top[..., 0] if attrs["group_select_mode"] == 0 else top[..., 0] + top[..., 1]
        kept = torch.sort(_rank_key(score), dim=-1, descending=True, stable=True).indices
        allowed = torch.zeros(R, G, dtype=torch.bool).scatter_(1, kept[:, : attrs["k_group"]], True)
        key = key.masked_fill(~allowed.repeat_interleave(P, dim=1), float("-inf"))
    return torch.sort(key, dim=-1, descending=True, stable=True).indices[:, : attrs["k"]]


def gating_top_k(x, bias=None, input_ids=None, tid2eid=None, additional_bias=None,
                 additional_token_mask=None, **attributes):
    """Eager CPU implementation of docs/operators.md §1.2 in torch; returns ``(y, expert_idx, out)``."""
    attrs = _attrs(**attributes)
    tensors = {"bias": bias, "input_ids": input_ids, "tid2eid": tid2eid,
               "additional_bias": additional_bias, "additional_token_mask": additional_token_mask}
    _validate(x, tensors, attrs)
    E, k = x.shape[-1], attrs["k"]
    lead = tuple(x.shape[:-1])
    x2 = x.reshape(-1, E).float()
    R = x2.shape[0]
    s = _normalise(x2, attrs["norm_type"])
    mask = None if additional_token_mask is None else additional_token_mask.reshape(R)
    b = s if bias is None else s + bias.float()
    if mask is not None:
        b = torch.where(mask[:, None], s + additional_bias.float(), b)
    idx = _select(b, attrs)
    if tid2eid is not None:
        rows = torch.arange(R) if mask is None else torch.nonzero(~mask).flatten()
        ids = input_ids.reshape(R)[rows].long()
        n = tid2eid.shape[0]
        table_used = tid2eid[ids.clamp(0, max(n - 1, 0))].long() if n else torch.zeros(len(rows), k, dtype=torch.long)
        spec.validate_hash_values(ids.numpy(), rows.numpy(), table_used.numpy(), n, E)
        idx = idx.clone()
        idx[rows] = table_used
    w = torch.gather(s, 1, idx)
    if attrs["norm_type"] != spec.NORM_SOFTMAX or attrs["renorm"] == 1:
        w = w / (w.sum(dim=-1, keepdim=True) + np.float32(attrs["eps"]).item())
    w = w * np.float32(attrs["routed_scaling_factor"]).item()
    out = s.reshape(x.shape) if attrs["out_flag"] else x.new_zeros((0,), dtype=torch.float32)
    return w.to(x.dtype).reshape(*lead, k), idx.to(torch.int32).reshape(*lead, k), out


def _fake(x, k, out_flag, **_ignored):
    lead = tuple(x.shape[:-1])
    out_shape = tuple(x.shape) if out_flag else (0,)
    return (x.new_empty((*lead, k)), x.new_empty((*lead, k), dtype=torch.int32),
            x.new_empty(out_shape, dtype=torch.float32))


def _define_torch_ops() -> None:
    try_import_torch_npu()
    if not op_defined("custom", "npu_moe_gating_top_k"):
        lib = library("custom")
        torch.library.define("custom::npu_moe_gating_top_k", CUSTOM_SCHEMA, lib=lib)

        def custom_cpu(x, k, *, bias=None, input_ids=None, tid2eid=None, additional_bias=None,
                       additional_token_mask=None, **attrs):
            return gating_top_k(x, bias, input_ids, tid2eid, additional_bias, additional_token_mask,
                                k=k, **attrs)

        def custom_fake(x, k, *, out_flag=bool(D["out_flag"]), **_):
            return _fake(x, k, out_flag)

        torch.library.impl("custom::npu_moe_gating_top_k", "cpu", lib=lib)(custom_cpu)
        torch.library.register_fake("custom::npu_moe_gating_top_k", lib=lib)(custom_fake)

    if not op_defined("npu", "npu_moe_gating_top_k"):
        lib = library("npu")
        torch.library.define("npu::npu_moe_gating_top_k", NPU_SCHEMA, lib=lib)

        def npu_cpu(x, k, *, bias=None, **attrs):
            norm_type = attrs.get("norm_type", D["norm_type"])
            if norm_type not in (spec.NORM_SOFTMAX, spec.NORM_SIGMOID):
                raise ValueError(
                    f"{spec.OP_TYPE}: attribute 'norm_type' of torch.ops.npu.npu_moe_gating_top_k "
                    f"must be 0 or 1 (use torch.ops.custom.npu_moe_gating_top_k for 2), got {norm_type}"
                )
            return gating_top_k(x, bias, k=k, **attrs)

        def npu_fake(x, k, *, out_flag=bool(D["out_flag"]), **_):
            return _fake(x, k, out_flag)

        torch.library.impl("npu::npu_moe_gating_top_k", "cpu", lib=lib)(npu_cpu)
        torch.library.register_fake("npu::npu_moe_gating_top_k", lib=lib)(npu_fake)


_define_torch_ops()
