"""Quantized expert weights on the torch side (``--weights-quant``; docs/quantization.md).

``quantize_block(block, wq)`` (and hf.quantize.quantize_hf_model) quantize every routed expert
weight (and a shared expert the ``ort`` formulation runs in the same call, as s more experts) with
the scheme ``wq`` (exporters.weights_quant.WeightsQuant), replace the float weights by their
dequantized values, so that eager torch computes what the exported graph computes, and record the
integers and scales in ``wq`` for the export (which stores exactly those). ``load_quantized``
does the same with integers and scales read from a checkpoint (models.weights), without
quantizing anything.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

if TYPE_CHECKING:
    from .layers import RoutedMoE


def _set_dequantized(tensor: torch.Tensor, wq: WeightsQuant, q: np.ndarray, scales: np.ndarray,
                     from_stack=None) -> None:
    """``tensor`` := dequantized (q, scales) (``from_stack``: the stack layout back to the
    tensor's), recorded in ``wq`` under the float32 values the export will see."""
    values = wq.decode(q, scales)
    if from_stack is not None:
        values = from_stack(values)
    with torch.no_grad():
        tensor.copy_(torch.from_numpy(np.ascontiguousarray(values)).to(tensor.dtype))
    wq.record(tensor.detach().float().numpy(), q, scales)


def _quantize(tensor: torch.Tensor, wq: WeightsQuant, to_stack=None, from_stack=None) -> None:
    """Quantize ``tensor`` in place (its values become the dequantized ones; recorded in ``wq``)."""
    values = tensor.detach().float().numpy()
    q, scales = wq.encode(values if to_stack is None else to_stack(values))
    _set_dequantized(tensor, wq, q, scales, from_stack)


def shared_layouts(slices: int, inter: int, hidden: int) -> dict:
    """(to_stack, from_stack) per projection of a shared expert of ``slices`` * ``inter`` rows: its
    slices as experts ([s, I, H] gate / up, [s, H, I] down), and back."""
    s, I, H = slices, inter, hidden
    rows = (lambda w: w.reshape(s, I, H), lambda w: w.reshape(s * I, H))
    down = (lambda w: w.reshape(H, s, I).transpose(1, 0, 2), lambda w: w.transpose(1, 0, 2).reshape(H, s * I))
    return {"gate_proj": rows, "up_proj": rows, "down_proj": down}


def quantize_experts(gate: torch.Tensor, up: torch.Tensor, down: torch.Tensor, wq: WeightsQuant,
                     shared: tuple | None = None) -> None:
    """Quantize expert stacks gate / up [E, I, H], down [E, H, I] (views are fine) in place, and the
    shared expert ``shared`` = (gate [sI, H], up, down [H, sI]) slice by slice."""
    E, I, H = gate.shape
    G = wq.block_size
    if G and (H % G or I % G):
        raise ValueError(f"weights quantization: block size {G} must divide the hidden size {H} and the expert "
                         f"width {I}")
    if wq.bits == 4 and (H % 2 or I % 2):
        raise ValueError(f"weights quantization: int4 packs two values per byte: the hidden size {H} and the "
                         f"expert width {I} must be even")
    for w in (gate, up, down):
        _quantize(w, wq)
    if shared is not None:
        layouts = shared_layouts(shared[0].shape[0] // I, I, H)
        for w, name in zip(shared, ("gate_proj", "up_proj", "down_proj")):
            _quantize(w, wq, *layouts[name])


def quantize_block(block: RoutedMoE, wq: WeightsQuant) -> RoutedMoE:
    """A project block (models.layers.RoutedMoE) with its routed and shared experts quantized in
    place; ``block.weights_quant`` = ``wq`` (what export_block passes to the export)."""
    ex, sh = block.experts, getattr(block, "shared_experts", None)
    shared = None if sh is None else (sh.gate_proj, sh.up_proj, sh.down_proj)
    quantize_experts(ex.gate_proj, ex.up_proj, ex.down_proj, wq, shared)
    block.weights_quant = wq
    return block


def load_quantized(block: RoutedMoE, wq: WeightsQuant, stored: dict) -> RoutedMoE:
    """A block whose expert weights come quantized from a checkpoint: ``stored`` maps
    ``experts.gate_proj`` / ``up_proj`` / ``down_proj`` (and ``shared_experts.*``) to (q, scales)
    in the stack layout (shared: its slices as experts); the block gets the dequantized values, the
    export exactly these integers and scales (nothing is quantized again)."""
    for name, (q, scales) in stored.items():
        owner, proj = name.split(".")
        tensor = getattr(getattr(block, owner), proj)
        from_stack = None
        if owner == "shared_experts":
            I, H = block.experts.gate_proj.shape[1:]
            from_stack = shared_layouts(q.shape[0], I, H)[proj][1]
        _set_dequantized(tensor, wq, q, scales, from_stack)
    block.weights_quant = wq
    return block
