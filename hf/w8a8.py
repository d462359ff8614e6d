"""Hugging Face checkpoints in the Ascend w8a8 layout (docs/quantization.md): int8 ``<proj>.weight``
[N, K] beside ``<proj>.weight_scale`` [N, 1] (or [N]) and an all-zero ``<proj>.weight_offset``.

transformers would cast the integers to the model dtype and drop the scales, so ``--hf`` reads such
a checkpoint here: ``dequantized_copy`` writes a float32 copy (``q * scale``, the values the model
computes with) that transformers loads, and keeps the integers and scales; ``record_experts`` hands
them to the export (exporters.weights_quant), which stores them as read, never quantized again.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import cast

import numpy as np
import torch

from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
from ascend_moe_onnx.models.quantize import shared_layouts
from ascend_moe_onnx.models.weights import dequantize_ascend_int8

SCALE, OFFSET = "_scale", "_offset"


def int8_weights(path: Path) -> list[str]:
    """Names of the int8 ``...weight`` tensors that have a ``weight_scale`` beside them."""
    from safetensors import safe_open

    found = []
    for file in sorted(path.glob("*.safetensors")):
        with safe_open(file, "pt") as f:
            keys = set(f.keys())
            found += [k[: -len(SCALE)] for k in sorted(keys) if k.endswith(".weight" + SCALE)
                      and k[: -len(SCALE)] in keys and f.get_slice(k[: -len(SCALE)]).get_dtype() == "I8"]
    return found


def _dequantize(name: str, q: torch.Tensor, scale: torch.Tensor, offset: torch.Tensor | None):
    w, s = dequantize_ascend_int8(f"'{name}'", q, scale, () if offset is None else (offset,))
    return w, (q.numpy().copy(), s.numpy().copy())


def dequantized_copy(path: Path, out: Path) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Write ``path``'s checkpoint to ``out`` with every int8 weight dequantized to float32 and its
    scale / offset dropped; returns {weight name: (q int8 [N, K], scales float32 [N])}."""
    from safetensors.torch import load_file, save_file

    stored: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for item in path.iterdir():
        if item.is_file() and item.suffix != ".safetensors" and item.name != "model.safetensors.index.json":
            shutil.copy(item, out / item.name)
    for file in sorted(path.glob("*.safetensors")):
        tensors = load_file(file)
        for name in [k for k in tensors if k.endswith(".weight") and tensors[k].dtype == torch.int8]:
            if name + SCALE not in tensors:
                raise ValueError(f"'{name}' is int8 without a '{name}{SCALE}' beside it (the Ascend w8a8 layout)")
            tensors[name], stored[name] = _dequantize(name, tensors[name], tensors.pop(name + SCALE),
                                                      tensors.pop(name + OFFSET, None))
        save_file(tensors, out / file.name, metadata={"format": "pt"})
    index = path / "model.safetensors.index.json"
    if index.is_file():
        data = json.loads(index.read_text())
        data["weight_map"] = {k: v for k, v in data.get("weight_map", {}).items() if not k.endswith((SCALE, OFFSET))}
        (out / index.name).write_text(json.dumps(data))
    return stored


def _stack(stored: dict, prefix: str, count: int, proj: str) -> tuple[np.ndarray, np.ndarray]:
    names = [f"{prefix}experts.{j}.{proj}.weight" for j in range(count)]
    missing = [n for n in names if n not in stored]
    if missing:
        raise ValueError(f"w8a8 checkpoint: '{missing[0]}' is not int8 with a weight_scale while other "
                         f"experts' weights are: every routed expert must be int8")
    return np.stack([stored[n][0] for n in names]), np.stack([stored[n][1] for n in names])


def record_experts(blocks: dict[str, torch.nn.Module], stored: dict, wq: WeightsQuant) -> int:
    """Every patched MoE block ({module name: block}) whose experts come int8 from the checkpoint:
    its gate / up / down stacks handed to the export (``ascend_weights``) with the checkpoint's
    integers and scales recorded in ``wq`` (and its folded plain shared expert's). Returns the count."""
    from . import experts as hf_experts

    count = 0
    for name, block in blocks.items():
        ex = cast(torch.nn.Module, block.experts)
        gate, up, down = hf_experts.expert_weights(ex)
        E = gate.shape[0]
        if f"{name}.experts.0.gate_proj.weight" not in stored:
            continue
        stacks = []
        for proj, w in (("gate_proj", gate), ("up_proj", up), ("down_proj", down)):
            q, s = _stack(stored, f"{name}.", E, proj)
            t = torch.nn.Parameter(w.detach().clone().contiguous(), requires_grad=False)
            wq.record(t.detach().float().numpy(), q, s)
            stacks.append(t)
        ex.ascend_gate, ex.ascend_up, ex.ascend_down = stacks
        # torch's stub types Module attributes as tensors or modules; this one is a callable
        ex.ascend_weights = lambda ex=ex: (ex.ascend_gate, ex.ascend_up, ex.ascend_down)  # type: ignore[assignment]
        _record_shared(block, name, stored, wq, gate.shape[1], gate.shape[2])
        count += 1
    return count


def _record_shared(block, name: str, stored: dict, wq: WeightsQuant, inter: int, hidden: int) -> None:
    """A folded plain shared expert stored int8: its integers recorded in the stack layout."""
    from . import experts as hf_experts

    mlp = getattr(block, "shared_experts", None)
    if mlp is None or f"{name}.shared_experts.gate_proj.weight" not in stored:
        return
    formulation = getattr(block, "experts_formulation", None) or block.experts.experts_formulation
    if not hf_experts.folds_shared(formulation, mlp):
        return  # the shared expert stays a float MLP beside the experts' call
    slices = mlp.gate_proj.weight.shape[0] // inter
    layouts = shared_layouts(slices, inter, hidden)
    for proj in ("gate_proj", "up_proj", "down_proj"):
        q, s = stored[f"{name}.shared_experts.{proj}.weight"]
        # per-row scales in the stack layout: down [H, sI] -> [s, H, I] keeps its H rows' scales
        scales = np.broadcast_to(s, (slices, hidden)) if proj == "down_proj" else s.reshape(slices, inter)
        wq.record(getattr(mlp, proj).weight.detach().float().numpy(), layouts[proj][0](q),
                  np.ascontiguousarray(scales))


def quantized_export(model: torch.nn.Module, wq: WeightsQuant | None) -> WeightsQuant | None:
    """The scheme to export ``model`` with: ``wq`` for a float checkpoint; for one loaded from an
    Ascend w8a8 checkpoint (``hf.export.load``) int8 per channel with the checkpoint's integers and
    scales recorded (the model patched). ValueError for another scheme or no int8 experts."""
    stored = getattr(model, "_ascend_w8a8", None)
    if not stored:
        return wq
    if wq is not None and (wq.bits, wq.block_size) != (8, 0):
        raise ValueError(f"--weights-quant {wq.name}: the checkpoint is int8 per channel (Ascend w8a8); its "
                         "integers are exported as stored (give no --weights-quant, or int8)")
    from .patching import patch

    patch(model)
    wq = WeightsQuant(8, 0)
    blocks = {n: m for n, m in model.named_modules() if getattr(m, "_ascend_status", None) is not None}
    if not record_experts(blocks, stored, wq):
        raise ValueError(f"w8a8 checkpoint: '{next(iter(stored))}' is int8, but no MoE block's experts are "
                         "(expected int8 'experts.{j}.gate_proj|up_proj|down_proj.weight')")
    return wq
