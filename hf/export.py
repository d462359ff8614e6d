"""Export a patched Hugging Face MoE model to ONNX: the whole causal LM (prefill) or MoE layers.

- ``PrefillLM``: ``input_ids`` [batch, sequence] -> ``logits`` [batch, sequence, vocab], no cache;
- ``MoELayers``: ``hidden_states`` [tokens, hidden] (+ ``input_ids`` [tokens] when a DeepSeek-V4
  hash layer is among them) -> one output ``layer_<i>`` per chosen MoE layer, each block applied
  to the same input.
Both go through ``exporters.export`` (one MoeGatingTopKHash node per MoE layer, function bodies
attached, checked).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import onnx
import torch

from ascend_moe_onnx.exporters import export
from ascend_moe_onnx.exporters.export_checks import SpecialisedDimsError
from ascend_moe_onnx.models.hf_routing import ALIASES, model_type_of

from . import w8a8
from .patching import patch
from .rotary import real_rotary

if TYPE_CHECKING:
    from transformers import PreTrainedModel

LAYER_INDEX = re.compile(r"\.(\d+)\.")  # the decoder layer's index in a module name (layers.3.mlp, blocks.3.ffn)


class PrefillLM(torch.nn.Module):
    """A causal LM's prefill graph: ``input_ids`` -> ``logits`` (no past key values)."""

    input_names = ("input_ids",)
    output_names = ("logits",)

    def __init__(self, model: PreTrainedModel):
        super().__init__()
        self.model = model

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        """Logits of every position (the last hidden state of a model without an LM head)."""
        out = self.model(input_ids=input_ids, use_cache=False)
        return out.logits if getattr(out, "logits", None) is not None else out.last_hidden_state

    def example_inputs(self, batch: int = 2, sequence: int = 8, seed: int = 0) -> tuple:
        """Random token ids."""
        g = torch.Generator().manual_seed(seed)
        return (torch.randint(0, self.model.config.get_text_config().vocab_size, (batch, sequence), generator=g),)

    def dynamic_shapes(self) -> tuple:
        """Batch and sequence dimensions stay dynamic."""
        return ({0: torch.export.Dim("batch"), 1: torch.export.Dim("sequence")},)


def moe_blocks(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """{layer index: MoE block} of a patched model (fused or not). A layer with several MoE blocks
    (ERNIE-4.5-VL's text and vision MoE) gives its first, the text one."""
    out: dict[int, torch.nn.Module] = {}
    for name, module in model.named_modules():
        if getattr(module, "_ascend_status", None) is not None:
            m = LAYER_INDEX.search(name + ".")
            if m:
                out.setdefault(int(m.group(1)), module)
    return out


class MoELayers(torch.nn.Module):
    """Chosen MoE blocks of a patched model side by side: each takes the same hidden states."""

    def __init__(self, blocks: dict[int, torch.nn.Module], hidden: int, vocab: int):
        super().__init__()
        self.layer_ids = sorted(blocks)
        self.blocks = torch.nn.ModuleList(blocks[i] for i in self.layer_ids)
        self.hidden, self.vocab = hidden, vocab
        self.hashed = any(getattr(b, "is_hash", False) for b in self.blocks)
        self.input_names = ("hidden_states", "input_ids") if self.hashed else ("hidden_states",)
        self.output_names = tuple(f"layer_{i}" for i in self.layer_ids)

    def forward(self, hidden_states: torch.Tensor, input_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, ...]:
        """Each block's output on ``hidden_states`` [T, H]."""
        x = hidden_states[None]  # HF blocks take [batch, sequence, hidden]
        outs = []
        for block in self.blocks:
            hashed = getattr(block, "is_hash", False)
            kw = {"input_ids": input_ids[None]} if hashed and input_ids is not None else {}
            y = block(x, **kw)
            outs.append((y[0] if isinstance(y, tuple) else y)[0])  # some blocks also return router logits
        return tuple(outs)

    def example_inputs(self, tokens: int = 8, seed: int = 0, dtype: torch.dtype = torch.float32) -> tuple:
        """Random hidden states (and token ids when a hash layer is present)."""
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(tokens, self.hidden, generator=g).to(dtype)
        return (x, torch.randint(0, self.vocab, (tokens,), generator=g)) if self.hashed else (x,)

    def dynamic_shapes(self) -> tuple:
        """The token dimension stays dynamic."""
        tokens = torch.export.Dim("tokens")
        return tuple({0: tokens} for _ in self.input_names)


def parse_layers(text: str) -> tuple[int, int]:
    """'N' or 'N-M' -> (N, M) inclusive."""
    m = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", text or "")
    if not m:
        raise ValueError(f"--layers must be N or N-M (layer numbers), got '{text}'")
    first, last = int(m.group(1)), int(m.group(2) or m.group(1))
    if last < first:
        raise ValueError(f"--layers {text}: the last layer is before the first")
    return first, last


def load(directory: str | os.PathLike, dtype: torch.dtype = torch.float32) -> PreTrainedModel:
    """An HF causal LM from a local checkpoint directory, in eval mode (nothing downloaded).

    A config naming an alias architecture (Kimi-K2's ``kimi_k2``, which ships remote code) is
    loaded with the transformers class it maps to (DeepSeek-V3); no remote code runs. An Ascend
    w8a8 checkpoint (int8 weights with ``weight_scale``) loads dequantized, its integers and
    scales kept in ``model._ascend_w8a8`` for the export (hf.w8a8).
    """
    import json

    from transformers import AutoConfig, AutoModelForCausalLM

    path = Path(directory)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"no config.json in {path} (expected a save_pretrained directory)")
    if w8a8.int8_weights(path):  # an Ascend w8a8 checkpoint: transformers loads a dequantized copy
        import tempfile

        with tempfile.TemporaryDirectory() as copy:
            stored = w8a8.dequantized_copy(path, Path(copy))
            model = load(copy, dtype)
        model._ascend_w8a8 = stored  # type: ignore[assignment]  # torch's stub: Module attributes are tensors or modules
        return model
    fields = json.loads((path / "config.json").read_text())
    kw = {}
    alias = ALIASES.get(fields.get("model_type"))
    if alias is not None:
        fields = {k: v for k, v in fields.items() if k not in ("model_type", "auto_map", "architectures")}
        kw["config"] = AutoConfig.for_model(alias, **fields)
    try:
        return AutoModelForCausalLM.from_pretrained(path, dtype=dtype, local_files_only=True, **kw).eval()
    except ValueError as e:  # a multimodal checkpoint: its text model is what holds the MoE layers
        if "Unrecognized configuration class" not in str(e):
            raise
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(path, dtype=dtype, local_files_only=True, **kw).eval()


def first_line(error: BaseException, limit: int = 300) -> str:
    """The cause of an exception in one line, at most ``limit`` characters: torch.onnx's
    "Exception summary" line when there is one, else the message's first line (no colour codes)."""
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(error))
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines[:-1]):
        if line == "## Exception summary":
            return lines[i + 1][:limit]
    return (lines[0] if lines else type(error).__name__)[:limit]


def layer_summary(model: PreTrainedModel) -> list[str]:
    """One line per MoE layer of a patched model (fused / unfused, and why) plus a count line with
    the dense layers (decoder layers without an MoE block)."""
    from .patching import layer_status

    status = layer_status(model)
    lines = [f"  {name}: {state}" + (f" ({note})" if note else "") for name, (state, note) in status.items()]
    layer_ids = {int(m.group(1)) for name in status for m in [LAYER_INDEX.search(name + ".")] if m}
    text = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    total = getattr(text, "num_hidden_layers", None)
    fused = sum(state == "fused" for state, _ in status.values())
    dense = f", {total - len(layer_ids)} dense" if isinstance(total, int) and total >= len(layer_ids) else ""
    return ["MoE layers:", *lines, f"summary: {fused} fused, {len(status) - fused} unfused{dense}"]


# Architectures whose HF causal LM torch.onnx cannot export whole (their MoE layers export).


def export_model(model: PreTrainedModel, path: str | os.PathLike | None = None, *,
                 layers: tuple[int, int] | None = None, tokens: int = 8,
                 **kwargs: Any) -> tuple[onnx.ModelProto, torch.nn.Module]:
    """Patch ``model`` (if not yet) and export it: the prefill LM, or MoE ``layers`` (first, last).
    Returns (ONNX ModelProto, the exported wrapper module). A model without MoE layers (e.g.
    Qwen3-MoE with ``num_experts: 0``) exports whole as the dense model it is."""
    if not moe_blocks(model):
        patch(model)
    if layers is None:
        wrapper: PrefillLM | MoELayers = PrefillLM(model)
        example = wrapper.example_inputs(2, tokens)
    else:
        blocks = moe_blocks(model)
        chosen = {i: b for i, b in blocks.items() if layers[0] <= i <= layers[1]}
        if not chosen:
            raise ValueError(f"--layers {layers[0]}-{layers[1]}: no MoE layer there "
                             f"(MoE layers: {sorted(blocks) or 'none'})")
        text = model.config.get_text_config()
        wrapper = MoELayers(chosen, text.hidden_size, text.vocab_size)
        example = wrapper.example_inputs(tokens, dtype=next(model.parameters()).dtype)
    try:
        with real_rotary(model):
            proto = export(wrapper, example, path, dynamic_shapes=wrapper.dynamic_shapes(),
                           input_names=list(wrapper.input_names), output_names=list(wrapper.output_names),
                           **kwargs)
    except SpecialisedDimsError as e:
        if layers is not None:
            raise
        fixed = ", ".join(f"'{n}' dimension {d} at {v}" for n, d, v in e.found)
        raise ValueError(f"{model_type_of(model.config)}: the whole model cannot be exported with a dynamic "
                         f"sequence: its HF code fixes {fixed} (a Python loop or int over the size, e.g. a "
                         f"Mamba scan); export its MoE layers with --layers N-M (layers=(N, M)); MoE layers: "
                         f"{_layer_list(model)}") from None
    return proto, wrapper


def _layer_list(model: PreTrainedModel) -> str:
    """'1-3, 5' for the patched MoE layers of ``model``; 'none' without any."""
    ids = sorted(moe_blocks(model))
    runs: list[list[int]] = []
    for i in ids:
        if runs and i == runs[-1][-1] + 1:
            runs[-1].append(i)
        else:
            runs.append([i])
    return ", ".join(f"{r[0]}-{r[-1]}" if len(r) > 1 else str(r[0]) for r in runs) or "none"


class ascend_translations:
    """Context manager: transformers' own ONNX exporter (``transformers.exporters.OnnxExporter``)
    translates the ascend.moe torch ops while inside it.

    transformers keeps its translations in a module-level table and takes none from the caller;
    this adds ``exporters.custom_translation_table()`` to it and restores the table on exit.
    """

    def __enter__(self) -> ascend_translations:
        from transformers.exporters import exporter_onnx

        from ascend_moe_onnx.exporters import custom_translation_table

        self._table = exporter_onnx._ONNX_TRANSLATION_TABLE
        self._saved = dict(self._table)
        self._table.update(custom_translation_table())
        return self

    def __exit__(self, *exc: object) -> None:
        self._table.clear()
        self._table.update(self._saved)
