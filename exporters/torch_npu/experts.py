"""torch_npu's expert computation: ``npu_grouped_matmul`` as the MoE paths call it, ``npu_swiglu``."""

from __future__ import annotations

import torch

from . import _ops, grouped_matmul_forms
from ._args import (
    fail,
    group_list_tensor,
    key_value_counts,
    per_expert_rows,
    require,
    require_none,
    single_tensor,
    stacked_bias,
    stacked_weight,
    tensor_list,
    unsupported,
)
from .grouped_matmul_fp8 import fp8_grouped_matmul, is_fp8
from .grouped_matmul_mx import is_mx, mx_a8w4
from .quant_param import quant_param_scale

# output_dtype (a torch dtype) -> GroupedMatmul's output_dtype attribute (ONNX element types)
_OUTPUT_DTYPES = {torch.float32: 1, torch.float16: 10, torch.bfloat16: 16, torch.int32: 6}


def npu_grouped_matmul(x, weight, *, bias=None, scale=None, offset=None, antiquant_scale=None,
                       antiquant_offset=None, per_token_scale=None, group_list=None, activation_input=None,
                       activation_quant_scale=None, activation_quant_offset=None, split_item=0, group_type=None,
                       group_list_type=0, act_type=0, tuning_config=None, output_dtype=None, x_dtype=None,
                       weight_dtype=None, scale_dtype=None, per_token_scale_dtype=None):
    """torch_npu.npu_grouped_matmul as MoE layers call it: ``[y]`` with ``y[r] = x[r] @ W[e(r)] (+ b[e(r)])``.

    One ``x`` ``[M, K]``; ``weight`` ``[W]`` (``[E, K, N]``) or E ``[K, N]`` tensors; ``group_list``
    per-expert counts (``group_list_type=1``), their cumsum (0) or (expert, count) rows (2), a
    tensor or a list of ints; ``group_type=0``; ``split_item`` 2 or 3 (one output tensor). Rows past
    the last group are 0. Quantized: int8 / int4-in-int32 weights with ``antiquant_scale`` (and
    ``antiquant_offset``), or w8a8: int8 ``x`` and ``weight`` accumulated in int32 (+ int32
    ``bias``), ``output_dtype=torch.int32`` for the sums or a float ``output_dtype`` dequantised by
    ``scale`` ``[[E, N]]`` and ``per_token_scale`` ``[[M]]`` (each a list of one tensor;
    docs/operators.md §4). ``tuning_config`` is a tiling hint (ignored). ``group_type`` -1 (lists
    without grouping), 2 (K split) and several x tensors take float weights
    (:mod:`.grouped_matmul_forms`); float8 x with float4_e2m1 weights and e8m0 block scales is the
    MX form (:mod:`.grouped_matmul_mx`), float8 x with float8 weights and per-channel scales the FP8
    form (:mod:`.grouped_matmul_fp8`); the reserved arguments raise.
    """
    fn = "npu_grouped_matmul"
    if group_list_type is None:  # torch_npu: group_list_type.value_or(0)
        group_list_type = 0
    require_none(fn, offset=offset, activation_input=activation_input,
                 activation_quant_scale=activation_quant_scale, activation_quant_offset=activation_quant_offset)
    if group_type is None:
        fail(fn, "group_type", 'is required (torch_npu: "Requires manual passing group_type"): -1, 0 or 2', None)
    require(group_type in (-1, 0, 2), fn, "group_type",
            'must be -1 (none), 0 (rows) or 2 (K) (torch_npu: "The group type must be -1, 0 or 2")', group_type)
    if act_type != 0:
        unsupported(fn, "act_type", act_type, "apply the activation after the call (e.g. npu_swiglu)")
    xs, ws = tensor_list(fn, "x", x), tensor_list(fn, "weight", weight)
    mx = is_mx(xs[0], weight_dtype)
    if not mx:
        require_none(fn, x_dtype=x_dtype, weight_dtype=weight_dtype, scale_dtype=scale_dtype,
                     per_token_scale_dtype=per_token_scale_dtype)
    if group_type != 0 or len(xs) > 1:
        require(not mx, fn, "x", "must be one tensor with group_type=0 in the MX form (float8 x, float4 weights)",
                xs)
        require_none(fn, scale=scale, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset,
                     per_token_scale=per_token_scale, output_dtype=output_dtype)
        if group_type == -1:
            return grouped_matmul_forms.ungrouped(xs, ws, bias, group_list, split_item)
        if group_type == 2:
            require(len(xs) == 1, fn, "x", "must be one tensor [M, K] with group_type=2", xs)
            return grouped_matmul_forms.k_split(xs[0], ws, bias, group_list, group_list_type, split_item)
        return grouped_matmul_forms.concatenated(xs, ws, bias, group_list, group_list_type, split_item)
    if split_item not in (2, 3):
        unsupported(fn, "split_item", split_item, "MoE layers take one output tensor (split_item 2 or 3)")
    if group_list_type not in (0, 1, 2):
        unsupported(fn, "group_list_type", group_list_type, "use 0 (cumsum), 1 (counts) or 2 (key-value)")
    x = single_tensor(fn, "x", x)
    require(x.dim() == 2, fn, "x", "must hold one 2-D tensor [M, K]", x)
    w = stacked_weight(fn, weight)
    if is_fp8(x, w, weight_dtype):
        require_none(fn, x_dtype=x_dtype, scale_dtype=scale_dtype, per_token_scale_dtype=per_token_scale_dtype,
                     antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset)
        counts, glt = _group_counts(fn, group_list, group_list_type, w.shape[0], x.device)
        return [fp8_grouped_matmul(x, w, bias=bias, scale=scale, per_token_scale=per_token_scale, counts=counts,
                                   group_list_type=glt, row_experts=_row_experts, output_dtype=output_dtype)]
    if mx:
        require(bias is None, fn, "bias", "must be None in the MX form (float8 x, float4 weights)", bias)
        counts, glt = _group_counts(fn, group_list, group_list_type, w.shape[0], x.device)
        return [mx_a8w4(x, w, scale=scale, antiquant_scale=antiquant_scale, per_token_scale=per_token_scale,
                        counts=counts, group_list_type=glt, output_dtype=output_dtype, x_dtype=x_dtype,
                        weight_dtype=weight_dtype, scale_dtype=scale_dtype,
                        per_token_scale_dtype=per_token_scale_dtype)]
    quantized = w.dtype in (torch.int8, torch.int32)
    k_rows = w.shape[1] * (8 if w.dtype == torch.int32 and _ops.transposed_view(w) else 1)
    require(k_rows == x.shape[1], fn, "weight", lambda: f"must have K = {x.shape[1]} rows per expert", w)
    require(w.dtype == x.dtype or quantized, fn, "weight", lambda: f"must have x's dtype {x.dtype}, or be int8 "
            "or int32 (int4 packed 8 per word)", w)
    b = stacked_bias(fn, bias, w.shape[0])
    extra = {name: None if t is None else single_tensor(fn, name, t) for name, t in
             (("antiquant_scale", antiquant_scale), ("antiquant_offset", antiquant_offset),
              ("per_token_scale", per_token_scale))}
    if x.dtype == torch.int8 and w.dtype == torch.int32:
        require_none(fn, antiquant_scale=antiquant_scale, antiquant_offset=antiquant_offset)
        return [_a8w4(fn, x, w, bias, scale, extra["per_token_scale"], group_list, group_list_type, output_dtype)]
    extra["scale"] = None if scale is None else per_expert_rows(fn, "scale", scale, w.shape[0])
    packed_scale = extra["scale"] is not None and extra["scale"].dtype == torch.int64
    if packed_scale:  # npu_trans_quant_param's int64 parameters: their float32 (FP19) scales
        extra["scale"] = quant_param_scale(extra["scale"])
    if x.dtype == torch.int8:
        for name in ("antiquant_scale", "antiquant_offset"):
            if extra[name] is not None:
                unsupported(fn, name, extra[name], "int8 x (w8a8) is dequantised by scale and per_token_scale")
        if output_dtype in (None, torch.int8):
            return [_requantised(fn, x, w, b, extra["scale"], packed_scale, extra["per_token_scale"], group_list,
                                 group_list_type)]
        _check_w8a8(fn, x, w, b, extra["scale"], extra["per_token_scale"], output_dtype)
    else:
        require_none(fn, scale=scale, per_token_scale=per_token_scale)
    if output_dtype is None or (output_dtype == x.dtype and x.dtype != torch.int8):
        out = 0
    elif output_dtype in _OUTPUT_DTYPES:
        out = _OUTPUT_DTYPES[output_dtype]
    else:
        unsupported(fn, "output_dtype", output_dtype, "y is float32, float16, bfloat16, int32, or int8 "
                    "for int8 x")
    counts, group_list_type = _group_counts(fn, group_list, group_list_type, w.shape[0], x.device)
    return [_ops.grouped_matmul(x, w, b, counts, group_list_type, output_dtype=out, **extra)]


def _group_counts(fn, group_list, group_list_type, experts, device):
    """``(group_list as a tensor, its type)``: key-value rows (2) become counts (1)."""
    if group_list_type == 2:
        require(isinstance(group_list, torch.Tensor), fn, "group_list", "must be a tensor [n, 2] in key-value mode",
                group_list)
        counts, group_list_type = key_value_counts(fn, "group_list", group_list, experts), 1
    else:
        counts = group_list_tensor(fn, group_list, device)
    require(counts.shape[0] == experts, fn, "group_list", lambda: f"must have one entry per expert ({experts})",
            counts)
    return counts, group_list_type


def _requantised(fn, x, w, b, s, packed_scale, t, group_list, group_list_type) -> torch.Tensor:
    """w8a8 with int8 output (perchannel requantisation, torch_npu's ``output_dtype`` None or int8):
    ``y = saturate_int8(rint((x @ W[e] + bias[e]) · scale[e]))`` with the int64 ``scale`` of
    npu_trans_quant_param. One GroupedMatmul node gives the int32 sums; the requantisation is
    standard ONNX (Mul, Round, Clip, Cast). Rows past the last group are 0."""
    require(w.dtype == torch.int8, fn, "weight", "must be int8 when x is int8 (w8a8)", w)
    require(s is not None and packed_scale, fn, "scale", "must be the int64 parameters of npu_trans_quant_param "
            "for an int8 output (output_dtype None or torch.int8)", s)
    require(t is None, fn, "per_token_scale", "must be None for an int8 output (perchannel requantisation); "
            "per-token scales dequantise to bfloat16 / float16", t)
    require(b is None or b.dtype == torch.int32, fn, "bias", "must be int32 when x is int8", b)
    experts, n = w.shape[0], w.shape[2]
    require(tuple(s.shape) == (experts, n), fn, "scale", lambda: f"must be [[{experts}, {n}]]", s)
    counts, group_list_type = _group_counts(fn, group_list, group_list_type, experts, x.device)
    sums = _ops.grouped_matmul(x, w, b, counts, group_list_type, output_dtype=_OUTPUT_DTYPES[torch.int32])
    group, _ = _row_experts(counts, group_list_type, x.shape[0], experts)
    y = (sums.to(torch.float32) * s[group]).round().clamp(-128.0, 127.0)
    return y.to(torch.int8)


def _row_experts(counts, group_list_type, rows, experts):
    """``(expert of each row clamped to [0, E), whether the row lies inside the groups)``."""
    ends = counts.to(torch.int64) if group_list_type == 0 else counts.to(torch.int64).cumsum(0)
    positions = torch.arange(rows, dtype=torch.int64, device=counts.device)
    group = (positions[:, None] >= ends[None, :]).to(torch.int64).sum(1)
    return group.clamp(max=experts - 1), group < experts


def unpack_int4(words: torch.Tensor) -> torch.Tensor:
    """int8 ``[..., 8 n]`` of the signed 4-bit values packed 8 to an int32 ``[..., n]`` (value i of a word
    in bits 4i..4i+3, torch_npu's layout); integer arithmetic only (Mod / Div in ONNX)."""
    unsigned = words.to(torch.int64) % (1 << 32)
    shifts = torch.tensor([16 ** i for i in range(8)], dtype=torch.int64, device=words.device)
    nibbles = (unsigned[..., None] // shifts) % 16
    values = nibbles - 16 * (nibbles >= 8).to(torch.int64)
    return values.reshape(*words.shape[:-1], words.shape[-1] * 8).to(torch.int8)


def _a8w4(fn, x, w, bias, scale, t, group_list, group_list_type, output_dtype) -> torch.Tensor:
    """A8W4 (int8 x, int4 weights packed 8 to an int32 ``[E, K, N/8]``), as op-plugin's A8W4 golden
    computes it: the kernel splits x into its high nibble and ``low nibble - 8``, so per K group g
    ``x_g @ W_g - 8 · Σ_k W_g[k]`` is dequantised by ``scale[e, g]`` (int64: float32 bits in bits
    0-31), the groups summed, ``bias[e]`` (float32, the checkpoint's compensation of the -8 term)
    added and the sum multiplied by ``per_token_scale[r]``. Exported as one GroupedMatmul node (int8
    x int8 -> int32) per K group on the unpacked weights, and standard ops."""
    experts, k = w.shape[0], w.shape[1]
    n = w.shape[2] * 8
    require(output_dtype in (torch.float16, torch.bfloat16, torch.float32), fn, "output_dtype",
            "must be float16 or bfloat16 for int8 x with int4 weights (A8W4; float32 for float32 models)",
            output_dtype)
    scales = [scale] if isinstance(scale, torch.Tensor) else list(scale) if scale is not None else []
    require(len(scales) == 1 and scales[0].dtype == torch.int64 and scales[0].dim() in (2, 3), fn, "scale",
            lambda: f"must be [[{experts}, {n}]] or [[{experts}, G, {n}]] int64 (float32 bits) for A8W4", scale)
    s = scales[0] if scales[0].dim() == 3 else scales[0][:, None, :]
    g = s.shape[1]
    require(s.shape[0] == experts and s.shape[2] == n and g >= 1 and k % g == 0, fn, "scale",
            lambda: f"must be [[{experts}, G, {n}]] with G dividing K = {k}", scale)
    require(t is not None and t.numel() == x.shape[0], fn, "per_token_scale",
            lambda: f"must be [[{x.shape[0]}]] for A8W4 (one per row of x)", t)
    b = stacked_bias(fn, bias, experts)
    require(b is None or (b.dtype == torch.float32 and tuple(b.shape) == (experts, n)), fn, "bias",
            lambda: f"must be float32 [[{experts}, {n}]] for A8W4", b)
    counts, group_list_type = _group_counts(fn, group_list, group_list_type, experts, x.device)
    row_expert, inside = _row_experts(counts, group_list_type, x.shape[0], experts)
    weights = unpack_int4(w)                                   # [E, K, N]
    step = k // g
    scale_f = quant_param_scale(s)                             # [E, G, N]
    acc = torch.zeros(x.shape[0], n, dtype=torch.float32, device=x.device)
    for i in range(g):
        part = weights[:, i * step:(i + 1) * step, :]
        sums = _ops.grouped_matmul(x[:, i * step:(i + 1) * step].contiguous(), part.contiguous(), None, counts,
                                   group_list_type, output_dtype=_OUTPUT_DTYPES[torch.int32])
        offset = 8.0 * part.to(torch.float32).sum(1)           # [E, N]
        acc = acc + (sums.to(torch.float32) - offset[row_expert]) * scale_f[:, i, :][row_expert]
    if b is not None:
        acc = acc + b[row_expert]
    y = acc * t.to(torch.float32).reshape(-1, 1)
    y = torch.where(inside[:, None], y, torch.zeros_like(y))
    return y.to(output_dtype)


def _check_w8a8(fn, x, w, b, s, t, output_dtype) -> None:
    """The w8a8 (int8 x) arguments, named as torch_npu names them."""
    require(w.dtype == torch.int8, fn, "weight", "must be int8 when x is int8 (w8a8)", w)
    if output_dtype not in _OUTPUT_DTYPES:
        unsupported(fn, "output_dtype", output_dtype, "w8a8 exports with int32 (the sums), a float type "
                    "(dequantised) or int8 (requantised by int64 scales)")
    experts, n = w.shape[0], w.shape[2]
    require(b is None or b.dtype == torch.int32, fn, "bias", "must be int32 when x is int8", b)
    if output_dtype == torch.int32:
        require(s is None and t is None, fn, "scale", "must be None with output_dtype int32 (no dequantisation)",
                s if s is not None else t)
    else:
        require(s is not None, fn, "scale", lambda: f"is required to dequantise to {output_dtype}", None)
    require(s is None or tuple(s.shape) == (experts, n), fn, "scale", lambda: f"must be [[{experts}, {n}]]", s)
    require(t is None or (t.dim() == 1 and t.shape[0] == x.shape[0]), fn, "per_token_scale",
            lambda: f"must be [[{x.shape[0]}]] (one per row of x)", t)


def npu_swiglu(x, dim=-1):
    """torch_npu.npu_swiglu: ``silu(a) * b`` with ``a, b = x.chunk(2, dim)``; float16 / bfloat16 are
    computed in float32 and rounded once. Exports as one SwiGlu node."""
    require(-x.dim() <= dim < x.dim(), "npu_swiglu", "dim", lambda: f"must be in [-{x.dim()}, {x.dim()})", dim)
    require(x.shape[dim] % 2 == 0, "npu_swiglu", "x", lambda: f"must have an even size along dim {dim}", x)
    return _ops.swiglu(x, dim)


__all__ = ["npu_grouped_matmul", "npu_swiglu"]
