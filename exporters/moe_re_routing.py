"""Torch op for MoeReRouting (docs/operators.md §2): ``torch.ops.npu.npu_moe_re_routing``.

Defined here with a CPU implementation and a fake kernel unless torch_npu already defines it; the
export side (moe_re_routing_onnx) is added in every case. ``torch.library.custom_op`` cannot
declare keyword-only tensor arguments (torch 2.13: "custom_op with kwarg-only Tensor args"), so the
op is defined from torch_npu's exact schema with ``torch.library.define`` / ``impl`` /
``register_fake``.
"""

from __future__ import annotations

import torch

from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec

from ._torch_lib import described, library, op_defined, schema_default, try_import_torch_npu

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


def _static(desc):
    """``(shape, type)`` with symbolic dims replaced by None (the validators skip unknown dims)."""
    if desc is None:
        return None
    shape, dtype = desc
    return tuple(d if isinstance(d, int) else None for d in shape), dtype


def _validate(tokens, counts, scales, attrs) -> None:
    spec.validate_inputs(_static(described(tokens)), _static(described(counts)),
                         _static(described(scales)), attrs)


def _take_rows(t: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """``t[rows]`` bit for bit, for every element type (rows are moved as bytes)."""
    tail = tuple(t.shape[1:])
    width = 1
    for d in tail:
        width *= d
    if t.numel() == 0:  # nothing to move (and empty tensors may carry zero strides)
        return t.new_empty((rows.numel(), *tail))
    raw = t.contiguous().view(-1).view(torch.uint8)  # 1-D views keep stride 1 for any shape
    data = raw.reshape(t.shape[0], width * t.element_size()).index_select(0, rows)
    return data.reshape(-1).view(t.dtype).reshape(rows.numel(), *tail)


def gather_index(counts: torch.Tensor) -> torch.Tensor:
    """int64 ``g`` [A] with ``permute_tokens = tokens[g]`` (docs/operators.md §2.2), counts already validated."""
    c = counts.to(torch.int64)
    flat = c.reshape(-1)
    src = (torch.cumsum(flat, 0) - flat).reshape(c.shape).t().reshape(-1)  # destination order
    cnt = c.t().reshape(-1)
    dst = torch.cumsum(cnt, 0) - cnt
    return torch.repeat_interleave(src - dst, cnt) + torch.arange(int(cnt.sum()), dtype=torch.int64)


def re_routing(tokens, expert_token_num_per_rank, per_token_scales=None, **attributes):
    """Eager CPU implementation of docs/operators.md §2.2; returns the 4 outputs."""
    attrs = _attrs(**attributes)
    counts = expert_token_num_per_rank
    _validate(tokens, counts, per_token_scales, attrs)
    A = tokens.shape[0]
    spec.validate_counts(counts.detach().cpu().numpy(), A)
    g = gather_index(counts.cpu()).to(tokens.device)
    permute_tokens = _take_rows(tokens, g)
    if per_token_scales is None:
        permute_scales = tokens.new_zeros((0,), dtype=torch.float32)
    else:
        permute_scales = _take_rows(per_token_scales, g)
    if attrs["idx_type"] == spec.GATHER:
        idx = g.to(torch.int32)
    else:
        idx = torch.empty(A, dtype=torch.int32, device=tokens.device)
        idx[g] = torch.arange(A, dtype=torch.int32, device=tokens.device)
    per_expert = counts.to(torch.int64).sum(dim=0)
    if attrs["expert_token_num_type"] == spec.CUMSUM:
        per_expert = torch.cumsum(per_expert, 0)
    return permute_tokens, permute_scales, idx, per_expert.to(counts.dtype)


def _fake(tokens, counts, per_token_scales=None, **attributes):
    _validate(tokens, counts, per_token_scales, _attrs(**attributes))
    if per_token_scales is None:
        scales = tokens.new_empty((0,), dtype=torch.float32)
    else:
        scales = per_token_scales.new_empty(per_token_scales.shape)
    return (tokens.new_empty(tokens.shape), scales,
            tokens.new_empty((tokens.shape[0],), dtype=torch.int32),
            counts.new_empty((counts.shape[1],)))


def _define_torch_ops() -> None:
    try_import_torch_npu()
    if op_defined("npu", "npu_moe_re_routing"):
        return
    lib = library("npu")
    torch.library.define("npu::npu_moe_re_routing", SCHEMA, lib=lib)

    def cpu(tokens, expert_token_num_per_rank, *, per_token_scales=None, **attrs):
        return re_routing(tokens, expert_token_num_per_rank, per_token_scales, **attrs)

    def fake(tokens, expert_token_num_per_rank, *, per_token_scales=None, **attrs):
        return _fake(tokens, expert_token_num_per_rank, per_token_scales, **attrs)

    torch.library.impl("npu::npu_moe_re_routing", "cpu", lib=lib)(cpu)
    torch.library.register_fake("npu::npu_moe_re_routing", lib=lib)(fake)


_define_torch_ops()
