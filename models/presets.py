"""The preset registry: name -> block class, tiny and full configs; ``build`` makes a block.

Full presets keep each model's published sizes (hidden size, expert count, top-k, routing
attributes, shared experts, expert width). Their weights are random unless ``weights`` is given;
``intermediate`` overrides the expert width, e.g. to fit a 256-expert layer in memory and under the
2 GiB ONNX protobuf limit for a router benchmark (see ``weight_bytes``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import torch

from . import deepseek, deepseek_v4, expert_parallel, qwen_mixtral
from .layers import DTYPES, MoEConfig, init_random

if TYPE_CHECKING:
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

PRESETS: dict[str, dict] = {
    **deepseek.PRESETS,
    **deepseek_v4.PRESETS,
    **qwen_mixtral.PRESETS,
    **expert_parallel.PRESETS,
}
SIZES = ("tiny", "full")
PROTOBUF_LIMIT = 2**31  # bytes: an ONNX model without external data must stay below this
FULL_WEIGHT_BUDGET = 2**30  # bytes: full presets with random weights shrink their expert width to fit


class PresetError(ValueError):
    """Unknown preset, size or dtype (message names the valid choices)."""


def preset(name: str) -> dict:
    """The registry entry of a preset, or a PresetError naming the known ones."""
    if name not in PRESETS:
        raise PresetError(f"unknown preset '{name}' (known: {', '.join(PRESETS)})")
    return PRESETS[name]


def default_dtype(name: str) -> str:
    """The dtype a preset is verified in unless told otherwise."""
    return preset(name).get("default_dtype", "float32")


def config(name: str, size: str = "tiny", intermediate: int | None = None) -> MoEConfig:
    """The MoEConfig of a preset at a size, with an optional expert-width override."""
    if size not in SIZES:
        raise PresetError(f"unknown size '{size}' (known: {', '.join(SIZES)})")
    cfg = preset(name)[size]
    return cfg.replace(intermediate=intermediate) if intermediate else cfg


def fit_intermediate(cfg: MoEConfig, dtype: str, budget: int = FULL_WEIGHT_BUDGET) -> int:
    """The largest expert width (the published one, or a power of two below it) whose weights fit
    in ``budget`` bytes."""
    width = cfg.intermediate
    while width > 1 and weight_bytes(cfg.replace(intermediate=width), dtype) > budget:
        width = 1 << (width.bit_length() - 1) if width & (width - 1) else width // 2
    return width


def weight_bytes(cfg: MoEConfig, dtype: str) -> int:
    """Approximate size of a block's weights in bytes (router weights counted as float32)."""
    item = torch.finfo(DTYPES[dtype]).bits // 8
    experts = 3 * cfg.experts * cfg.hidden * cfg.intermediate + 3 * cfg.shared * cfg.intermediate * cfg.hidden
    router = 0 if cfg.ranks else cfg.experts * cfg.hidden * 4
    return experts * item + router + (cfg.vocab * cfg.top_k * 8 if cfg.hash else 0)


def build(name: str, size: str = "tiny", dtype: str | None = None, *,
          weights: str | os.PathLike | dict[str, torch.Tensor] | None = None, layer: str | None = None,
          intermediate: int | None = None, seed: int = 0, weights_quant: WeightsQuant | None = None) -> torch.nn.Module:
    """A block of preset ``name``: random seeded weights, or one layer of a checkpoint (``weights``:
    safetensors file, directory or dict; ``layer``: which MoE layer when there are several).
    ``weights_quant`` (exporters.weights_quant.WeightsQuant): its experts quantized (models.quantize);
    a checkpoint whose experts are already quantized (Ascend w8a8 layout) keeps its integers and
    scales, and ``weights_quant`` must then be None or int8 per channel."""
    entry = preset(name)
    dtype = dtype or default_dtype(name)
    if dtype not in DTYPES:
        raise PresetError(f"unknown dtype '{dtype}' (known: {', '.join(DTYPES)})")
    cfg = config(name, size, intermediate)
    note = ""
    if weights is None and intermediate is None and size == "full":
        width = fit_intermediate(cfg, dtype)
        if width != cfg.intermediate:
            note = (f"expert width {cfg.intermediate} -> {width} so the random weights fit in "
                    f"{FULL_WEIGHT_BUDGET >> 30} GiB (--intermediate to choose)")
            cfg = cfg.replace(intermediate=width)
    tensors, stored = None, None
    if weights is not None:
        from . import weights as w

        tensors, sizes = w.read_layer(weights, layer)
        stored = sizes.pop("quantized", None)
        cfg = w.configure(cfg, sizes, tensors, hf=entry.get("hf"))
        if cfg.ranks:  # expert-parallel block: the layer's experts become the local experts
            tensors = {k: v for k, v in tensors.items() if k.startswith("experts.")}
    block = entry["cls"](cfg, DTYPES[dtype]).eval().requires_grad_(False)
    if tensors is None:
        init_random(block, seed)
        if hasattr(block, "gate"):  # checkpoints store the router weight in the model dtype
            with torch.no_grad():
                block.gate.weight.copy_(block.gate.weight.to(DTYPES[dtype]))
    else:
        from . import weights as w

        w.load_into(block, tensors)
        if "gate.additional_bias" not in tensors and hasattr(getattr(block, "gate", None), "additional_bias"):
            # Image-token presets need an additional bias; without one in the checkpoint, image
            # tokens are ranked by the plain scores.
            block.gate.additional_bias.zero_()
    block.preset, block.size, block.dtype_name, block.note = name, size, dtype, note
    return _quantized(block, weights_quant, stored)


def _quantized(block, weights_quant, stored):
    """``block`` with the experts quantized as asked or as the checkpoint stores them (models.quantize)."""
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    from . import quantize

    if stored is not None:
        if weights_quant is not None and (weights_quant.bits, weights_quant.block_size) != (8, 0):
            raise PresetError(f"weights: the checkpoint's experts are int8 per channel (Ascend w8a8 layout); "
                              f"--weights-quant {weights_quant.name} would quantize them again")
        return quantize.load_quantized(block, WeightsQuant(8, 0), stored)
    if weights_quant is not None:
        return quantize.quantize_block(block, weights_quant)
    return block
