"""npu_grouped_matmul's MX form (A8W4 MXFP4, Ascend 950): float8 ``x`` with e8m0 scales per block of
32 values along K (``per_token_scale`` ``[M, ceil(K / 64), 2]``, ``per_token_scale_dtype`` =
``torch_npu.float8_e8m0fnu`` or a float8_e8m0fnu tensor), float4_e2m1 weights two a byte
(``weight_dtype=torch_npu.float4_e2m1fn_x2``) with e8m0 scales per block of 32 along K
(``antiquant_scale``, uint8 read as FLOAT8_E8M0 by op-plugin, or ``scale`` with
``scale_dtype=torch_npu.float8_e8m0fnu``).

The weight is passed as the MX checkpoints store it and the recipes pass it: the transpose of a
``[E, N, K / 2]`` byte tensor (two K values a byte, the even one in the low nibble), its scale the
transpose of ``[E, N, ceil(K / 64), 2]``. Each operand is its MX value (element times
``2^(e - 127)``, :func:`.mx_quant.mx_dequantize`), the products are accumulated in float32 and
rounded once to ``output_dtype``. Exported as standard ONNX (the dequantisation: Cast, Mod, Div,
Gather, Pow, Mul) and one float32 GroupedMatmul node.
"""

from __future__ import annotations

import torch

from . import _ops
from ._args import describe, require, single_tensor
from .mx_quant import E2M1, E4M3, E5M2, FLOAT4_E2M1, FLOAT8_E8M0, mx_dequantize

FN = "npu_grouped_matmul"
MX_BLOCK = 32
MX_X_DTYPES = {torch.float8_e4m3fn: E4M3, torch.float8_e5m2: E5M2}
_E8M0_TENSORS = (torch.uint8, torch.float8_e8m0fnu)
_OUTPUTS = (torch.bfloat16, torch.float16, torch.float32)


def is_mx(x: torch.Tensor, weight_dtype) -> bool:
    """Whether a call takes the MX form: float8 x, or float4_e2m1 weights named by ``weight_dtype``."""
    return x.dtype in MX_X_DTYPES or weight_dtype == FLOAT4_E2M1


def _e8m0_arg(name: str, t, dtype_name: str, dtype_value) -> torch.Tensor:
    t = single_tensor(FN, name, t)
    require(t.dtype in _E8M0_TENSORS, FN, name, "must be uint8 or float8_e8m0fnu (e8m0 block scales)", t)
    require(dtype_value in (None, FLOAT8_E8M0), FN, dtype_name,
            "must be None or torch_npu.float8_e8m0fnu (293) in the MX form", dtype_value)
    return t


def mx_a8w4(x, w, *, scale, antiquant_scale, per_token_scale, counts, group_list_type, output_dtype, x_dtype,
            weight_dtype, scale_dtype, per_token_scale_dtype) -> torch.Tensor:
    """``y[r] = Σ_k x̂[r, k] · ŵ[e(r), k, :]`` (MX values, float32 sums) as ``output_dtype``; rows past
    the last group are 0. ``counts`` / ``group_list_type`` as the GroupedMatmul node takes them."""
    require(x.dtype in MX_X_DTYPES and x_dtype is None, FN, "x",
            "must be float8_e4m3fn or float8_e5m2 (x_dtype None) with float4_e2m1fn_x2 weights (MX A8W4)",
            x if x_dtype is None else x_dtype)
    require(weight_dtype == FLOAT4_E2M1 or w.dtype == getattr(torch, "float4_e2m1fn_x2", None), FN, "weight_dtype",
            "must be torch_npu.float4_e2m1fn_x2 (296) with float8 x (MX A8W4)", weight_dtype)
    require(w.element_size() == 1 and w.dtype != torch.bool, FN, "weight",
            "must hold float4_e2m1 pairs in bytes (uint8 [E, K/2, N]) in the MX form", w)
    if w.dtype != torch.uint8:  # the same bytes (int8, float4_e2m1fn_x2, an NZ cast's float8)
        w = w.view(torch.uint8)
    k = x.shape[1]
    experts, n = w.shape[0], w.shape[2]
    require(_ops.transposed_view(w) and 2 * w.shape[1] == k, FN, "weight",
            lambda: f"must be the transpose of a [E, N, {k // 2}] byte tensor (two K values a byte, "
            f"w.transpose(1, 2)) with K = {k}", w)
    require(output_dtype in _OUTPUTS, FN, "output_dtype", "must be bfloat16, float16 or float32 in the MX form",
            output_dtype)
    require((scale is None) != (antiquant_scale is None), FN, "antiquant_scale",
            "or 'scale' (exactly one) must hold the weights' e8m0 block scales in the MX form",
            f"scale={describe(scale)}, antiquant_scale={describe(antiquant_scale)}")
    if antiquant_scale is not None:
        require(scale_dtype is None, FN, "scale_dtype", "must be None when the scales are antiquant_scale",
                scale_dtype)
        w_scale = _e8m0_arg("antiquant_scale", antiquant_scale, "scale_dtype", None)
        w_name = "antiquant_scale"
    else:
        w_scale = _e8m0_arg("scale", scale, "scale_dtype", scale_dtype)
        w_name = "scale"
    t = _e8m0_arg("per_token_scale", per_token_scale, "per_token_scale_dtype", per_token_scale_dtype)
    pairs = (-(-k // MX_BLOCK) + 1) // 2  # ceil(ceil(K / 32) / 2)
    require(tuple(w_scale.shape) == (experts, pairs, n, 2), FN, w_name,
            lambda: f"must be [{experts}, {pairs}, {n}, 2] (the transpose of [E, N, ceil(K / 64), 2]) in the "
            "MX form", w_scale)
    require(t.dim() == 3 and t.shape[1] == pairs and t.shape[2] == 2 and t.shape[0] == x.shape[0], FN,
            "per_token_scale", lambda: f"must be [{x.shape[0]}, {pairs}, 2] (x's e8m0 scales) in the MX form", t)
    x_values = mx_dequantize(x, t, MX_X_DTYPES[x.dtype], MX_BLOCK)                        # [M, K]
    w_values = mx_dequantize(w.transpose(1, 2), w_scale.transpose(1, 2), E2M1, MX_BLOCK)  # [E, N, K]
    y = _ops.grouped_matmul(x_values, w_values.transpose(1, 2), None, counts, group_list_type)
    return y.to(output_dtype)


__all__ = ["is_mx", "mx_a8w4"]
