"""Torch op for MoeReRouting (docs/operators.md §2): ``torch.ops.npu.npu_moe_re_routing``.

Defined by :func:`define_torch_ops` (called by ``exporters.define_torch_ops``) unless torch_npu
already defines it: the implementation is the NumPy reference (onnx_schemas) on any device, the
fake kernel validates like it; the export side (moe_re_routing_onnx) is added in every case.
``torch.library.custom_op`` cannot declare keyword-only tensor arguments (torch 2.13: "custom_op
with kwarg-only Tensor args"), so the op is defined from torch_npu's exact schema with
``torch.library.define`` / ``impl`` / ``register_fake``.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec

from . import registry
from ._torch_lib import define_op, from_numpy, schema_default, static_described, to_numpy

D = spec.DEFAULTS
ATTR_ORDER = ("expert_token_num_type", "idx_type")

SCHEMA = (
    "(Tensor tokens, Tensor expert_token_num_per_rank, *, Tensor? per_token_scales=None, "
    + ", ".join(f"int {a}={schema_default(D[a])}" for a in ATTR_ORDER)
    + ") -> (Tensor permute_tokens, Tensor permute_per_token_scales, Tensor permute_token_idx, "
    "Tensor expert_token_num)"
)


def _attrs(expert_token_num_type=D["expert_token_num_type"], idx_type=D["idx_type"]) -> dict:
    return {"expert_token_num_type": int(expert_token_num_type), "idx_type": int(idx_type)}


def _validate(tokens, counts, scales, attrs) -> None:
    spec.validate_inputs(static_described(tokens), static_described(counts),
                         static_described(scales), attrs)


def re_routing(tokens, expert_token_num_per_rank, per_token_scales=None, **attributes):
    """docs/operators.md §2.2 through the NumPy reference, on any device; returns the 4 outputs."""
    outs = spec.reference(to_numpy(tokens), to_numpy(expert_token_num_per_rank),
                          to_numpy(per_token_scales), **_attrs(**attributes))
    return tuple(from_numpy(o, tokens.device) for o in outs)


def _fake(tokens, counts, per_token_scales=None, **attributes):
    _validate(tokens, counts, per_token_scales, _attrs(**attributes))
    if per_token_scales is None:
        scales = tokens.new_empty((0,), dtype=torch.float32)
    else:
        scales = per_token_scales.new_empty(per_token_scales.shape)
    return (tokens.new_empty(tokens.shape), scales,
            tokens.new_empty((tokens.shape[0],), dtype=torch.int32),
            counts.new_empty((counts.shape[1],)))


@registry.torch_ops
def define_torch_ops() -> None:
    """Define torch.ops.npu.npu_moe_re_routing unless torch_npu already does."""
    def impl(tokens, expert_token_num_per_rank, *, per_token_scales=None, **attrs):
        return re_routing(tokens, expert_token_num_per_rank, per_token_scales, **attrs)

    def fake(tokens, expert_token_num_per_rank, *, per_token_scales=None, **attrs):
        return _fake(tokens, expert_token_num_per_rank, per_token_scales, **attrs)

    define_op("npu::npu_moe_re_routing", SCHEMA, impl, fake)
