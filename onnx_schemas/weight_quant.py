"""Quantized expert weights (docs/quantization.md): the one definition of their layout, rounding
and dequantization, shared by MoeRoutedExperts' reference, the exporters and the benchmarks.

A float weight matrix [..., N, K] (N output rows, each a dot product over K inputs, the
``MoeRoutedExperts`` layout) is stored as

- ``bits = 8``: int8 ``q`` [..., N, K];
- ``bits = 4``: int8 [..., N, K / 2], two signed 4-bit values per byte: element 2j in the low
  nibble, 2j + 1 in the high nibble, each two's complement in [-8, 7] (ONNX INT4's packing and
  Ascend's DT_INT4 memory order);

with float32 scales ``s``: one per row [..., N] (``block_size = 0``, per channel) or one per
``block_size`` consecutive inputs of a row [..., N, K / block_size] (per group). The weight is
``w = q * s`` (symmetric: no offset, Ascend's antiquant with an absent offset).

Quantization (``quantize``): ``s = max |w| / qmax`` over the row or group (qmax 127 for int8, 7 for
int4; 0 for an all-zero group), ``q = round_half_to_even(w / s)`` in float64, clipped to
[-qmax, qmax]. Kernels accept the full ranges [-128, 127] / [-8, 7].
"""

from __future__ import annotations

import numpy as np

BITS = (8, 4)
QMAX = {8: 127, 4: 7}
SCHEMES = {"int8": 8, "int4": 4}  # --weights-quant names -> bits
DEFAULT_INT4_BLOCK = 32  # per-group size the exports use for int4 unless told


def pack_int4(q: np.ndarray) -> np.ndarray:
    """int values in [-8, 7] [..., K] (K even) -> int8 [..., K / 2], element 2j in the low nibble."""
    q = np.asarray(q)
    if q.shape[-1] % 2:
        raise ValueError(f"pack_int4: the last dimension must be even, got {q.shape[-1]}")
    u = (q.astype(np.int16) & 0xF).astype(np.uint8)
    return (u[..., 0::2] | (u[..., 1::2] << 4)).view(np.int8)


def unpack_int4(packed: np.ndarray) -> np.ndarray:
    """int8 [..., K / 2] of two nibbles each -> int8 [..., K] in [-8, 7] (inverse of pack_int4)."""
    b = np.asarray(packed).view(np.uint8).astype(np.int16)
    lo, hi = b & 0xF, b >> 4
    out = np.empty(b.shape[:-1] + (2 * b.shape[-1],), np.int8)
    out[..., 0::2] = np.where(lo >= 8, lo - 16, lo)
    out[..., 1::2] = np.where(hi >= 8, hi - 16, hi)
    return out


def quantize(w: np.ndarray, bits: int, block_size: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Float weights [..., N, K] -> (q, scales) in the layout above (symmetric, round half to even)."""
    if bits not in BITS:
        raise ValueError(f"quantize: bits must be 8 or 4, got {bits}")
    if np.ndim(w) >= 3 and np.shape(w)[0] > 0:  # one matrix at a time: no float64 copy of a whole expert stack
        parts = [quantize(m, bits, block_size) for m in w]
        return np.stack([q for q, _ in parts]), np.stack([s for _, s in parts])
    w = np.asarray(w, np.float64)
    K = w.shape[-1]
    G = block_size or K
    if G < 1 or K % G:
        raise ValueError(f"quantize: block_size {block_size} must divide the row length {K}")
    groups = w.reshape(w.shape[:-1] + (K // G, G))
    scale = (np.abs(groups).max(axis=-1) / QMAX[bits]).astype(np.float32)
    s64 = scale.astype(np.float64)[..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s64 > 0, np.rint(groups / np.where(s64 > 0, s64, 1.0)), 0.0)
    q = np.clip(q, -QMAX[bits], QMAX[bits]).astype(np.int8).reshape(w.shape)
    if block_size == 0:
        scale = scale[..., 0]
    return (pack_int4(q) if bits == 4 else q), scale


def dequantize(q: np.ndarray, scales: np.ndarray, bits: int, block_size: int = 0) -> np.ndarray:
    """(q, scales) -> float64 weights [..., N, K]: ``q * s``, exactly (no rounding)."""
    values = unpack_int4(q) if bits == 4 else np.asarray(q)
    values = values.astype(np.float64)
    s = np.asarray(scales, np.float64)
    if block_size == 0:
        return values * s[..., None]
    K = values.shape[-1]
    grouped = values.reshape(values.shape[:-1] + (K // block_size, block_size))
    return (grouped * s[..., None]).reshape(values.shape)


def fake_quantize(w: np.ndarray, bits: int, block_size: int = 0) -> np.ndarray:
    """``w`` through quantize and dequantize, rounded to float32: the weights a quantized graph uses."""
    q, s = quantize(w, bits, block_size)
    return dequantize(q, s, bits, block_size).astype(np.float32)
