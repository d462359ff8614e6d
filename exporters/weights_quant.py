"""Quantized expert weights in an export (``--weights-quant``; docs/quantization.md): the scheme and
the weights already quantized for it. ``--weights-quant bfloat16`` is the 16-bit scheme: the expert
weights stored as bfloat16 (round to nearest even; values already bfloat16, as a bfloat16
checkpoint's, unchanged), no scales, run by MoeRoutedExperts' bfloat16 products.

``WeightsQuant(bits, block_size)`` goes to ``exporters.export(..., weights_quant=)``; the ``ort``
expert formulation then stores each block's expert weights as int8 / 4-bit with scales
(onnx_schemas.weight_quant) and runs them with ``MoeRoutedExperts`` at every routed-row count.

A float weight stack the torch side quantized itself (``models.quantize``: the block then computes
with the dequantized values, so eager torch and the graph agree to float32 rounding) or loaded from
a quantized checkpoint is recorded here by content (``record``): the export stores exactly those
integers and scales, never quantizing the dequantized values again. Other float weights are
quantized at export time.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field

import ml_dtypes
import numpy as np

from ascend_moe_onnx.onnx_schemas import weight_quant
from ascend_moe_onnx.onnx_schemas.moe_routed_experts import A8_STEP

BF16_BITS = 16  # the bfloat16 scheme's "bits": stored as bfloat16, no scales
SCHEMES = {**weight_quant.SCHEMES, "bfloat16": BF16_BITS}


def fingerprint(array: np.ndarray) -> str:
    """Content key of a float32 weight as the export stores it (dtype, shape and bytes)."""
    a = np.ascontiguousarray(array, dtype=np.float32)
    h = hashlib.blake2b(digest_size=20)
    h.update(f"{a.shape}".encode())
    h.update(a.data.cast("B"))
    return h.hexdigest()


@dataclass
class WeightsQuant:
    """A quantization scheme for expert weights and the stacks already quantized with it."""

    bits: int
    block_size: int = 0
    # 1: int8 activations too (MoeRoutedExperts act_quant 1: W8A8 / W4A8, per-token dynamic int8)
    act_quant: int = 0
    # fingerprint of a float32 weight (as exported) -> (q, scales) in the expert-stack layout
    stored: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        if self.bits == BF16_BITS:
            if self.block_size or self.act_quant:
                raise ValueError(f"weights bfloat16: no block size and float activations (block size 0, "
                                 f"activation quantization 0), got {self.block_size} and {self.act_quant}")
            return
        if self.bits not in weight_quant.BITS:
            raise ValueError(f"weights quantization: bits must be 8 or 4 (16: bfloat16), got {self.bits}")
        if self.block_size < 0 or (self.bits == 4 and self.block_size % 2):
            raise ValueError(f"weights quantization: block size must be >= 0 (0 = per channel) and even for "
                             f"4 bits, got {self.block_size}")
        if self.act_quant not in (0, 1):
            raise ValueError(f"activation quantization: must be 0 (float) or 1 (int8), got {self.act_quant}")
        if self.act_quant and self.block_size % A8_STEP:
            raise ValueError(f"int8 activations need a block size that is a multiple of {A8_STEP} (or 0), "
                             f"got {self.block_size}")

    @classmethod
    def from_scheme(cls, scheme: str, block_size: int | None = None, act_quant: str | None = None) -> WeightsQuant:
        """``int8`` (per channel unless ``block_size``) or ``int4`` (per group of ``block_size``,
        default weight_quant.DEFAULT_INT4_BLOCK); ``act_quant`` ``"int8"``: int8 activations too."""
        if act_quant not in (None, "int8"):
            raise ValueError(f"activation quantization: unknown scheme '{act_quant}' (known: int8)")
        if scheme not in SCHEMES:
            raise ValueError(f"weights quantization: unknown scheme '{scheme}' (known: {', '.join(SCHEMES)})")
        bits = SCHEMES[scheme]
        if bits == BF16_BITS and block_size:
            raise ValueError(f"bfloat16 weights have no scales: no block size, got {block_size}")
        if bits == BF16_BITS and act_quant is not None:
            raise ValueError(f"bfloat16 weights take float activations: no activation quantization, got {act_quant}")
        if bits == BF16_BITS:
            block_size = 0
        if block_size is None:
            block_size = weight_quant.DEFAULT_INT4_BLOCK if bits == 4 else 0
        return cls(bits, block_size, 1 if act_quant == "int8" else 0)

    @property
    def bfloat16(self) -> bool:
        """Whether the scheme stores bfloat16 weights (no scales) rather than integers."""
        return self.bits == BF16_BITS

    @property
    def name(self) -> str:
        if self.bfloat16:
            return "bfloat16"
        per = "per channel" if self.block_size == 0 else f"per group of {self.block_size}"
        return f"int{self.bits} {per}" + (", int8 activations" if self.act_quant else "")

    def encode(self, values: np.ndarray) -> tuple[np.ndarray, np.ndarray | None]:
        """(q, scales) of float weights [..., N, K]: integers and scales (onnx_schemas.weight_quant), or
        bfloat16 values rounded to nearest even and no scales."""
        if self.bfloat16:
            return np.asarray(values, np.float32).astype(ml_dtypes.bfloat16), None
        return weight_quant.quantize(values, self.bits, self.block_size)

    def decode(self, q: np.ndarray, scales: np.ndarray | None) -> np.ndarray:
        """The float32 weights that (q, scales) stand for (exact)."""
        if self.bfloat16:
            return np.asarray(q).astype(np.float32)
        return weight_quant.dequantize(q, scales, self.bits, self.block_size).astype(np.float32)

    def record(self, exported: np.ndarray, q: np.ndarray, scales: np.ndarray | None) -> None:
        """``exported`` (a float32 weight as the export will see it) is stored as ``q`` / ``scales``."""
        self.stored[fingerprint(exported)] = (np.ascontiguousarray(q),
                                              None if scales is None else np.ascontiguousarray(scales, np.float32))

    def quantized(self, exported: np.ndarray,
                  stack: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray | None]:
        """(q, scales) of a weight: as recorded for ``exported``, else ``stack`` (``exported`` in the
        expert-stack layout [E, N, K]; default ``exported`` itself) quantized now."""
        hit = self.stored.get(fingerprint(exported))
        if hit is not None:
            return hit
        return self.encode(exported if stack is None else stack)
