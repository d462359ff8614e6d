"""torch_npu's load-time quantisation helpers: ``npu_trans_quant_param`` (float32 scales packed into
int64 quantisation parameters) and ``npu_convert_weight_to_int4pack`` (int4 values packed 8 to an
int32), with the decoding of a packed parameter that the quantized matmuls apply.

``npu_trans_quant_param`` as op-plugin's docs define it: the float32 bits of ``scale`` truncated to
FP19 (``bits & 0xFFFFE000``, sign, 8 exponent and the top 10 mantissa bits) in bits 0-31, bit 46
set; with ``offset``, ``clamp(round(offset), -256, 255)`` as 9 bits in bits 37-45. ``round_mode=1``
rounds the scale to FP19 (nearest, ties to even) before the truncation.
:func:`quant_param_scale` reads the float32 scale back with integer arithmetic (Mod, Div, Pow in
ONNX) so that a packed scale exports as standard ops.
"""

from __future__ import annotations

import torch

from ._args import require

FP19_MASK = 0xFFFFE000
QUANT_PARAM_FLAG = 1 << 46
_DROPPED = 1 << 13          # float32 mantissa bits below FP19's 10
INT4_PER_INT32 = 8


def _float_bits(t: torch.Tensor) -> torch.Tensor:
    """The IEEE bits of float32 ``t`` as non-negative int64."""
    return t.contiguous().view(torch.int32).to(torch.int64) % (1 << 32)


def npu_trans_quant_param(scale, offset=None, round_mode=0):
    """torch_npu.npu_trans_quant_param: int64 ``[...]`` quantisation parameters from float32 ``scale``
    (1-D or 2-D) and an optional float32 ``offset``."""
    fn = "npu_trans_quant_param"
    if round_mode is None:
        round_mode = 0
    require(round_mode in (0, 1), fn, "round_mode", "must be 0 or 1", round_mode)
    require(isinstance(scale, torch.Tensor) and scale.dtype == torch.float32, fn, "scale", "must be a float32 tensor",
            scale)
    require(scale.dim() in (1, 2) and scale.numel() > 0, fn, "scale", "must be a non-empty 1-D or 2-D tensor", scale)
    bits = _float_bits(scale)
    if round_mode == 1:
        low = bits % _DROPPED
        keep = bits // _DROPPED
        up = (low > _DROPPED // 2) | ((low == _DROPPED // 2) & (keep % 2 == 1))
        bits = (keep + up.to(torch.int64)) * _DROPPED
    out = (bits & FP19_MASK) | QUANT_PARAM_FLAG
    if offset is None:
        return out
    require(isinstance(offset, torch.Tensor) and offset.dtype == torch.float32, fn, "offset",
            "must be a float32 tensor", offset)
    require(offset.dim() == scale.dim() and offset.numel() > 0, fn, "offset",
            lambda: f"must be non-empty and have scale's {scale.dim()} dims", offset)
    if scale.dim() == 2:
        require(offset.shape == scale.shape, fn, "offset", lambda: f"must have scale's shape {list(scale.shape)}",
                offset)
    else:
        require(scale.shape[0] == offset.shape[0] or 1 in (scale.shape[0], offset.shape[0]), fn, "offset",
                lambda: f"must have 1 or {scale.shape[0]} values", offset)
    off = offset.round().clamp(-256, 255).to(torch.int64) % 512
    out, off = torch.broadcast_tensors(out, off)
    return (out & 0x4000FFFFFFFF) | (off << 37)


def quant_param_scale(param: torch.Tensor) -> torch.Tensor:
    """The float32 scale of int64 quantisation parameters (bits 0-31 read as float32; FP19 as packed).

    Integer arithmetic only (sign, exponent and mantissa fields by Mod / Div), exact in float32."""
    low = param.to(torch.int64) % (1 << 32)
    sign = low // (1 << 31)
    exponent = (low // (1 << 23)) % 256
    mantissa = (low % (1 << 23)).to(torch.float32)
    normal = exponent > 0
    magnitude = torch.where(
        normal,
        torch.pow(2.0, (exponent - 127).to(torch.float32)) * (1.0 + mantissa / float(1 << 23)),
        mantissa * float(2.0 ** -149),
    )
    return torch.where(sign == 1, -magnitude, magnitude)


# float32 values with a float4_e2m1 code, by their float32 bits under 0xFFC00000 (op-plugin's table)
_E2M1_BITS = {0x00000000: 0, 0x3F000000: 1, 0x3F800000: 2, 0x3FC00000: 3, 0x40000000: 4, 0x40400000: 5,
              0x40800000: 6, 0x40C00000: 7}
E2M1_MASK = 0xFFC00000


def _e2m1_codes(weight: torch.Tensor) -> torch.Tensor:
    """float4_e2m1 codes (int64 in [0, 16)) of float32 values, as op-plugin's conversion looks them up:
    the bits under 0xFFC00000 (sign, exponent, first mantissa bit) in the table of the 16 e2m1
    values; bits not in it give code 0."""
    bits = _float_bits(weight) & E2M1_MASK
    magnitude = bits % (1 << 31)
    code = torch.zeros_like(bits)
    for key, value in _E2M1_BITS.items():
        code = torch.where(magnitude == key, torch.full_like(code, value), code)
    known = torch.zeros_like(bits, dtype=torch.bool)
    for key in _E2M1_BITS:
        known = known | (magnitude == key)
    return torch.where(known, code + 8 * (bits // (1 << 31)), torch.zeros_like(code))


def npu_convert_weight_to_int4pack(weight, inner_k_tiles=0):
    """torch_npu.npu_convert_weight_to_int4pack: int32 ``[..., n]`` holding values in [-8, 7] packed 8
    to an int32 along the last dim, ``[..., n / 8]`` (value j of each 8 in bits 4j..4j+3), as
    op-plugin's ``convert_to_int4_pack`` does. float32 ``weight`` (float4_e2m1 values, torch_npu on
    Ascend 950) packs their e2m1 codes the same way into a float32 tensor's bits
    (:func:`_e2m1_codes`). ``inner_k_tiles`` is reserved (unused by torch_npu)."""
    from .quant import pack_int4

    fn = "npu_convert_weight_to_int4pack"
    require(isinstance(weight, torch.Tensor) and weight.dtype in (torch.int32, torch.float32), fn, "weight",
            "must be an int32 tensor of int4 values or a float32 tensor of float4_e2m1 values", weight)
    require(weight.dim() in (2, 3), fn, "weight", "must have 2 or 3 dims (torch_npu: dim num 2/3)", weight)
    require(weight.is_contiguous(), fn, "weight", "must be contiguous (torch_npu: weight should be contiguous)",
            weight)
    require(all(s > 0 for s in weight.shape) and weight.shape[-1] % INT4_PER_INT32 == 0, fn, "weight",
            "must have non-empty dims and a last dim divisible by 8", weight)
    if weight.dtype == torch.float32:
        codes = _e2m1_codes(weight)
        return pack_int4(codes - 16 * (codes >= 8).to(torch.int64)).view(torch.float32)
    bad = (weight < -8) | (weight > 7)
    require(not bool(bad.any()), fn, "weight",
            lambda: f"must hold int4 values in [-8, 7] (found {int(weight[bad][0])})", weight)
    return pack_int4(weight)


__all__ = ["npu_convert_weight_to_int4pack", "npu_trans_quant_param", "quant_param_scale"]
