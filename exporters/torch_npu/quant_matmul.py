"""torch_npu.npu_quant_matmul's MX full-quantisation form (aclnnQuantMatmulV5, hicann ops-nn
``matmul/quant_batch_matmul_v4``; Ascend 950): float8 ``x1`` ``[M, K]`` and ``x2`` ``[K, N]`` with e8m0
scales per block of 32 along K (``pertoken_scale`` ``[M, ceil(K / 64), 2]``, ``scale``
``[ceil(K / 64), N, 2]``, ``group_sizes`` ``[1, 1, 32]``), as the recipes' ``MxFp8LinearMethod`` calls it.

``out[m, n] = Σ_j (Σ_{k in block j} x1[m, k] · x2[k, n]) · 2^(s1[m, j] - 127) · 2^(s2[j, n] - 127) + bias[n]``:
each operand its MX value (:func:`.mx_quant.mx_dequantize`), float32 sums rounded once to
``output_dtype``. The int8 / int4 / per-tensor forms have no MoE path here and are refused, named.
Exported as standard ONNX (the dequantisation, MatMul, Add, Cast).
"""

from __future__ import annotations

import torch

from ._args import require, unsupported
from .grouped_matmul_mx import MX_X_DTYPES
from .mx_quant import FLOAT8_E8M0, mx_dequantize

FN = "npu_quant_matmul"
_E8M0_TENSORS = (torch.uint8, torch.float8_e8m0fnu)
_OUTPUTS = (torch.bfloat16, torch.float16, torch.float32)


def _e8m0(name: str, t, dtype_name: str, dtype_value, shape: tuple) -> torch.Tensor:
    require(isinstance(t, torch.Tensor) and t.dtype in _E8M0_TENSORS, FN, name,
            "must be uint8 or float8_e8m0fnu e8m0 block scales in the MX form", t)
    require(dtype_value in (None, FLOAT8_E8M0), FN, dtype_name,
            "must be None or torch_npu.float8_e8m0fnu (293) in the MX form", dtype_value)
    require(tuple(t.shape) == shape, FN, name, lambda: f"must be {list(shape)} (blocks of 32 along K, in pairs)", t)
    return t.view(torch.uint8) if t.dtype == torch.float8_e8m0fnu else t


def npu_quant_matmul(x1, x2, scale, *, offset=None, pertoken_scale=None, bias=None, output_dtype=None, x1_dtype=None,
                     x2_dtype=None, pertoken_scale_dtype=None, scale_dtype=None, group_sizes=None, y_scale=None):
    """torch_npu.npu_quant_matmul, MX form (module docstring): ``[M, N]`` in ``output_dtype``."""
    require(isinstance(x1, torch.Tensor) and isinstance(x2, torch.Tensor), FN, "x1", "must be a tensor", x1)
    if x1.dtype not in MX_X_DTYPES:
        unsupported(FN, "x1", x1, "only the MX form (float8 x1 / x2 with float8_e8m0 scales, Ascend 950) exports "
                    "here; no MoE path here takes the int8 / int4 forms")
    require(x2.dtype in MX_X_DTYPES, FN, "x2", "must be float8_e4m3fn or float8_e5m2 with float8 x1 (MX)", x2)
    require(x1_dtype is None and x2_dtype is None, FN, "x1_dtype" if x1_dtype is not None else "x2_dtype",
            "must be None for float8 tensors (their dtype names them)", x1_dtype if x1_dtype is not None else x2_dtype)
    require(x1.dim() == 2 and x2.dim() == 2 and x1.shape[1] == x2.shape[0], FN, "x2",
            lambda: f"must be [K, N] with x1 [M, K] = {list(x1.shape)} (2-D MX form)", x2)
    for name, value in (("offset", offset), ("y_scale", y_scale)):
        require(value is None, FN, name, "must be None in the MX form", value)
    require(group_sizes is None or (len(group_sizes) == 3 and group_sizes[0] in (0, 1) and group_sizes[1] in (0, 1)
                                    and group_sizes[2] == 32), FN, "group_sizes",
            "must be [1, 1, 32] (or its inferred form [0, 0, 32]) in the MX form", group_sizes)
    out_dtype = torch.int8 if output_dtype is None else output_dtype
    require(out_dtype in _OUTPUTS, FN, "output_dtype", "must be bfloat16, float16 or float32 in the MX form",
            output_dtype)
    m, k = x1.shape
    n = x2.shape[1]
    blocks = -(-k // 64)
    require(pertoken_scale is not None, FN, "pertoken_scale", "must be given in the MX form (x1's e8m0 scales)",
            pertoken_scale)
    s1 = _e8m0("pertoken_scale", pertoken_scale, "pertoken_scale_dtype", pertoken_scale_dtype, (m, blocks, 2))
    s2 = _e8m0("scale", scale, "scale_dtype", scale_dtype, (blocks, n, 2))
    if bias is not None:
        require(isinstance(bias, torch.Tensor) and bias.dtype == torch.float32 and tuple(bias.shape) == (n,), FN,
                "bias", lambda: f"must be float32 [{n}] in the MX form", bias)
    a = mx_dequantize(x1, s1, MX_X_DTYPES[x1.dtype])
    b = mx_dequantize(x2.transpose(0, 1), s2.transpose(0, 1), MX_X_DTYPES[x2.dtype])   # [N, K]
    out = a @ b.transpose(0, 1)
    if bias is not None:
        out = out + bias
    return out.to(out_dtype)


__all__ = ["npu_quant_matmul"]
