"""torch_npu's gated activations beside npu_swiglu: ``npu_geglu`` (aclnnGeGluV3) and
``npu_swiglu_clip_quant`` (cann-recipes-infer's SwigluClipQuant, called as torch_npu's), and the
RMS norm the MoE routers around them call (``npu_rms_norm``, aclnnRmsNorm).

All are written in torch and export as standard ONNX (Split, Gelu / Tanh / Erf, Sigmoid, Mul,
ReduceMean, Sqrt, then the dynamic-quantisation steps of ``quant.py``).
"""

from __future__ import annotations

import torch

from ._args import require
from .quant import INT8_MAX, row_groups


def npu_geglu(self, dim=-1, approximate=1, activate_left=False):
    """torch_npu.npu_geglu: ``(out, gelu)`` with ``A, B = self.chunk(2, dim)``;
    ``activate_left``: ``gelu = GELU(A)``, ``out = gelu · B``; else ``gelu = GELU(B)``, ``out = A · gelu``.

    ``approximate`` 1 is the tanh GELU, 0 the erf one; computed in float32, returned in self's dtype.
    """
    fn = "npu_geglu"
    x = self
    require(isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.float16, torch.bfloat16), fn, "self",
            "must be a float32, float16 or bfloat16 tensor", x)
    dims = max(x.dim(), 1)
    require(-dims <= dim < dims, fn, "dim", lambda: f"must be in [{-dims}, {dims - 1}]", dim)
    require(x.shape[dim] % 2 == 0, fn, "self", lambda: f"must have an even size along dim {dim}", x)
    require(approximate in (0, 1), fn, "approximate", "must be 0 (erf) or 1 (tanh)", approximate)
    a, b = x.float().chunk(2, dim=dim)
    act, lin = (a, b) if activate_left else (b, a)
    gelu = torch.nn.functional.gelu(act, approximate="tanh" if approximate == 1 else "none")
    return (gelu * lin).to(x.dtype), gelu.to(x.dtype)


def npu_rms_norm(self, gamma, epsilon=1e-6):
    """torch_npu.npu_rms_norm: ``(y, rstd)``, ``rstd = 1 / sqrt(mean(x²) + epsilon)`` over the
    trailing ``gamma.dim()`` axes (float32, shaped ``self.shape[:n] + [1] * gamma.dim()``),
    ``y = x · rstd · gamma`` in self's dtype; computed in float32."""
    fn = "npu_rms_norm"
    x = self
    require(isinstance(x, torch.Tensor) and x.dtype in (torch.float32, torch.float16, torch.bfloat16), fn, "self",
            "must be a float32, float16 or bfloat16 tensor", x)
    require(isinstance(gamma, torch.Tensor) and gamma.dtype in (torch.float32, torch.float16, torch.bfloat16), fn,
            "gamma", "must be a float32, float16 or bfloat16 tensor", gamma)
    norm_dims = gamma.dim()
    require(1 <= norm_dims <= x.dim() and tuple(x.shape[x.dim() - norm_dims:]) == tuple(gamma.shape), fn, "gamma",
            lambda: f"must have the shape of self's trailing dims (self {list(x.shape)})", gamma)
    require(isinstance(epsilon, (int, float)) and epsilon >= 0, fn, "epsilon", "must be a number >= 0", epsilon)
    axes = tuple(range(x.dim() - norm_dims, x.dim()))
    xf = x.float()
    rstd = torch.rsqrt(xf.pow(2).mean(dim=axes, keepdim=True) + epsilon)
    return (xf * rstd * gamma.float()).to(x.dtype), rstd


def npu_swiglu_clip_quant(x, group_index, group_alpha, *, activate_left=False, quant_mode=1, clamp_mode=1):
    """torch_npu.npu_swiglu_clip_quant: ``(y int8 [T, H], scale float32 [T])``.

    Row r of group g (``group_index``: counts [G]): ``a = silu(act) · lin`` (``activate_left``:
    the left half is activated, else the right), ``m = max|a| · group_alpha[g]``,
    ``a = clamp(a, -m, m)``, ``scale = m / 127``, ``y = round_half_even(a / scale)``. Rows past the
    groups' total are 0 (left unwritten on the NPU), as are all-zero rows' scale and y.
    """
    fn = "npu_swiglu_clip_quant"
    require(quant_mode == 1, fn, "quant_mode", "must be 1 (dynamic quantisation, the operator's only mode)",
            quant_mode)
    require(clamp_mode == 1, fn, "clamp_mode", "must be 1 (clamp by group_alpha, the operator's only mode)",
            clamp_mode)
    require(isinstance(x, torch.Tensor) and x.dim() == 2 and x.shape[1] % 2 == 0, fn, "x",
            "must be 2-D [T, 2H] with an even last dim", x)
    require(x.dtype in (torch.bfloat16, torch.float16, torch.float32), fn, "x", "must be bfloat16, float16 or float32",
            x)
    # SwigluClipQuant's tiling refuses any other rank (its kernel's key-value form is unreachable)
    require(isinstance(group_index, torch.Tensor) and group_index.dim() == 1, fn, "group_index",
            "must be 1-D counts [G] (count mode only; the operator refuses key-value [G, 2] pairs)", group_index)
    require(isinstance(group_alpha, torch.Tensor) and tuple(group_alpha.shape) == tuple(group_index.shape), fn,
            "group_alpha", lambda: f"must be [G] = {list(group_index.shape)}", group_alpha)
    rows = x.shape[0]
    groups = group_index.shape[0]
    group = row_groups(group_index, rows)
    valid = group < groups
    alpha = group_alpha.float()[group.clamp(max=groups - 1)]
    first, second = x.float().chunk(2, dim=-1)
    act, lin = (first, second) if activate_left else (second, first)
    a = torch.nn.functional.silu(act) * lin
    m = a.abs().amax(dim=-1) * alpha
    m = torch.where(valid, m, torch.zeros_like(m))
    a = torch.minimum(torch.maximum(a, -m[:, None]), m[:, None])
    scale = m / INT8_MAX
    positive = scale > 0
    safe = torch.where(positive, scale, torch.ones_like(scale))
    q = torch.where(positive[:, None], a / safe[:, None], torch.zeros_like(a))
    return q.round().clamp(-128.0, INT8_MAX).to(torch.int8), scale


__all__ = ["npu_geglu", "npu_swiglu_clip_quant"]
