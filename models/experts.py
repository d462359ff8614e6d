"""Routed experts: E SwiGLU experts applied to the rows routed to them, and nothing else (the
torch side; the graph side is ``exporters.experts_graph``).

A block hands its experts one of two layouts:

- ``routed(experts, x, weights, expert_idx, formulation)``: token-major rows ``x`` [T, H] with the
  router's ``weights`` / ``expert_idx`` [T, k]; returns the weighted sum over the k slots [T, H]
  (float32). Used by the routed blocks (models.layers).
- ``segments(experts, x, counts, formulation)``: rows already sorted by expert, ``counts`` [E]
  rows per expert (MoeReRouting's ``expert_token_num``); returns each row through its expert
  [A, H]. Used by the expert-parallel block.

In an export both emit one placeholder node carrying the inputs and attributes, which
``exporters.export`` expands into the chosen formulation (``ort``, ``onnx`` or ``padded``: see
``exporters.experts_graph``). In eager torch both compute the routed rows expert by expert (the
numbers the graph computes, up to summation order). The bfloat16 emulation of models.layers (every
op's result rounded to bfloat16) is kept by ``onnx``; ``ort`` rounds once, at its output.
"""

from __future__ import annotations

from typing import Protocol

import torch
from onnx import TensorProto

from ascend_moe_onnx.exporters.experts_graph import (  # noqa: F401  (re-exported for the blocks)
    DEFAULT,
    DOMAIN,
    FORMULATIONS,
    OP_ROUTED,
    OP_SEGMENTS,
    ExpertsError,
    check,
    using,
)

from .numerics import swiglu

_ONNX_DTYPE = {torch.float32: TensorProto.FLOAT, torch.float16: TensorProto.FLOAT16,
               torch.bfloat16: TensorProto.BFLOAT16}


def ort_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the ``ort`` formulation runs the MoE op in: always float32 (ORT's CPU kernel has no
    bfloat16, and its float16 kernel returns wrong results on ORT 1.23)."""
    return torch.float32


# ---- torch side ----------------------------------------------------------------------------------

class SharedWeights(Protocol):
    """A shared expert's SwiGLU weights: gate / up [S, H], down [H, S]."""

    @property
    def gate_proj(self) -> torch.Tensor: ...

    @property
    def up_proj(self) -> torch.Tensor: ...

    @property
    def down_proj(self) -> torch.Tensor: ...


class ExpertWeights(SharedWeights, Protocol):
    """The routed experts as the formulations read them (models.layers.GroupedExperts, or a view of
    an HF experts module's weights): gate / up [E, I, H], down [E, H, I] and the block's numerics."""

    @property
    def num_experts(self) -> int: ...

    @property
    def dtype(self) -> torch.dtype: ...

    @property
    def limit(self) -> float: ...

    @property
    def act_fp32(self) -> bool: ...


def expert_biases(experts: ExpertWeights) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor] | None:
    """The experts' biases (gate [E, I], up [E, I], down [E, H]) where they have them (gpt-oss:
    ``gate_bias`` / ``up_bias`` / ``down_bias`` beside the weights), else None."""
    biases = tuple(getattr(experts, n, None) for n in ("gate_bias", "up_bias", "down_bias"))
    if all(b is None for b in biases):
        return None
    if any(b is None for b in biases):
        raise ExpertsError("experts: gate_bias, up_bias and down_bias go together (a zero bias where one has none)")
    return biases  # type: ignore[return-value]  # all three are tensors here


def glu_constants(experts: ExpertWeights) -> tuple[float, float]:
    """The activation's (alpha, beta): g sigmoid(alpha g) (u + beta); (1, 0) is SiLU (the default)."""
    return float(getattr(experts, "alpha", 1.0)), float(getattr(experts, "beta", 0.0))


def _attributes(experts: ExpertWeights, formulation: str) -> dict:
    attrs = {"formulation": formulation, "limit": float(experts.limit), "act_fp32": int(experts.act_fp32),
             "dtype": _ONNX_DTYPE[experts.dtype], "experts": int(experts.gate_proj.shape[0])}
    alpha, beta = glu_constants(experts)
    if (alpha, beta) != (1.0, 0.0):  # only where set: every other block's nodes stay as they were
        attrs.update(alpha=alpha, beta=beta)
    return attrs


def _rows_through_experts(experts: ExpertWeights, x: torch.Tensor, expert: torch.Tensor,
                          formulation: str) -> torch.Tensor:
    """Eager: row ``p`` of ``x`` through expert ``expert[p]``, one matmul chain per active expert
    (``ort``: in float32 like the MoE op, float32 result; else in the block's numerics and dtype,
    models.numerics.swiglu)."""
    ort = formulation == "ort"
    dtype = ort_dtype(experts.dtype) if ort else experts.dtype
    rows = x.float() if ort else x
    y = rows.new_empty(rows.shape)
    order = torch.argsort(expert, stable=True)
    counts = torch.bincount(expert, minlength=experts.num_experts).tolist()
    biases = expert_biases(experts)
    alpha, beta = glu_constants(experts)
    start = 0
    for e, n in enumerate(counts):
        if n:
            sel = order[start:start + n]
            bias = None if biases is None else tuple(b[e].to(dtype) for b in biases)
            y[sel] = swiglu(rows[sel], experts.gate_proj[e], experts.up_proj[e], experts.down_proj[e], dtype,
                            experts.limit, experts.act_fp32, bias, alpha, beta)
            start += n
    return y


def folds_shared(formulation: str) -> bool:
    """Whether ``formulation`` runs a block's shared expert(s) inside its own call (``routed(...,
    shared=)``): ``ort`` does, as more experts of the same call, one slot of weight 1 per token each,
    so their weights are read by the same kernel as the routed experts'. The others leave the shared
    expert to the block."""
    return formulation == "ort"


def shared_slices(experts: ExpertWeights, shared: SharedWeights) -> int:
    """How many expert-wide SwiGLUs the shared expert(s) ``shared`` (gate [S, H]) split into: a
    SwiGLU of width S = s * I is the sum of s SwiGLUs of width I (its intermediate rows in order)."""
    S, I = int(shared.gate_proj.shape[0]), int(experts.gate_proj.shape[1])
    if S % I:
        raise ExpertsError(f"experts: shared expert width {S} is not a multiple of the expert width {I}")
    return S // I


def routed(experts: ExpertWeights, x: torch.Tensor, weights: torch.Tensor, expert_idx: torch.Tensor,
           formulation: str, shared: SharedWeights | None = None) -> torch.Tensor:
    """Weighted sum over the k slots of each token's experts: ``x`` [T, H] (compute dtype),
    ``weights`` / ``expert_idx`` [T, k] -> [T, H] float32 (``padded`` is handled by the caller).

    ``shared``: the block's shared expert (``gate_proj`` [S, H], ``up_proj`` [S, H], ``down_proj``
    [H, S]; same clamp as the experts), added to every row; only where ``folds_shared(formulation)``."""
    check(formulation)
    if shared is not None and not folds_shared(formulation):
        raise ExpertsError(f"experts: the '{formulation}' formulation does not run the shared expert")
    biases = expert_biases(experts)
    if biases is not None and shared is not None:
        raise ExpertsError("experts: experts with biases do not run a shared expert in their call")
    extra = [shared.gate_proj, shared.up_proj, shared.down_proj] if shared is not None else []
    # the shared expert's slots: experts E .. E+s-1 (sizes known here, not always in the graph)
    slots = {"shared_slices": shared_slices(experts, shared)} if shared is not None else {}
    if biases is not None:  # the placeholder's inputs after down: gate_bias, up_bias, down_bias
        extra, slots = list(biases), {"biased": 1}
    if torch.onnx.is_in_onnx_export():
        y = torch.onnx.ops.symbolic(
            f"{DOMAIN}::{OP_ROUTED}", [x, weights, expert_idx, experts.gate_proj, experts.up_proj,
                                       experts.down_proj, *extra],
            {**_attributes(experts, formulation), "k": int(expert_idx.shape[1]), **slots},
            dtype=torch.float32, shape=x.shape, version=1)
        return y
    T, k = expert_idx.shape
    flat = expert_idx.reshape(-1).to(torch.int64)
    rows = x[torch.arange(T * k) // k]
    y = _rows_through_experts(experts, rows, flat, formulation)
    out = (y.float().reshape(T, k, x.shape[-1]) * weights.float().reshape(T, k, 1)).sum(1)
    if shared is not None:  # in float32, as the kernel runs it
            out = out + swiglu(x.float(), shared.gate_proj, shared.up_proj, shared.down_proj,
                               ort_dtype(experts.dtype), experts.limit, experts.act_fp32).float()
    return out


def segments(experts: ExpertWeights, x: torch.Tensor, counts: torch.Tensor, formulation: str) -> torch.Tensor:
    """Rows sorted by expert (``counts`` [E] rows each) through their expert -> [A, H], x's dtype."""
    check(formulation)
    if expert_biases(experts) is not None:
        raise ExpertsError("experts: the expert-parallel segments take no expert biases")
    if torch.onnx.is_in_onnx_export():
        return torch.onnx.ops.symbolic(
            f"{DOMAIN}::{OP_SEGMENTS}", [x, counts, experts.gate_proj, experts.up_proj, experts.down_proj],
            _attributes(experts, formulation), dtype=x.dtype, shape=x.shape, version=1)
    expert = torch.repeat_interleave(torch.arange(counts.shape[0]), counts.to(torch.int64))
    return _rows_through_experts(experts, x, expert, formulation).to(x.dtype)
