"""torch_npu's expert computation: ``npu_grouped_matmul`` as the MoE paths call it, ``npu_swiglu``."""

from __future__ import annotations

import torch

from . import _ops
from ._args import (
    group_list_tensor,
    key_value_counts,
    require,
    require_none,
    single_tensor,
    stacked_bias,
    stacked_weight,
    unsupported,
)

_HALF = (torch.float16, torch.bfloat16)


def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                       antiquant_offset=None, per_token_scale=None, group_list=None, activation_input=None,
                       activation_quant_scale=None, activation_quant_offset=None, split_item=0, group_type=None,
                       group_list_type=0, act_type=0, tuning_config=None, output_dtype=None, x_dtype=None,
                       weight_dtype=None, scale_dtype=None, per_token_scale_dtype=None):
    """torch_npu.npu_grouped_matmul as MoE layers call it: ``[y]`` with ``y[r] = x[r] @ W[e(r)] (+ b[e(r)])``.

    One ``x`` ``[M, K]``; ``weight`` ``[W]`` (``[E, K, N]``) or E ``[K, N]`` tensors; ``group_list``
    per-expert counts (``group_list_type=1``), their cumsum (0) or (expert, count) rows (2), a
    tensor or a list of ints; ``group_type=0``; ``split_item`` 2 or 3 (one output tensor). Rows past
    the last group are 0. w8a8: int8 ``x`` and ``weight`` accumulate in int32 (+ int32 ``bias``);
    ``output_dtype=torch.int32`` returns the sums, a float ``output_dtype`` dequantises them with
    ``scale`` ``[[E, N]]`` and ``per_token_scale`` ``[[M]]``. Antiquant (weight-only) arguments and
    other split / group modes raise.
    """
    fn = "npu_grouped_matmul"
    require_none(fn, offset=offset, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                 activation_input=activation_input, activation_quant_scale=activation_quant_scale,
                 activation_quant_offset=activation_quant_offset, x_dtype=x_dtype, weight_dtype=weight_dtype,
                 scale_dtype=scale_dtype, per_token_scale_dtype=per_token_scale_dtype)
    if group_type != 0:
        unsupported(fn, "group_type", group_type, "MoE layers group the rows of x (group_type=0); "
                    "other groupings have no ONNX operator here")
    if split_item not in (2, 3):
        unsupported(fn, "split_item", split_item, "MoE layers take one output tensor (split_item 2 or 3)")
    if group_list_type not in (0, 1, 2):
        unsupported(fn, "group_list_type", group_list_type, "use 0 (cumsum), 1 (counts) or 2 (key-value)")
    if act_type != 0:
        unsupported(fn, "act_type", act_type, "apply the activation after the call (e.g. npu_swiglu)")
    x = single_tensor(fn, "x", x)
    require(x.dim() == 2, fn, "x", "must hold one 2-D tensor [M, K]", x)
    w = stacked_weight(fn, weight)
    require(w.shape[1] == x.shape[1], fn, "weight", lambda: f"must have K = {x.shape[1]} rows per expert", w)
    if group_list_type == 2:
        require(isinstance(group_list, torch.Tensor), fn, "group_list", "must be a tensor [n, 2] in key-value mode",
                group_list)
        counts, group_list_type = key_value_counts(fn, "group_list", group_list, w.shape[0]), 1
    else:
        counts = group_list_tensor(fn, group_list, x.device)
    require(counts.shape[0] == w.shape[0], fn, "group_list", lambda: f"must have one entry per expert ({w.shape[0]})",
            counts)
    if x.dtype == torch.int8:
        return [_w8a8(fn, x, w, bias, scale, per_token_scale, counts, group_list_type, output_dtype)]
    require_none(fn, scale=scale, per_token_scale=per_token_scale)
    require(w.dtype == x.dtype, fn, "weight", lambda: f"must have x's dtype {x.dtype}", w)
    b = stacked_bias(fn, bias, w.shape[0])
    if output_dtype is not None and output_dtype != x.dtype:
        unsupported(fn, "output_dtype", output_dtype, "an unquantised grouped matmul returns x's dtype")
    return [_ops.grouped_matmul(x, w, b, counts, group_list_type)]


_W8A8_OUTPUTS = (torch.int32, torch.bfloat16, torch.float16, torch.float32)


def _w8a8(fn, x, w, bias, scale, per_token_scale, counts, group_list_type, output_dtype):
    """Checks and call of the w8a8 grouped matmul (int8 x and weight)."""
    require(w.dtype == torch.int8, fn, "weight", "must be int8 when x is int8 (w8a8)", w)
    if output_dtype not in _W8A8_OUTPUTS:
        unsupported(fn, "output_dtype", output_dtype, "w8a8 exports with int32 (the sums) or a float type "
                    "(dequantised); int8 requantisation has no ONNX operator here")
    experts, n = w.shape[0], w.shape[2]
    b = stacked_bias(fn, bias, experts)
    require(b is None or b.dtype == torch.int32, fn, "bias", "must be int32 when x is int8", b)
    s = None if scale is None else single_tensor(fn, "scale", scale)
    t = None if per_token_scale is None else single_tensor(fn, "per_token_scale", per_token_scale)
    if output_dtype == torch.int32:
        require(s is None and t is None, fn, "scale", "must be None with output_dtype int32 (no dequantisation)",
                s if s is not None else t)
    else:
        require(s is not None, fn, "scale", lambda: f"is required to dequantise to {output_dtype}", None)
    require(s is None or tuple(s.shape) == (experts, n), fn, "scale", lambda: f"must be [[{experts}, {n}]]", s)
    require(t is None or (t.dim() == 1 and t.shape[0] == x.shape[0]), fn, "per_token_scale",
            lambda: f"must be [[{x.shape[0]}]] (one per row of x)", t)
    return _ops.grouped_matmul_quant(x, w, s, t, b, counts, group_list_type, output_dtype)


def npu_swiglu(x, dim=-1):
    """torch_npu.npu_swiglu: ``silu(a) * b`` with ``a, b = x.chunk(2, dim)``; float16 / bfloat16 are
    computed in float32 and rounded once. Exports as standard ONNX ops (Split, Sigmoid, Mul)."""
    require(x.shape[dim] % 2 == 0, "npu_swiglu", "x", lambda: f"must have an even size along dim {dim}", x)
    a, b = x.float().chunk(2, dim=dim) if x.dtype in _HALF else x.chunk(2, dim=dim)
    return (a * torch.sigmoid(a) * b).to(x.dtype)


__all__ = ["npu_grouped_matmul", "npu_swiglu"]
