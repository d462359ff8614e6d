"""npu_grouped_matmul's FP8 form (Ascend 950): float8 ``x`` with float8 weights, dequantised per channel.

As Ascend's GroupedMatmul states its quantised arithmetic (ops-transformer ``gmm/grouped_matmul``):
``y[r] = (x[r] @ W[e(r)]) · scale[e(r)]`` and, with ``per_token_scale``, ``· per_token_scale[r]``.
``x`` is float8_e4m3fn or float8_e5m2 ``[M, K]``; the weight float8 ``[E, K, N]`` (``[W]`` or E
``[K, N]``); ``scale`` one tensor ``[E, N]`` of float32 / bfloat16 scales or the int64 parameters of
npu_trans_quant_param (float32 bits in bits 0-31); ``per_token_scale`` one float32 ``[M]``;
``output_dtype`` float32, float16 or bfloat16. Every float8 value is exact in float32, the products
are summed in float32, scaled and rounded once to ``output_dtype``. Rows past the last group are 0.

Exported as standard ONNX (Cast from FLOAT8, Gather, Mul, Where) and one float32 GroupedMatmul node.
"""

from __future__ import annotations

import torch

from . import _ops
from ._args import per_expert_rows, require, single_tensor
from .quant_param import quant_param_scale

FN = "npu_grouped_matmul"
FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_SCALES = (torch.float32, torch.bfloat16, torch.int64)
_OUTPUTS = (torch.float32, torch.float16, torch.bfloat16)


def is_fp8(x: torch.Tensor, w: torch.Tensor, weight_dtype) -> bool:
    """Whether a call takes the FP8 form: float8 x and float8 weights (no ``weight_dtype`` renaming them)."""
    return x.dtype in FLOAT8 and w.dtype in FLOAT8 and weight_dtype is None


def fp8_grouped_matmul(x, w, *, bias, scale, per_token_scale, counts, group_list_type, row_experts,
                       output_dtype) -> torch.Tensor:
    """``y`` ``[M, N]`` of the FP8 form; ``counts`` / ``group_list_type`` as the GroupedMatmul node takes
    them, ``row_experts(counts, group_list_type, rows, experts)`` the expert of each row and whether
    the row lies inside the groups."""
    experts, k, n = w.shape
    require(k == x.shape[1], FN, "weight", lambda: f"must have K = {x.shape[1]} rows per expert", w)
    require(bias is None, FN, "bias", "must be None for float8 x with float8 weights (FP8 quantised form)", bias)
    require(output_dtype in _OUTPUTS, FN, "output_dtype",
            "must be float32, float16 or bfloat16 for float8 x with float8 weights", output_dtype)
    require(scale is not None, FN, "scale",
            lambda: f"is required for float8 x with float8 weights: [[{experts}, {n}]] per-channel scales", None)
    s = per_expert_rows(FN, "scale", scale, experts)
    require(s.dtype in _SCALES and tuple(s.shape) == (experts, n), FN, "scale",
            lambda: f"must be [[{experts}, {n}]] float32, bfloat16 or int64 (npu_trans_quant_param) for float8 x",
            scale)
    s = quant_param_scale(s) if s.dtype == torch.int64 else s.to(torch.float32)
    t = None if per_token_scale is None else single_tensor(FN, "per_token_scale", per_token_scale)
    require(t is None or (t.dtype == torch.float32 and t.dim() == 1 and t.shape[0] == x.shape[0]), FN,
            "per_token_scale", lambda: f"must be float32 [[{x.shape[0]}]] (one per row of x)", t)
    sums = _ops.grouped_matmul(x.to(torch.float32), w.to(torch.float32), None, counts, group_list_type)
    expert, inside = row_experts(counts, group_list_type, x.shape[0], experts)
    y = sums * s[expert]
    if t is not None:
        y = y * t.reshape(-1, 1)
    y = torch.where(inside[:, None], y, torch.zeros_like(y))
    return y.to(output_dtype)


__all__ = ["fp8_grouped_matmul", "is_fp8"]
