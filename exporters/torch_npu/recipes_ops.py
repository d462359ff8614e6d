"""cann-recipes-infer's own torch extension ops the MoE layers call beside torch_npu's
(``torch.ops.custom.*``, its ``ops/ascendc/torch_ops_extension``): ``npu_swiglu_group_quant``, with
the schema of its ``custom_ops/csrc/ops_def_registration.cpp`` and the semantics of its
``ops/ascendc/docs/custom-npu_swiglu_group_quant.md`` and example golden.

CompositeImplicitAutograd front ends written in torch (standard ONNX when exported), defined only
where the recipes' library does not define them.
"""

from __future__ import annotations

import torch

from .._torch_lib import library, op_defined
from ._args import require, unsupported
from .mx_quant import E4M3, E5M2
from .routing_quant import AMAX_FLOOR, _as_e8m0, mxfp8_round_scale

NAMESPACE = "custom"
SWIGLU_GROUP_QUANT_SCHEMA = ("(Tensor x, *, Tensor? weight=None, Tensor? group_index=None, ScalarType dst_type, "
                             "int quant_mode=0, int block_size=0, bool round_scale=False, float? clamp_limit=None, "
                             "bool output_origin=False) -> (Tensor, Tensor, Tensor)")
_FORMATS = {torch.float8_e4m3fn: E4M3, torch.float8_e5m2: E5M2}
BLOCK_FP8 = 128


def npu_swiglu_group_quant(x, *, weight=None, group_index=None, dst_type, quant_mode=0, block_size=0,
                           round_scale=False, clamp_limit=None, output_origin=False):
    """custom.npu_swiglu_group_quant: ``(y, scale, y_origin)``.

    ``A, B`` the halves of the last axis ``D`` (``H = D / 2``); with ``clamp_limit``:
    ``A = min(A, limit)``, ``B = clamp(B, -limit, limit)``; ``Y = Swish(A) · B`` in float32, times
    ``weight`` per token when given. ``quant_mode=0`` (block FP8): per block of 128 along H
    ``scale = max|Y| / DTYPE_MAX`` (float32 ``[..., ceil(H / 128)]``), ``y = cast(Y / scale)``;
    ``quant_mode=1`` (MX FP8, ``round_scale=True``): per block of 32 ``e = ceil(log2(max(max|Y|, 1e-4) /
    DTYPE_MAX))``, ``y = cast(Y / 2^e)``, float8_e8m0 scales ``[..., ceil(ceil(H / 32) / 2), 2]``.
    ``y_origin``: ``Y`` in x's dtype with ``output_origin`` in mode 1, else zeros (left unwritten).
    ``group_index`` (int64 counts [G]): rows past their total are computed from zero rows (the
    operator leaves them undefined).
    """
    fn = "custom.npu_swiglu_group_quant"
    require(isinstance(x, torch.Tensor) and x.dtype in (torch.float16, torch.bfloat16) and x.dim() >= 1, fn, "x",
            "must be a float16 or bfloat16 tensor", x)
    require(x.shape[-1] >= 256 and x.shape[-1] % 256 == 0, fn, "x", "must have a last dim D >= 256 divisible by 256",
            x)
    if dst_type not in _FORMATS:
        if dst_type == getattr(torch, "float4_e2m1fn_x2", None):
            unsupported(fn, "dst_type", dst_type, "the MX FP4 outputs are not exported here; no MoE path quantises "
                        "its SwiGLU to float4 through this op")
        require(False, fn, "dst_type", "must be torch.float8_e4m3fn or torch.float8_e5m2", dst_type)
    fmt = _FORMATS[dst_type]
    require(quant_mode in (0, 1), fn, "quant_mode", "must be 0 (block FP8) or 1 (MX FP8)", quant_mode)
    require(block_size in ((0, BLOCK_FP8) if quant_mode == 0 else (0, 32)), fn, "block_size",
            lambda: f"must be 0 or {BLOCK_FP8 if quant_mode == 0 else 32} with quant_mode {quant_mode}", block_size)
    require(round_scale == (quant_mode == 1), fn, "round_scale",
            lambda: f"must be {quant_mode == 1} with quant_mode {quant_mode}", round_scale)
    require(clamp_limit is None or clamp_limit >= 0, fn, "clamp_limit", "must be None or a number >= 0 (not NaN)",
            clamp_limit)
    d = x.shape[-1]
    lead = x.shape[:-1]
    rows = x.reshape(-1, d).float()
    a, b = rows[:, : d // 2], rows[:, d // 2:]
    if clamp_limit is not None:
        a = a.clamp(max=clamp_limit)
        b = b.clamp(-clamp_limit, clamp_limit)
    y = torch.nn.functional.silu(a) * b
    if weight is not None:
        require(isinstance(weight, torch.Tensor) and weight.dtype == torch.float32 and weight.numel() == rows.shape[0],
                fn, "weight", lambda: f"must be float32 with one value per token ({rows.shape[0]})", weight)
        y = y * weight.reshape(-1, 1)
    if group_index is not None:
        require(isinstance(group_index, torch.Tensor) and group_index.dim() == 1 and group_index.dtype == torch.int64,
                fn, "group_index", "must be 1-D int64 counts [G]", group_index)
        positions = torch.arange(rows.shape[0], dtype=torch.int64, device=x.device)
        y = torch.where((positions < group_index.sum())[:, None], y, torch.zeros_like(y))
    h = d // 2
    if quant_mode == 1:
        q, bits = mxfp8_round_scale(y, fmt, AMAX_FLOOR)
        scale = _as_e8m0(bits.reshape(*lead, -1, 2))
    else:
        blocks = y.reshape(-1, h // BLOCK_FP8, BLOCK_FP8)
        s = blocks.abs().amax(dim=-1) / fmt.max_value
        safe = torch.where(s > 0, s, torch.ones_like(s))
        q = (blocks / safe[..., None]).reshape(-1, h).clamp(-fmt.max_value, fmt.max_value).to(fmt.torch_dtype)
        scale = s.reshape(*lead, -1)
    origin = y.to(x.dtype) if (output_origin and quant_mode == 1) else torch.zeros_like(y, dtype=x.dtype)
    return q.reshape(*lead, h), scale, origin.reshape(*lead, h)


def define_ops() -> None:
    """Define the ops unless the recipes' custom_ops library already did (idempotent)."""
    lib = library(NAMESPACE)
    for name, schema, fn in (("npu_swiglu_group_quant", SWIGLU_GROUP_QUANT_SCHEMA, npu_swiglu_group_quant),):
        if op_defined(NAMESPACE, name):
            continue
        lib.define(name + schema)
        lib.impl(name, fn, "CompositeImplicitAutograd")


__all__ = ["define_ops", "npu_swiglu_group_quant"]
