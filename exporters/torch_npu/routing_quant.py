"""npu_moe_init_routing_v2's Ascend950 modes: quantisation of the routed rows beyond int8, and
routing of tokens that already are one-byte codes.

torch_npu's ``quant_mode`` (op-plugin ``MoeInitRoutingV2KernelNpuOpApi.cpp``, the torch_npu doc
and the goldens of op-plugin's ``test_npu_moe_init_routing_v2.py``), each applied to every row
MoeInitRoutingV3 sorted by expert (``quant_mode=-1``), in float32:

- 2 / 3 (float8_e5m2 / e4m3fn) and 16 / 17 (the same with ``amax`` raised to at least 1e-4):
  MXFP8 with RoundScale. Blocks of 32 along H; ``S = amax / max_value`` (57344 / 448) and the
  block exponent ``e = ceil(log2 S)`` (the exponent of S, plus one unless S is a power of two), at
  least -126; values ``v · 2^-e`` cast to float8 (round half to even); ``expanded_scale`` the
  ``e + 127`` bits as float8_e8m0fnu ``[rows, CeilAlign(CeilDiv(H, 32), 2)]`` (an all-zero block:
  values 0 and, as the padding column, scale bits 0xFF: the goldens' 0.0 in float8_e8m0, which has no
  zero). A float16 x takes ``amax`` of its values truncated to bfloat16.
- 4 / 5 and 14 / 15 (amax >= 1e-4): the same RoundScale per group of 128 along H, ``expanded_scale``
  the scales ``2^e`` themselves, float32 ``[rows, CeilDiv(H, 128)]`` (0 for an all-zero group).
- 11 / 12: FP8 per block of 128 along H: ``scale = amax / max_value`` (0 below float32's smallest
  normal), values ``v / scale`` saturated and cast (``x / 0``: the saturated sign, ``0 / 0``: 0);
  ``expanded_scale`` float32 ``[rows, CeilDiv(H, 256), 2]`` (the block count padded to even with 0).
- 6 / 7 / 8: HiFloat8 codes (:func:`hifloat8_codes`): 6 casts the values, 7 multiplies by
  ``scale[0]`` and saturates at ±32768, 8 divides each row by ``rowmax|v| / 32768`` (its
  ``expanded_scale``, float32 [rows]) and saturates. torch_npu returns hifloat8 as bytes: uint8.
- 9: MXFP4 (float4_e2m1), :func:`npu_dynamic_mx_quant` with its OCP scales: uint8 ``[rows, H/2]``
  and uint8 e8m0 scales ``[rows, CeilDiv(H, 64), 2]``.
- 13: int4 per row: ``scale = rowmax|v · smooth| / 7``, values rounded half to even into [-8, 7],
  two a byte (element 2i in the low nibble): uint8 ``[rows, H/2]``, ``expanded_scale`` float32 [rows].

With ``quant_mode=-1`` torch_npu also routes float8 x (with float8_e8m0 scales
``[N, CeilDiv(H, 64), 2]``), and, named by ``x_dtype``, float4_e2m1 pairs and hifloat8 codes held
in one-byte tensors: the rows move unchanged.

Everything is torch arithmetic on the rows of one MoeInitRoutingV3 node and exports as standard
ONNX ops (Cast to FLOAT8E4M3FN / FLOAT8E5M2 included). ONNX has no operator producing FLOAT8E8M0,
so an exported graph holds the MXFP8 scales as their uint8 bits, which is what the eager result
(a float8_e8m0fnu view) holds too.
"""

from __future__ import annotations

import math

import torch

from ._args import fail, has_values, require, unsupported
from .dtypes import name_of
from .mx_quant import E4M3, E5M2, FLOAT4_E2M1, MxFormat, floor_log2, npu_dynamic_mx_quant, shared_exponents
from .quant import INT4_MAX

MXFP8_BLOCK = 32
FP8_BLOCK = 128
# RoundScale exponents stay normal: 2^-126 at the least
ROUND_SCALE_MIN_EXPONENT = -126.0
# the MXFP8 scale of an all-zero block and of the padding column: the goldens write 0.0 there,
# which float8_e8m0 (no zero) holds as 0xFF
E8M0_UNSET = 255.0
# quant_mode 14-17 raise each block's amax to at least this
AMAX_FLOOR = 1e-4
MXFP8_MODES = {2: E5M2, 3: E4M3, 16: E5M2, 17: E4M3}
FP8_GROUP_MODES = {4: E5M2, 5: E4M3, 14: E5M2, 15: E4M3}
FP8_PER_BLOCK_MODES = {11: E5M2, 12: E4M3}
HIF8_CAST, HIF8_PER_TENSOR, HIF8_PER_TOKEN = 6, 7, 8
MXFP4 = 9
INT4_DYNAMIC = 13
ASCEND950_MODES = (*MXFP8_MODES, *FP8_GROUP_MODES, *FP8_PER_BLOCK_MODES, HIF8_CAST, HIF8_PER_TENSOR,
                   HIF8_PER_TOKEN, MXFP4, INT4_DYNAMIC)
# HiFloat8's largest finite value; the per-tensor and per-token modes saturate there
HIF8_MAX = 32768.0
HIF8_NAN, HIF8_INF = 0x80, 0x6F
_FLOAT8 = (torch.float8_e4m3fn, torch.float8_e5m2)
_FLOAT32_MIN_NORMAL = 2.0 ** -126


def hifloat8_codes(v: torch.Tensor) -> torch.Tensor:
    """uint8 HiFloat8 codes of float32 ``v`` (Ascend's "HiFloat8 Format for Deep Learning").

    A code is sign | dot | exponent | mantissa, the dot field giving the widths: ``11`` a 4-bit
    exponent field (|e| 8..15) and 1 mantissa bit, ``10`` 3 bits (|e| 4..7) and 2, ``01`` 2 bits
    (|e| 2..3) and 3, ``001`` 1 bit (|e| = 1) and 3, ``0001`` e = 0 and 3; an exponent field is the
    exponent's sign then |e| without its leading 1. ``0000`` codes are ``2^(m - 23)`` for m = 1..7
    (the subnormals), 0x00 is 0, 0x80 NaN, 0x6F / 0xEF ±Inf; the largest finite value is 2^15.
    Values round to nearest at the width their own exponent gives, ties away from zero; from
    1.25 · 2^15 up they become Inf, below 2^-23 (by their exponent, before rounding) 0 (+0: HiFloat8
    has no -0).
    """
    a = v.abs()
    finite = torch.isfinite(v)
    positive = (a > 0) & finite
    safe = torch.where(positive, a, torch.ones_like(a))
    e = floor_log2(safe)

    def mantissa_bits(exp):
        m = exp.abs()
        return torch.where(m <= 3, 3.0, torch.where(m <= 7, 2.0, torch.where(m <= 15, 1.0, 0.0)))

    underflow = e < -23  # decided by the value's own exponent, before rounding
    step = torch.pow(2.0, e - mantissa_bits(e))
    r = torch.floor(safe / step + 0.5) * step  # exact: safe / step < 2^5
    e = floor_log2(r)  # a carry moves r to the next binade, where the widths may differ
    mb = mantissa_bits(e)
    m = (r / torch.pow(2.0, e) - 1.0) * torch.pow(2.0, mb)
    ae = e.abs()
    neg_e = (e < 0).to(torch.float32)
    normal = torch.where(
        ae == 0, 8.0 + m,
        torch.where(ae == 1, 16.0 + 8.0 * neg_e + m,
                    torch.where(ae <= 3, 32.0 + 8.0 * (2.0 * neg_e + ae - 2.0) + m,
                                torch.where(ae <= 7, 64.0 + 4.0 * (4.0 * neg_e + ae - 4.0) + m,
                                            96.0 + 2.0 * (8.0 * neg_e + ae - 8.0) + m))))
    subnormal = torch.clamp(e + 23.0, min=1.0)  # 2^-23 rounds (ties away) to 2^-22
    code = torch.where(ae <= 15, normal, subnormal)
    code = torch.where(underflow, torch.zeros_like(code), code)
    inf = (r >= 1.5 * HIF8_MAX) | torch.isinf(v)
    code = torch.where(inf, torch.full_like(code, HIF8_INF), code)
    code = torch.where(positive | torch.isinf(v), code, torch.zeros_like(code))
    code = code + 128.0 * ((v < 0) & (code > 0)).to(torch.float32)
    code = torch.where(torch.isnan(v), torch.full_like(code, HIF8_NAN), code)
    return code.to(torch.uint8)


def round_scale_exponents(amax: torch.Tensor, fmt: MxFormat) -> torch.Tensor:
    """float32 RoundScale exponents ``max(ceil(log2(amax / max_value)), -126)`` of positive ``amax``
    (npu_dynamic_mx_quant's ``scale_alg=1`` rule, kept normal)."""
    return shared_exponents(amax, fmt, 1).clamp(min=ROUND_SCALE_MIN_EXPONENT)


def _blocks(v: torch.Tensor, block: int) -> tuple[torch.Tensor, int]:
    """``v`` [R, H] zero-padded to whole blocks: ``([R, blocks, block], blocks)``."""
    h = v.shape[-1]
    blocks = math.ceil(h / block)
    padded = torch.nn.functional.pad(v, (0, blocks * block - h))
    return padded.reshape(v.shape[0], blocks, block), blocks


def _unblock(b: torch.Tensor, h: int) -> torch.Tensor:
    return b.reshape(b.shape[0], -1)[:, :h]


def _truncated_to_bfloat16(a: torch.Tensor) -> torch.Tensor:
    """Non-negative float32 ``a`` with the mantissa cut to bfloat16's 7 bits (toward zero)."""
    safe = torch.where(a > 0, a, torch.ones_like(a))
    step = torch.pow(2.0, floor_log2(safe) - 7.0)
    return torch.where(a > 0, torch.floor(safe / step) * step, a)


def _pad_even(t: torch.Tensor) -> torch.Tensor:
    return torch.nn.functional.pad(t, (0, t.shape[-1] % 2))


def mxfp8_round_scale(rows: torch.Tensor, fmt: MxFormat, amax_floor: float | None):
    """quant_mode 2 / 3 / 16 / 17: ``(float8 [R, H], uint8 e8m0 bits [R, CeilAlign(CeilDiv(H, 32), 2)])``."""
    v = rows.float()
    blocks, _ = _blocks(v, MXFP8_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    if rows.dtype == torch.float16:
        amax = _truncated_to_bfloat16(amax)
    if amax_floor is not None:
        amax = amax.clamp(min=amax_floor)
    positive = amax > 0
    e = round_scale_exponents(torch.where(positive, amax, torch.ones_like(amax)), fmt)
    inverse = torch.where(positive, torch.pow(2.0, -e), torch.zeros_like(e))
    y = _unblock(blocks * inverse[..., None], v.shape[-1]).clamp(-fmt.max_value, fmt.max_value)
    bits = torch.where(positive, e + 127.0, torch.full_like(e, E8M0_UNSET))
    bits = torch.nn.functional.pad(bits, (0, bits.shape[-1] % 2), value=E8M0_UNSET)
    return y.to(fmt.torch_dtype), bits.to(torch.uint8)


def fp8_group(rows: torch.Tensor, fmt: MxFormat, amax_floor: float | None):
    """quant_mode 4 / 5 / 14 / 15: ``(float8 [R, H], float32 scales [R, CeilDiv(H, 128)])``."""
    v = rows.float()
    blocks, _ = _blocks(v, FP8_BLOCK)
    amax = blocks.abs().amax(dim=-1)
    if amax_floor is not None:
        amax = amax.clamp(min=amax_floor)
    positive = amax > 0
    e = round_scale_exponents(torch.where(positive, amax, torch.ones_like(amax)), fmt)
    scale = torch.where(positive, torch.pow(2.0, e), torch.zeros_like(e))
    divisor = torch.where(positive, scale, torch.ones_like(scale))
    y = _unblock(blocks / divisor[..., None], v.shape[-1]).clamp(-fmt.max_value, fmt.max_value)
    return y.to(fmt.torch_dtype), scale


def fp8_per_block(rows: torch.Tensor, fmt: MxFormat):
    """quant_mode 11 / 12: ``(float8 [R, H], float32 scales [R, CeilDiv(H, 256), 2])``."""
    v = rows.float()
    blocks, _ = _blocks(v, FP8_BLOCK)
    scale = blocks.abs().amax(dim=-1) / fmt.max_value
    scale = torch.where(scale < _FLOAT32_MIN_NORMAL, torch.zeros_like(scale), scale)
    q = (blocks / scale[..., None]).clamp(-fmt.max_value, fmt.max_value)
    q = torch.where(torch.isnan(q), torch.zeros_like(q), q)  # 0 / 0
    y = _unblock(q, v.shape[-1]).to(fmt.torch_dtype)
    return y, _pad_even(scale).reshape(v.shape[0], -1, 2)


def hifloat8_rows(rows: torch.Tensor, mode: int, scale: torch.Tensor | None):
    """quant_mode 6 / 7 / 8: ``(uint8 HiFloat8 codes [R, H], float32 [R])`` (the per-token scales
    for 8, zeros otherwise: torch_npu leaves them unwritten)."""
    v = rows.float()
    row_scale = torch.zeros(v.shape[0], dtype=torch.float32, device=v.device)
    if mode == HIF8_PER_TENSOR:
        assert scale is not None  # checked by the caller
        v = (v * scale.float().reshape(-1)[0]).clamp(-HIF8_MAX, HIF8_MAX)
    elif mode == HIF8_PER_TOKEN:
        row_scale = v.abs().amax(dim=-1) / HIF8_MAX
        safe = torch.where(row_scale > 0, row_scale, torch.ones_like(row_scale))
        v = (v / safe[:, None]).clamp(-HIF8_MAX, HIF8_MAX)
    return hifloat8_codes(v), row_scale


def int4_rows(rows: torch.Tensor, smooth: torch.Tensor | None):
    """quant_mode 13: ``(uint8 [R, H/2] two int4 a byte, float32 scales [R])``."""
    r = rows.float() if smooth is None else rows.float() * smooth.float().reshape(1, -1)
    scale = r.abs().amax(dim=-1) / INT4_MAX
    positive = scale > 0
    safe = torch.where(positive, scale, torch.ones_like(scale))
    q = torch.where(positive[:, None], r / safe[:, None], torch.zeros_like(r)).round().clamp(-8.0, INT4_MAX)
    nibbles = (q.to(torch.int32) + 16) % 16
    pairs = nibbles.reshape(r.shape[0], -1, 2)
    return (pairs[..., 0] + 16 * pairs[..., 1]).to(torch.uint8), scale


def _as_e8m0(bits: torch.Tensor) -> torch.Tensor:
    """e8m0 scale bits as torch_npu returns them (float8_e8m0fnu) eagerly; bits in a traced graph."""
    return bits.view(torch.float8_e8m0fnu) if has_values(bits) else bits


def npu_dtype_name(value) -> str | None:
    """The element type an ``x_dtype`` argument names: torch_npu's dtype ints or a torch dtype."""
    if isinstance(value, torch.dtype):
        return str(value).replace("torch.", "")
    return name_of(value)


# ---- npu_moe_init_routing_v2 ------------------------------------------------------------------


def _check_mode_args(fn, x, scale, offset, quant_mode, drop_pad_mode, x_name):
    if quant_mode == INT4_DYNAMIC:
        # op-plugin's TORCH_CHECKs for quant_mode=13, in its order and words
        require(drop_pad_mode == 0, fn, "drop_pad_mode", "must be 0: INT4 dynamic quantization only supports "
                "drop_pad_mode=0", drop_pad_mode)
        require(x.dtype in (torch.float32, torch.bfloat16), fn, "x", "must be float32 or bfloat16: INT4 dynamic "
                "quantization only supports float32 or bfloat16 x", x)
        require(offset is None, fn, "offset", "must be None: INT4 dynamic quantization does not support offset",
                offset)
        require(x.shape[1] % 2 == 0, fn, "x", "must have an even hidden size for INT4 dynamic quantization", x)
        require(x_name in (None, "int4"), fn, "x_dtype", "must be torch_npu.int4 or None when quant_mode=13", x_name)
        if scale is not None:
            require(scale.dtype == torch.float32 and scale.dim() == 2 and scale.shape[0] == 1
                    and scale.shape[1] == x.shape[1], fn, "scale",
                    lambda: f"must be float32 [1, {x.shape[1]}] in INT4 dynamic quantization", scale)
        return
    require(x.dtype in (torch.float16, torch.bfloat16, torch.float32), fn, "x",
            lambda: f"must be float16, bfloat16 or float32 with quant_mode={quant_mode}", x)
    if drop_pad_mode == 1 and quant_mode not in (HIF8_CAST, HIF8_PER_TENSOR, HIF8_PER_TOKEN):
        unsupported(fn, "drop_pad_mode", drop_pad_mode, f"quant_mode={quant_mode} is defined for dropless routing "
                    "(drop_pad_mode=0); torch_npu's drop/pad output for it is an int8 buffer")
    if quant_mode == HIF8_PER_TENSOR:
        require(scale is not None and scale.numel() >= 1, fn, "scale",
                "is required for HiFloat8 per-tensor quantisation (quant_mode=7): shape (1,)", scale)
    if quant_mode == MXFP4:
        require(x.shape[1] % 2 == 0, fn, "x", "must have an even hidden size for MXFP4 (quant_mode=9)", x)


def _empty(x, expert_idx, quant_mode, expert_num, expert_capacity, drop_pad_mode, expert_tokens_num_type,
           active_expert_range, x_name):
    """torch_npu's outputs for a batch of 0 rows: op-plugin returns before the kernel, counts zeroed."""
    dev = x.device
    h = x.shape[1] * (2 if x_name == "float4_e2m1fn_x2" else 1)
    rows = expert_num * expert_capacity if drop_pad_mode == 1 else 0
    if drop_pad_mode == 1:
        expanded_x = torch.zeros(expert_num, expert_capacity, h, dtype=x.dtype if quant_mode == -1 else torch.int8,
                                 device=dev)
    elif quant_mode in (MXFP4, INT4_DYNAMIC):
        expanded_x = torch.zeros(0, h // 2, dtype=torch.uint8, device=dev)
    elif quant_mode in (HIF8_CAST, HIF8_PER_TENSOR, HIF8_PER_TOKEN):
        expanded_x = torch.zeros(0, h, dtype=torch.uint8, device=dev)
    elif quant_mode in MXFP8_MODES or quant_mode in FP8_GROUP_MODES or quant_mode in FP8_PER_BLOCK_MODES:
        fmt = {**MXFP8_MODES, **FP8_GROUP_MODES, **FP8_PER_BLOCK_MODES}[quant_mode]
        expanded_x = torch.zeros(0, h, dtype=fmt.torch_dtype, device=dev)
    elif quant_mode in (0, 1):
        expanded_x = torch.zeros(0, h, dtype=torch.int8, device=dev)
    else:
        expanded_x = x[:0]
    if quant_mode in MXFP8_MODES:
        cols = 2 * math.ceil(math.ceil(h / MXFP8_BLOCK) / 2)
        expanded_scale = _as_e8m0(torch.zeros(rows, cols, dtype=torch.uint8, device=dev))
    elif quant_mode in FP8_PER_BLOCK_MODES:
        expanded_scale = torch.zeros(rows, math.ceil(h / (2 * FP8_BLOCK)), 2, dtype=torch.float32, device=dev)
    elif quant_mode in FP8_GROUP_MODES:
        expanded_scale = torch.zeros(rows, math.ceil(h / FP8_BLOCK), dtype=torch.float32, device=dev)
    elif quant_mode == MXFP4 or (quant_mode == -1 and (x.dtype in _FLOAT8 or x_name == "float4_e2m1fn_x2")):
        expanded_scale = torch.zeros(rows, math.ceil(h / 64), 2, dtype=torch.uint8, device=dev)
    else:
        expanded_scale = torch.zeros(rows, dtype=torch.float32, device=dev)
    start, end = active_expert_range if active_expert_range else (0, expert_num)
    counts_shape = (expert_num, 2) if expert_tokens_num_type == 2 else (end - start,)
    return (expanded_x, torch.zeros(0, dtype=torch.int32, device=dev),
            torch.zeros(counts_shape, dtype=torch.int64, device=dev), expanded_scale)


def _route_bytes(fn, x, expert_idx, scale, x_name, routing):
    """quant_mode -1 with float8 x or one-byte codes named by x_dtype: the node routes each token's
    number (1-based, in a float32 column; 0 marks a padded row) and the rows and scales are
    gathered by it."""
    bs = x.shape[0]
    ids = torch.arange(1, bs + 1, dtype=torch.float32, device=x.device)[:, None]
    expanded_ids, row_idx, counts, _ = routing(ids, None)
    number = expanded_ids[..., 0].to(torch.int64)

    def gathered(t):
        # float8 through float32 (exact): ONNX's Gather takes no float8. Row 0 of the gathered
        # tensor is the padding's zero row, so a gather by the token number moves every row with
        # its bits (ONNX Runtime's Where gives +0 for a selected -0)
        v = t.float() if t.dtype in _FLOAT8 else t
        v = torch.cat([torch.zeros_like(v[:1]), v])
        rows = torch.index_select(v, 0, number.reshape(-1)).reshape(*number.shape, *t.shape[1:])
        return rows.to(t.dtype)

    expanded_x = gathered(x)
    if scale is None:  # torch_npu leaves it unwritten
        return expanded_x, row_idx, counts, torch.zeros(number.numel(), dtype=torch.float32, device=x.device)
    if x_name == "hifloat8":
        return expanded_x, row_idx, counts, gathered(scale.reshape(-1)).reshape(-1)
    # float8 / float4 rows carry their e8m0 block scales [N, CeilDiv(H, 64), 2]
    h = x.shape[1] * (2 if x_name == "float4_e2m1fn_x2" else 1)
    cols = math.ceil(h / 64)
    require(scale.dtype in (torch.float8_e8m0fnu, torch.uint8) and tuple(scale.shape) == (bs, cols, 2), fn,
            "scale", lambda: f"must be float8_e8m0fnu (or its uint8 bits) [{bs}, {cols}, 2] with "
            f"{x_name or str(x.dtype)[6:]} x", scale)
    bits = scale.view(torch.uint8) if scale.dtype == torch.float8_e8m0fnu else scale
    return expanded_x, row_idx, counts, gathered(bits).reshape(-1, cols, 2)


def init_routing_v2(fn, x, expert_idx, scale, offset, quant_mode, drop_pad_mode, expert_num, expert_capacity,
                    expert_tokens_num_type, active_expert_range, x_dtype, routing):
    """npu_moe_init_routing_v2's Ascend950 modes and x_dtype forms. ``routing(x, scale)`` runs the
    MoeInitRoutingV3 node with the call's other arguments (and the caller's quant_mode for 0 / 1)."""
    x_name = None if x_dtype is None else npu_dtype_name(x_dtype)
    if x_dtype is not None and x_name is None:
        fail(fn, "x_dtype", "must be a torch_npu dtype (torch_npu.hifloat8, float4_e2m1fn_x2, int4, ...) or None",
             x_dtype)
    require(x.dim() == 2, fn, "x", "must be 2-D [NUM_ROWS, H]", x)
    require(expert_idx.dim() == 2, fn, "expert_idx", "must be 2-D [NUM_ROWS, K]", expert_idx)
    if x_name == "int4" and quant_mode != INT4_DYNAMIC:
        fail(fn, "quant_mode", "INT4 dynamic quantization uses quant_mode=13. quant_mode=1 only supports INT8 "
             "dynamic quantization", quant_mode)
    byte_rows = quant_mode == -1 and (x.dtype in _FLOAT8 or x_name in ("hifloat8", "float4_e2m1fn_x2"))
    if quant_mode == -1 and x_name not in (None, "hifloat8", "float4_e2m1fn_x2", *(str(t)[6:] for t in _FLOAT8)):
        unsupported(fn, "x_dtype", x_dtype, "with quant_mode=-1 it names the codes one-byte x holds: "
                    "torch_npu.hifloat8 or float4_e2m1fn_x2 (float8 x needs none)")
    if quant_mode == -1 and x_name in ("hifloat8", "float4_e2m1fn_x2"):
        require(x.dtype in (torch.uint8, torch.int8), fn, "x", lambda: f"must hold one-byte codes (uint8 / int8) "
                f"with x_dtype={x_name}", x)
    if quant_mode in ASCEND950_MODES:
        _check_mode_args(fn, x, scale, offset, quant_mode, drop_pad_mode, x_name)
    if isinstance(x.shape[0], int) and x.shape[0] == 0:
        return _empty(x, expert_idx, quant_mode, expert_num, expert_capacity, drop_pad_mode, expert_tokens_num_type,
                      active_expert_range, x_name)
    if byte_rows:
        return _route_bytes(fn, x, expert_idx, scale, x_name, routing)
    if quant_mode not in ASCEND950_MODES:
        if x_name is not None:
            unsupported(fn, "x_dtype", x_dtype, f"quant_mode={quant_mode} quantises the x it is given; pass None")
        return routing(x, scale)
    expanded, row_idx, counts, _ = routing(x, None)
    lead = expanded.shape[:-1]
    rows = expanded.reshape(-1, expanded.shape[-1])
    if quant_mode in MXFP8_MODES:
        y, bits = mxfp8_round_scale(rows, MXFP8_MODES[quant_mode], AMAX_FLOOR if quant_mode >= 16 else None)
        out_scale = _as_e8m0(bits)
    elif quant_mode in FP8_GROUP_MODES:
        y, out_scale = fp8_group(rows, FP8_GROUP_MODES[quant_mode], AMAX_FLOOR if quant_mode >= 14 else None)
    elif quant_mode in FP8_PER_BLOCK_MODES:
        y, out_scale = fp8_per_block(rows, FP8_PER_BLOCK_MODES[quant_mode])
    elif quant_mode == MXFP4:
        y, out_scale = npu_dynamic_mx_quant(rows, dst_type=FLOAT4_E2M1)
    elif quant_mode == INT4_DYNAMIC:
        y, out_scale = int4_rows(rows, scale)
    else:
        y, out_scale = hifloat8_rows(rows, quant_mode, scale)
        if drop_pad_mode == 1:  # torch_npu's drop/pad buffer is int8: the same bytes, signed
            codes = y.to(torch.int32)
            y = torch.where(codes > 127, codes - 256, codes).to(torch.int8)
    if drop_pad_mode == 1:  # [E, C, H]; dropless rows keep their shape (ORT has no float8 Reshape)
        y = y.reshape(*lead, y.shape[-1])
    return y, row_idx, counts, out_scale


__all__ = ["hifloat8_codes", "init_routing_v2"]
