"""torch_npu's w8a8 helpers: ``npu_dynamic_quant``, ``npu_dequant_swiglu_quant`` and
``npu_grouped_matmul_swiglu_quant`` (names, signatures and defaults of op-plugin's
``op_plugin_functions.yaml``).

Per-token symmetric int8 quantisation as aclnnDynamicQuant defines it: ``scale = rowmax|r| / 127``
and ``y = round_half_even(r / scale)`` in float32, ``r`` the row times the smoothing scales; an
all-zero row gives scale 0 and y 0 (MoeInitRoutingV3's ``quant_mode=1`` quantises the same way).
Each function is written in torch and exports as standard ONNX ops (ReduceMax, Div, Round, Clip,
Cast; Round rounds half to even), which state it exactly: ONNX's DynamicQuantizeLinear cannot
(per-tensor, uint8, asymmetric). Variants without an ONNX meaning here (float8 / hifloat8 outputs,
per-tensor or per-channel modes, other rounding) raise with the argument named.
"""

from __future__ import annotations

import torch

from . import _ops
from ._args import key_value_counts, require, unsupported

INT8_MAX = 127.0


INT4_MAX = 7.0
# torch_npu takes dst_type as a ScalarType: torch dtypes, or their codes (int8 1, quint4x2 16)
_INT8_CODES = (None, torch.int8, 1)
_INT4_CODES = (torch.quint4x2, 16)


def _int8_dst(fn: str, dst_type) -> None:
    """dst_type: None or int8."""
    if dst_type not in _INT8_CODES:
        unsupported(fn, "dst_type", dst_type, "only int8 outputs export here (None or torch.int8)")


def pack_int4(q: torch.Tensor) -> torch.Tensor:
    """int32 [..., H/8] holding 8 signed 4-bit values each (value j of a group in bits 4j..4j+3, as
    torch_npu packs quint4x2 outputs) from integer-valued ``q`` [..., H] in [-8, 7]."""
    nibbles = (q.to(torch.int64) + 16) % 16
    weights = torch.tensor([16 ** j for j in range(8)], dtype=torch.int64, device=q.device)
    words = (nibbles.reshape(*q.shape[:-1], q.shape[-1] // 8, 8) * weights).sum(-1)
    return torch.where(words >= 2 ** 31, words - 2 ** 32, words).to(torch.int32)


def quantize_rows(r: torch.Tensor, valid: torch.Tensor | None = None):
    """``(int8 y, float32 scale)`` of float32 rows ``r`` [..., H]: per-row symmetric dynamic quantisation.

    ``valid`` (bool [...]) marks the rows to quantise; the others give y 0 and scale 0.
    """
    scale = r.abs().amax(dim=-1) / INT8_MAX
    if valid is not None:
        scale = torch.where(valid, scale, torch.zeros_like(scale))
    positive = scale > 0
    safe = torch.where(positive, scale, torch.ones_like(scale))
    q = torch.where(positive[..., None], r / safe[..., None], torch.zeros_like(r))
    return q.round().clamp(-128.0, INT8_MAX).to(torch.int8), scale


def row_groups(counts: torch.Tensor, rows) -> torch.Tensor:
    """int64 [rows]: the group of each row when groups hold ``counts[g]`` consecutive rows; rows past
    the last group get ``len(counts)``."""
    ends = counts.to(torch.int64).cumsum(0)
    positions = torch.arange(rows, dtype=torch.int64, device=counts.device)
    return (positions[:, None] >= ends[None, :]).to(torch.int64).sum(1)


def _group_ends_to_counts(group_index: torch.Tensor) -> torch.Tensor:
    """npu_dynamic_quant's group_index (the end row of each group, increasing) as counts."""
    ends = group_index.to(torch.int64)
    return torch.cat([ends[:1], ends[1:] - ends[:-1]])


def npu_dynamic_quant(input, *, smooth_scales=None, group_index=None, dst_type=None, quant_mode="pertoken",
                      dst_type_max=0.0):
    """torch_npu.npu_dynamic_quant: ``(y int8 [..., H], scale float32 [...])``, per-token symmetric.

    ``dst_type=torch.quint4x2``: ``scale = rowmax|r| / 7``, the values rounded half to even into
    [-8, 7] and packed 8 to an int32 (``y`` int32 [..., H/8], value j in bits 4j..4j+3).

    ``smooth_scales`` [H] multiplies every row first; with ``group_index`` (int32 [G], the end row
    of each group, increasing, the last = the number of rows) ``smooth_scales`` is [G, H] and row r
    takes the smoothing row of its group.
    """
    fn = "npu_dynamic_quant"
    x = input
    int4 = dst_type in _INT4_CODES
    if not int4 and dst_type not in _INT8_CODES:
        unsupported(fn, "dst_type", dst_type, "only int8 (None, torch.int8) and int4 (torch.quint4x2) outputs "
                    "export here")
    if quant_mode != "pertoken":
        unsupported(fn, "quant_mode", quant_mode, "only per-token quantisation ('pertoken') exports here")
    if dst_type_max not in (0, 0.0):
        unsupported(fn, "dst_type_max", dst_type_max, "it applies to float8 outputs; int8 uses 127")
    require(x.dim() >= 2, fn, "input", "must have at least 2 dims", x)
    require(x.dtype in (torch.float32, torch.float16, torch.bfloat16), fn, "input",
            "must be float16, bfloat16 or float32", x)
    h = x.shape[-1]
    if int4:
        require(h % 8 == 0, fn, "input", "must have a last dim divisible by 8 for int4 outputs", x)
    r = x.float()
    if group_index is not None:
        require(smooth_scales is not None, fn, "smooth_scales", "is required with group_index", None)
        require(smooth_scales.dim() == 2 and smooth_scales.shape[1] == h, fn, "smooth_scales",
                lambda: f"must be [G, {h}] with group_index", smooth_scales)
        require(group_index.dim() == 1 and group_index.shape[0] == smooth_scales.shape[0], fn, "group_index",
                lambda: f"must be 1-D with one entry per smooth_scales row ({smooth_scales.shape[0]})", group_index)
        flat = r.reshape(-1, h)
        groups = row_groups(_group_ends_to_counts(group_index), flat.shape[0])
        smooth = smooth_scales.float()[groups.clamp(max=smooth_scales.shape[0] - 1)]
        r = (flat * smooth).reshape(r.shape)
    elif smooth_scales is not None:
        require(smooth_scales.dim() == 1 and smooth_scales.shape[0] == h, fn, "smooth_scales",
                lambda: f"must be [{h}] (one per column of input) without group_index", smooth_scales)
        r = r * smooth_scales.float()
    if not int4:
        return quantize_rows(r)
    scale = r.abs().amax(dim=-1) / INT4_MAX
    positive = scale > 0
    safe = torch.where(positive, scale, torch.ones_like(scale))
    q = torch.where(positive[..., None], r / safe[..., None], torch.zeros_like(r))
    return pack_int4(q.round().clamp(-8.0, INT4_MAX)), scale


def _group_counts(fn: str, group_index: torch.Tensor, groups: int) -> torch.Tensor:
    """npu_dequant_swiglu_quant's group_index: counts [G], or (group, count) rows [G, 2] (key-value,
    as init routing's expert_tokens_num_type=2 gives them) turned into counts per group."""
    if group_index.dim() == 2:
        return key_value_counts(fn, "group_index", group_index, groups)
    require(group_index.dim() == 1, fn, "group_index", "must be counts [G] or (group, count) rows [G, 2]",
            group_index)
    return group_index.to(torch.int64)


def _per_group(fn: str, arg: str, t: torch.Tensor, groups: int, width: int) -> torch.Tensor:
    """A per-group scale as float32 [groups, width]: [width] and [1, width] apply to every group."""
    if t.dim() == 1:
        t = t.reshape(1, -1)
    require(t.dim() == 2 and t.shape[1] == width and t.shape[0] in (1, groups), fn, arg,
            lambda: f"must be [{width}], [1, {width}] or [{groups}, {width}]", t)
    return t.float()


def _swiglu(fn, y, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias):
    """The activation of npu_dequant_swiglu_quant on float32 [T, 2H]."""
    if swiglu_mode == 1:
        require(bool(activate_left), fn, "activate_left", "must be True when swiglu_mode is 1", activate_left)
        act, lin = y[:, 0::2], y[:, 1::2]
    else:
        first, second = y.chunk(2, dim=-1)
        act, lin = (first, second) if activate_left else (second, first)
    if swiglu_mode == 0:
        return act * torch.sigmoid(act) * lin
    act = act.clamp(max=clamp_limit)
    lin = lin.clamp(-clamp_limit, clamp_limit)
    return act * torch.sigmoid(glu_alpha * act) * (lin + glu_bias)


def _check_dequant_swiglu_args(fn, x, bias, quant_mode, quant_offset, dst_type, round_mode, activate_dim,
                               swiglu_mode) -> None:
    _int8_dst(fn, dst_type)
    if bias is not None:
        unsupported(fn, "bias", bias, "pass None (the MoE paths add no bias here)")
    if quant_mode != 1:
        unsupported(fn, "quant_mode", quant_mode, "only dynamic quantisation (quant_mode=1) exports here")
    if quant_offset is not None:
        unsupported(fn, "quant_offset", quant_offset, "dynamic quantisation takes no offset; pass None")
    if round_mode not in (None, "rint", 0):
        unsupported(fn, "round_mode", round_mode, "only round-half-to-even ('rint', the default) exports here")
    if activate_dim not in (None, -1, x.dim() - 1):
        unsupported(fn, "activate_dim", activate_dim, "only the last dimension (-1) exports here")
    require(swiglu_mode in (0, 1, 2), fn, "swiglu_mode", "must be 0, 1 or 2", swiglu_mode)
    require(x.dim() == 2 and x.shape[1] % 2 == 0, fn, "x", "must be 2-D [T, 2H] with an even last dim", x)
    require(x.dtype in (torch.int32, torch.float16, torch.bfloat16, torch.float32), fn, "x",
            "must be int32, float16, bfloat16 or float32", x)


def npu_dequant_swiglu_quant(x, *, weight_scale=None, activation_scale=None, bias=None, quant_scale=None,
                             quant_offset=None, group_index=None, activate_left=False, quant_mode=0, dst_type=None,
                             round_mode=None, activate_dim=None, swiglu_mode=0, clamp_limit=7.0, glu_alpha=1.702,
                             glu_bias=1.0):
    """torch_npu.npu_dequant_swiglu_quant: ``(y int8 [T, H], scale float32 [T])``.

    Row r of group g (``group_index``: counts [G] or (group, count) rows [G, 2]; absent: one group):
    ``v = x[r] · weight_scale[g] · activation_scale[r]`` (float32; int32 x is dequantised, float x
    taken as is), ``a = swiglu(v)`` (``activate_left``: the left half is activated, else the right;
    ``swiglu_mode`` 1/2: clamped variant with ``clamp_limit``, ``glu_alpha``, ``glu_bias``), then
    ``(y, scale) = dynamic_quant(a · quant_scale[g])``. Rows past the groups' total are 0 (left
    unwritten on the NPU). Only dynamic quantisation (``quant_mode=1``) and int8 output export.
    """
    fn = "npu_dequant_swiglu_quant"
    _check_dequant_swiglu_args(fn, x, bias, quant_mode, quant_offset, dst_type, round_mode, activate_dim,
                               swiglu_mode)
    rows, width = x.shape
    if x.dtype == torch.int32:
        require(weight_scale is not None, fn, "weight_scale", "is required when x is int32", None)
        require(activation_scale is not None, fn, "activation_scale", "is required when x is int32", None)
    else:
        require(activation_scale is None, fn, "activation_scale", "must be None when x is a float type",
                activation_scale)
    groups = 1 if group_index is None else group_index.shape[0]
    counts = None if group_index is None else _group_counts(fn, group_index, groups)
    group = torch.zeros(rows, dtype=torch.int64, device=x.device) if counts is None else row_groups(counts, rows)
    valid = group < groups
    g = group.clamp(max=groups - 1)
    v = x.float()
    if weight_scale is not None:
        ws = _per_group(fn, "weight_scale", weight_scale, groups, width)
        v = v * (ws[g] if ws.shape[0] > 1 else ws)
    if activation_scale is not None:
        require(activation_scale.numel() == rows, fn, "activation_scale",
                lambda: f"must hold {rows} values ([T] or [T, 1])", activation_scale)
        v = v * activation_scale.float().reshape(rows, 1)
    a = _swiglu(fn, v, activate_left, swiglu_mode, clamp_limit, glu_alpha, glu_bias)
    if quant_scale is not None:
        qs = _per_group(fn, "quant_scale", quant_scale, groups, width // 2)
        a = a * (qs[g] if qs.shape[0] > 1 else qs)
    return quantize_rows(a, valid if counts is not None else None)


def npu_grouped_matmul_swiglu_quant(x, weight, group_list, weight_scale, x_scale, *, bias=None, offset=None):
    """torch_npu.npu_grouped_matmul_swiglu_quant: ``(y int8 [M, N/2], y_scale float32 [M], y_offset)``.

    ``x`` int8 [M, K] grouped by ``group_list`` (cumsum, int64 [E]), ``weight`` int8 [E, K, N],
    ``weight_scale`` float32 [E, N], ``x_scale`` float32 [M]: the int32 grouped matmul dequantised
    by both scales, swiglu with the left half activated, then per-token dynamic quantisation; one
    GroupedMatmul node (int32 output) and the npu_dequant_swiglu_quant decomposition. ``y_offset``
    is an empty float32 tensor (symmetric quantisation has none).
    """
    fn = "npu_grouped_matmul_swiglu_quant"
    if bias is not None:
        unsupported(fn, "bias", bias, "pass None")
    if offset is not None:
        unsupported(fn, "offset", offset, "symmetric quantisation has no offset; pass None")
    require(x.dtype == torch.int8 and x.dim() == 2, fn, "x", "must be int8 [M, K]", x)
    require(weight.dtype == torch.int8 and weight.dim() == 3, fn, "weight", "must be int8 [E, K, N]", weight)
    require(group_list.dim() == 1 and group_list.shape[0] == weight.shape[0], fn, "group_list",
            lambda: f"must be the cumsum of the rows per expert, [{weight.shape[0]}]", group_list)
    acc = _ops.grouped_matmul(x, weight, None, group_list, 0, output_dtype=6)  # int32 sums
    counts = _group_ends_to_counts(group_list)
    y, scale = npu_dequant_swiglu_quant(acc, weight_scale=weight_scale, activation_scale=x_scale,
                                        group_index=counts, activate_left=True, quant_mode=1)
    return y, scale, torch.empty(0, dtype=torch.float32, device=x.device)


__all__ = ["npu_dequant_swiglu_quant", "npu_dynamic_quant", "npu_grouped_matmul_swiglu_quant", "pack_int4"]
