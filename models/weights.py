"""Load one MoE layer's weights from a Hugging Face-style checkpoint (safetensors file or directory).

Accepted key names, after an optional layer prefix such as ``model.layers.3.`` and a block name
(``mlp.``, ``block_sparse_moe.`` or ``ffn.``):

- router: ``gate.weight``; ``gate.e_score_correction_bias`` or ``gate.bias``; ``gate.tid2eid``;
  ``gate.additional_bias``;
- routed experts: ``experts.{i}.gate_proj|up_proj|down_proj.weight`` or Mixtral / DeepSeek-V4's
  ``experts.{i}.w1|w3|w2.weight`` (HF's saved format), or transformers 5's fused
  ``experts.gate_up_proj`` [E, 2I, H] + ``experts.down_proj`` [E, H, I] (its in-memory layout);
- shared expert(s): ``shared_experts.`` (or ``shared_expert.``) with the same projection names;
- experts already quantized in the Ascend w8a8 layout (what cann-recipes-infer's and vllm-ascend's
  weight loaders read): int8 ``<proj>.weight`` [N, K] with ``<proj>.weight_scale`` [N, 1] (or
  [N]) and optionally an all-zero ``<proj>.weight_offset``, per expert (and shared expert). They
  are kept as stored (``quantized`` in the returned sizes: models.quantize.load_quantized), never
  quantized again; the block computes with their dequantized values.

A directory with ``model.safetensors.index.json`` (a sharded checkpoint) is read through its index.
Sizes (hidden, experts, expert width, shared width, table rows) come from the tensor shapes; top-k
and the routing attributes are derived as transformers computes them (``ascend_moe_onnx.models.hf_routing``)
from the preset's HF config overridden by a ``config.json`` next to the weights. Only the chosen
layer's tensors are read.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import numpy as np
import torch

from .layers import MoEConfig

BLOCK_NAMES = ("mlp.", "block_sparse_moe.", "ffn.", "")
PROJ_ALIASES = {"gate_proj": ("gate_proj", "w1"), "up_proj": ("up_proj", "w3"), "down_proj": ("down_proj", "w2")}
_GATE_RE = re.compile(r"^(?P<base>(?:.*\.)?)gate\.weight$")
_SCORING = {"softmax": 0, "sigmoid": 1, "sqrtsoftplus": 2}
INDEX_FILE = "model.safetensors.index.json"  # sharded checkpoints (save_pretrained's name)
FUSED = ("experts.gate_up_proj", "experts.down_proj")  # transformers 5 in-memory expert layout


class WeightsError(ValueError):
    """A checkpoint that cannot be used for the requested preset (message says why)."""


def _read_index(index: Path) -> dict:
    """{tensor name: shard file} from a sharded checkpoint's index; every shard must exist."""
    try:
        weight_map = json.loads(index.read_text())["weight_map"]
    except (ValueError, KeyError, TypeError) as e:
        raise WeightsError(f"weights: {index} is not a safetensors index (no weight_map: {e})") from None
    files = {name: index.parent / shard for name, shard in weight_map.items()}
    missing = sorted({str(f.name) for f in files.values() if not f.is_file()})
    if missing:
        raise WeightsError(f"weights: {index.name} names shard(s) that are not there: {', '.join(missing[:3])}")
    return files


class Checkpoint:
    """Lazy, read-only view of safetensors tensors (file, directory or in-memory dict)."""

    def __init__(self, source: str | os.PathLike | dict[str, torch.Tensor]) -> None:
        self.config: dict = {}
        self._tensors: dict[str, torch.Tensor] = {}
        self._files: dict[str, Path] = {}  # key -> the safetensors file holding it
        if isinstance(source, dict):
            self._tensors = dict(source)
            return
        path = Path(source)
        if not path.exists():
            raise FileNotFoundError(f"weights: no such file or directory: {path}")
        index = path / INDEX_FILE if path.is_dir() else None
        if index is not None and index.is_file():
            self._files = _read_index(index)
            return self._read_config(path)
        files = [path] if path.is_file() else sorted(path.glob("*.safetensors"))
        if not files:
            raise WeightsError(f"weights: no .safetensors files in {path}")
        from safetensors import safe_open

        for f in files:
            try:
                with safe_open(str(f), framework="pt") as h:
                    self._files.update({k: f for k in h.keys()})  # noqa: SIM118 (a safe_open handle is not iterable)
            except Exception as e:  # safetensors raises its own error types
                raise WeightsError(f"weights: {f} is not a readable safetensors file ({e})") from None
        self._read_config(path)

    def _read_config(self, path: Path) -> None:
        cfg_file = (path if path.is_dir() else path.parent) / "config.json"
        if cfg_file.is_file():
            cfg = json.loads(cfg_file.read_text())
            self.config = cfg.get("text_config", cfg) if isinstance(cfg, dict) else {}

    def keys(self) -> list[str]:
        """All tensor names."""
        return list(self._tensors) + list(self._files)

    def get(self, key: str) -> torch.Tensor:
        """Read one tensor."""
        if key in self._tensors:
            return self._tensors[key]
        from safetensors import safe_open

        with safe_open(str(self._files[key]), framework="pt") as h:
            return h.get_tensor(key)


def find_layer(keys: Iterable[str], layer: str | None = None) -> str:
    """The key prefix (layer prefix + block name) of the MoE layer to load, e.g. ``model.layers.3.mlp.``.

    ``layer`` picks one when the checkpoint has several: a layer number or a key prefix.
    """
    keyset = set(keys)
    bases = sorted({m["base"] for k in keys if (m := _GATE_RE.match(k))
                    and any(s.startswith(m["base"] + "experts.") for s in keyset)})
    if layer is not None:
        want = f"layers.{layer}." if str(layer).isdigit() else str(layer)
        bases = [b for b in bases if b.startswith(want) or f".{want}" in f".{b}"]
    if not bases:
        where = f" matching layer '{layer}'" if layer is not None else ""
        raise WeightsError(f"weights: no MoE layer{where} (looked for '<prefix>gate.weight' with "
                           "'<prefix>experts.<i>.*')")
    if len(bases) > 1:
        shown = ", ".join(bases[:4]) + (", ..." if len(bases) > 4 else "")
        raise WeightsError(f"weights: {len(bases)} MoE layers ({shown}); choose one with --layer")
    return bases[0]


def _first(ckpt_keys: set, base: str, names) -> str | None:
    return next((base + n for n in names if base + n in ckpt_keys), None)


def _expert_stack(ckpt: Checkpoint, keys: set, prefix: str, count: int, proj: str,
                  suffix: str = "weight") -> torch.Tensor:
    tensors = []
    for i in range(count):
        key = _first(keys, f"{prefix}{i}.", [f"{a}.{suffix}" for a in PROJ_ALIASES[proj]])
        if key is None:
            raise WeightsError(f"weights: missing '{prefix}{i}.{proj}.{suffix}' (or Mixtral/V4 alias)")
        tensors.append(ckpt.get(key))
        if tensors[-1].shape != tensors[0].shape:
            raise WeightsError(f"weights: '{key}' has shape {tuple(tensors[-1].shape)}, expert 0 has "
                               f"{tuple(tensors[0].shape)}")
    return torch.stack(tensors)


def _fused_experts(ckpt: Checkpoint, keys: set, base: str, E: int, H: int) -> dict:
    """gate/up/down stacks from transformers' fused ``gate_up_proj`` [E, 2I, H] (gate rows first)
    and ``down_proj`` [E, H, I]."""
    missing = [base + n for n in FUSED if base + n not in keys]
    if missing:
        raise WeightsError(f"weights: fused expert layout without {missing[0]}")
    gate_up, down = ckpt.get(base + FUSED[0]), ckpt.get(base + FUSED[1])
    if gate_up.dim() != 3 or gate_up.shape[0] != E or gate_up.shape[2] != H or gate_up.shape[1] % 2:
        raise WeightsError(f"weights: '{base}{FUSED[0]}' has shape {tuple(gate_up.shape)}, expected "
                           f"[{E}, 2 * expert width, {H}]")
    inter = gate_up.shape[1] // 2
    if tuple(down.shape) != (E, H, inter):
        raise WeightsError(f"weights: '{base}{FUSED[1]}' has shape {tuple(down.shape)}, expected {(E, H, inter)}")
    return {"experts.gate_proj": gate_up[:, :inter].contiguous(), "experts.up_proj": gate_up[:, inter:].contiguous(),
            "experts.down_proj": down}


def read_layer(source: str | os.PathLike | dict[str, torch.Tensor] | Checkpoint,
               layer: str | None = None) -> tuple[dict, dict]:
    """Read one MoE layer -> (tensors by module key, sizes and routing fields found)."""
    ckpt = source if isinstance(source, Checkpoint) else Checkpoint(source)
    keys = set(ckpt.keys())
    base = find_layer(keys, layer)
    fused = [k for k in keys if k.startswith(base + "experts.") and not k[len(base) + 8:][:1].isdigit()]
    unknown = sorted(set(fused) - {base + n for n in FUSED})
    if unknown:
        raise WeightsError(f"weights: unknown expert tensor {unknown[0]} (expected experts.<i>.* or "
                           f"{' + '.join(FUSED)})")
    quant = [k for k in keys if k.startswith(base) and k.endswith(("scale_inv", ".scale", "qweight"))]
    ascend_int8 = any(k.startswith(base) and k.endswith(".weight_scale") for k in keys)
    if quant or (ascend_int8 and fused):
        raise WeightsError(f"weights: quantised expert weights ({quant[0]}); dequantise the checkpoint first")
    gate = ckpt.get(base + "gate.weight")
    E, H = gate.shape
    out = {"gate.weight": gate}
    if fused:
        out.update(_fused_experts(ckpt, keys, base, E, H))
    else:
        found = {i for k in keys if k.startswith(base + "experts.") and
                 (i := k[len(base) + 8:].split(".")[0]).isdigit()}
        if len(found) != E:
            raise WeightsError(f"weights: {base}gate.weight routes to {E} experts but {len(found)} are stored")
        for proj in PROJ_ALIASES:
            out[f"experts.{proj}"] = _expert_stack(ckpt, keys, base + "experts.", E, proj)
    for name, aliases in (("gate.e_score_correction_bias", ("gate.e_score_correction_bias", "gate.bias")),
                          ("gate.tid2eid", ("gate.tid2eid", "tid2eid")),
                          ("gate.additional_bias", ("gate.additional_bias",))):
        if (key := _first(keys, base, aliases)) is not None:
            out[name] = ckpt.get(key)
    shared = next((p for p in ("shared_experts.", "shared_expert.") if f"{base}{p}gate_proj.weight" in keys
                   or f"{base}{p}w1.weight" in keys), None)
    if shared:
        for proj, aliases in PROJ_ALIASES.items():
            key = _first(keys, base + shared, [f"{a}.weight" for a in aliases])
            if key is None:
                raise WeightsError(f"weights: missing '{base}{shared}{proj}.weight'")
            out[f"shared_experts.{proj}"] = ckpt.get(key)
    sizes: dict[str, Any] = {"hidden": H, "experts": E, "intermediate": out["experts.gate_proj"].shape[1]}
    if shared:
        width = out["shared_experts.gate_proj"].shape[0]
        if width % sizes["intermediate"]:
            raise WeightsError(f"weights: shared expert width {width} is not a multiple of the expert "
                               f"width {sizes['intermediate']}")
        sizes["shared"] = width // sizes["intermediate"]
    if "gate.tid2eid" in out:
        sizes["vocab"], sizes["top_k"] = out["gate.tid2eid"].shape
    if ascend_int8:
        sizes["quantized"] = _ascend_int8(ckpt, keys, base, shared, out)
    return out, {"base": base, "config": ckpt.config, **sizes}


def dequantize_ascend_int8(what: str, q: torch.Tensor, scales: torch.Tensor,
                           offsets: Iterable[torch.Tensor] = ()) -> tuple[torch.Tensor, torch.Tensor]:
    """The Ascend w8a8 layout's rules, for every reader: int8 ``q`` [..., N, K] with one scale per row
    (``scales`` of N entries, [N, 1] or [N]) and no or all-zero ``offsets`` (tensors); returns (``q * scale`` as
    float32, the scales [..., N] float32). ``what`` names the weight in the messages."""
    rows = q.shape[:-1]
    if q.dim() < 2 or scales.numel() != rows.numel():
        raise WeightsError(f"weights: the weight_scale of {what} has shape {tuple(scales.shape)}: expected one "
                           f"scale per row {tuple(rows)} (+ 1) of {tuple(q.shape)}: per-channel int8")
    if any(bool(o.float().abs().max() > 0) for o in offsets):
        raise WeightsError(f"weights: {what} has a non-zero weight_offset (asymmetric int8 is not supported: "
                           f"the Ascend w8a8 layout is symmetric)")
    s = scales.float().reshape(rows)
    return q.float() * s.unsqueeze(-1), s


def _ascend_int8(ckpt: Checkpoint, keys: set, base: str, shared: str | None, out: dict) -> dict:
    """Int8 expert weights with per-row scales (the Ascend w8a8 layout): ``out``'s int8 stacks
    replaced by their dequantized float32 values; returns {name: (q, scales)} in the stack layout
    (a shared expert as its slices, each an expert of the routed width)."""
    stored = {}
    E, I, H = out["experts.gate_proj"].shape
    for proj in PROJ_ALIASES:
        for owner in ("experts", "shared_experts") if shared else ("experts",):
            name = f"{owner}.{proj}"
            q = out[name]
            if q.dtype != torch.int8:
                raise WeightsError(f"weights: '{name}' is {q.dtype} beside int8 expert weights with weight_scale")
            if owner == "experts":
                scales = _expert_stack(ckpt, keys, base + "experts.", E, proj, "weight_scale")
                offsets = [k for k in keys if k.startswith(base + "experts.") and k.endswith(f"{proj}.weight_offset")]
            else:
                assert shared is not None  # the shared expert is an owner only when there is one
                key = _first(keys, base + shared, [f"{a}.weight_scale" for a in PROJ_ALIASES[proj]])
                if key is None:
                    raise WeightsError(f"weights: missing '{base}{shared}{proj}.weight_scale'")
                scales = ckpt.get(key)
                offsets = [k for k in keys if k.startswith(base + shared) and k.endswith(f"{proj}.weight_offset")]
            out[name], scales = dequantize_ascend_int8(f"'{name}'", q, scales, [ckpt.get(k) for k in offsets])
            qn, sn = q.numpy(), scales.numpy()
            if owner == "shared_experts":  # [sI, H] / [H, sI] -> s experts of width I
                s = q.shape[0] // I if proj != "down_proj" else q.shape[1] // I
                if proj == "down_proj":
                    qn, sn = qn.reshape(H, s, I).transpose(1, 0, 2), np.broadcast_to(sn, (s, H))
                else:
                    qn, sn = qn.reshape(s, I, H), sn.reshape(s, I)
            stored[name] = (np.ascontiguousarray(qn), np.ascontiguousarray(sn, dtype=np.float32))
    return stored


def _config_fields(cfg: dict) -> dict:
    """Routing fields of a config.json without a model_type (legacy: the keys this family uses)."""
    f = {}
    for key, name in (("num_experts_per_tok", "top_k"), ("n_group", "group_count"),
                      ("topk_group", "k_group"), ("routed_scaling_factor", "routed_scaling_factor"),
                      ("swiglu_limit", "swiglu_limit")):
        if cfg.get(key) is not None:
            f[name] = cfg[key]
    if cfg.get("scoring_func") in _SCORING:
        f["norm_type"] = _SCORING[cfg["scoring_func"]]
    return f


def _hf_routing(preset_hf: dict, config: dict, experts: int, top_k: int) -> dict:
    """MoEConfig routing fields derived as transformers computes them from the preset's HF config
    overridden by the checkpoint's config.json (the expert count from the tensors)."""
    from ascend_moe_onnx.models.hf_routing import HFConfigError, model_type_of, routing

    from .from_hf import EXPERTS_FIELD, routing_fields

    ours, theirs = model_type_of(preset_hf), model_type_of(config) if config.get("model_type") else None
    if theirs is not None and theirs != ours:
        raise WeightsError(f"weights: config.json model_type {config['model_type']!r} is not the preset's "
                           f"({preset_hf['model_type']!r}); choose the matching preset")
    merged = {**preset_hf, "num_experts_per_tok": top_k, **config, "model_type": preset_hf["model_type"]}
    merged[EXPERTS_FIELD[ours]] = experts
    try:
        return routing_fields(routing(merged))
    except HFConfigError as e:
        raise WeightsError(f"weights: {e}") from None


def configure(cfg: MoEConfig, sizes: dict, tensors: dict, hf: dict | None = None) -> MoEConfig:
    """The preset's config with the checkpoint's sizes and routing fields; checks they fit the preset.

    ``hf``: the preset's HF config fields; the checkpoint's config.json overrides them and every
    routing attribute is derived as transformers computes it (``ascend_moe_onnx.models.hf_routing``).
    """
    config = sizes.get("config") or {}
    changes = {k: v for k, v in sizes.items() if k in MoEConfig.__dataclass_fields__}
    if hf is not None and not cfg.ranks:
        derived = _hf_routing(hf, config, sizes["experts"], sizes.get("top_k", cfg.top_k))
        # The block's own numerics (DeepSeek-V4's float32 router) stay the preset's.
        derived.pop("router_fp32")
        if cfg.swiglu_limit == 0 or "swiglu_limit" not in config:
            derived.pop("swiglu_limit")
        derived.pop("bias")  # checked against the tensors below
        if derived["norm_type"] != cfg.norm_type:
            raise WeightsError(f"weights: config.json gives norm_type {derived['norm_type']} (scoring), the "
                               f"preset uses {cfg.norm_type}; choose the matching preset")
        changes.update(derived)
    else:
        changes.update({k: v for k, v in _config_fields(config).items() if k in MoEConfig.__dataclass_fields__})
        if "norm_type" in changes and changes["norm_type"] != cfg.norm_type:
            raise WeightsError(f"weights: config.json scoring_func gives norm_type {changes['norm_type']}, "
                               f"the preset uses {cfg.norm_type}; choose the matching preset")
    changes["shared"] = sizes.get("shared", 0)
    if cfg.ranks:  # expert-parallel block: only the experts are used
        return cfg.replace(**{k: v for k, v in changes.items() if k in ("hidden", "experts", "intermediate")})
    has_bias, has_table = "gate.e_score_correction_bias" in tensors, "gate.tid2eid" in tensors
    if has_table != cfg.hash:
        raise WeightsError(f"weights: layer {sizes['base']} {'is' if has_table else 'is not'} a hash layer "
                           f"(tid2eid {'present' if has_table else 'absent'}); choose the matching preset")
    if has_bias != cfg.bias:
        raise WeightsError(f"weights: layer {sizes['base']} {'has' if has_bias else 'has no'} "
                           f"e_score_correction_bias; the preset {'has none' if has_bias else 'needs one'}")
    return cfg.replace(**changes)


def load_into(block: torch.nn.Module, tensors: dict) -> None:
    """Copy the tensors into the block (cast to each parameter's dtype; shapes must match)."""
    state = block.state_dict()
    for name, t in tensors.items():
        if name not in state:
            if name == "gate.additional_bias":
                continue  # only image-token presets use it
            raise WeightsError(f"weights: the block has no tensor '{name}'")
        if tuple(state[name].shape) != tuple(t.shape):
            raise WeightsError(f"weights: '{name}' has shape {tuple(t.shape)}, the block expects "
                               f"{tuple(state[name].shape)}")
        with torch.no_grad():
            state[name].copy_(t.to(state[name].dtype))
