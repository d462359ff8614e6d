"""A patched Hugging Face MoE causal LM as an ONNX Runtime GenAI model folder: one decoder graph
with a key/value cache (prefill and decode alike) and its ``genai_config.json``.

The graph follows onnxruntime-genai's decoder contract:

- inputs ``input_ids`` [batch, sequence] int64, ``attention_mask`` [batch, total_sequence] int64
  (1 for tokens, 0 for padding; total = past + sequence), ``position_ids`` [batch, sequence] int64,
  ``past_key_values.<i>.key`` / ``.value`` [batch, kv_heads, past_sequence, head_size];
- outputs ``logits`` [batch, sequence, vocab], ``present.<i>.key`` / ``.value``
  [batch, kv_heads, total_sequence, head_size] (the past with this call's entries appended).

The HF model runs as it is, with two things swapped in while it is traced: a cache object that
takes the past from the graph's inputs and hands back the presents, and an attention function
(registered with transformers' ``AttentionInterface``) that masks from the 2-D attention mask
(causal, padding on either side, sliding windows, attention sinks). So every family keeps its own
projections, norms and rotary embeddings, and its MoE blocks are the patched ones (fused routing,
routed-rows experts).

A layer whose cache entries are not one key and one value of the same shape (DeepSeek-V3's MLA
caches the compressed latent and the rotary key, of different widths; DeepSeek-V4 one tensor as
both) is stored *packed*: its entries joined along the last axis and split into two halves of
equal width, the cache's key and value. The cache then holds exactly what the HF model caches.
"""

from __future__ import annotations

import json
import math
import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ascend_moe_onnx.models.hf_routing import model_type_of

from .rotary import real_rotary

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

ATTENTION = "ascend_genai"  # the name of the attention function in transformers' AttentionInterface
GRAPH_FILE = "model.onnx"
INPUT_IDS, ATTENTION_MASK, POSITION_IDS = "input_ids", "attention_mask", "position_ids"
PAST_KEY, PAST_VALUE = "past_key_values.%d.key", "past_key_values.%d.value"
PRESENT_KEY, PRESENT_VALUE = "present.%d.key", "present.%d.value"
# Files of a checkpoint directory that a tokenizer (HF's or genai's) reads.
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "tokenizer.model",
                   "vocab.json", "merges.txt", "added_tokens.json", "chat_template.jinja", "chat_template.json")
# genai's model types for decoder-only LLMs (its config "type"); other families use "llama", which
# genai runs the same way: the graph, not the type, holds the architecture.
GENAI_TYPES = {"qwen3_moe": "qwen3", "qwen2_moe": "qwen2", "mixtral": "mistral", "gpt_oss": "gptoss",
               "granitemoe": "granite", "olmoe": "olmo", "ernie4_5_moe": "ernie", "nemotron_h": "nemotron"}


class GenAIExportError(ValueError):
    """A model that cannot be exported for generation (the message names the field and why)."""


@dataclass(frozen=True)
class LayerCache:
    """What one layer's HF attention caches: ``key`` / ``value`` shapes [heads, width] and whether
    they are one tensor (``shared``)."""

    key: tuple[int, int]
    value: tuple[int, int]
    shared: bool = False

    @property
    def packed(self) -> bool:
        """Stored joined and halved (see the module docstring) rather than as key and value."""
        return self.shared or self.key != self.value

    @property
    def joint_width(self) -> int:
        return self.key[1] if self.shared else self.key[1] + self.value[1]

    def stored(self) -> tuple[int, int]:
        """[heads, width] of the cache's key and value tensors for this layer."""
        if not self.packed:
            return self.key
        if not self.shared and self.key[0] != self.value[0]:
            raise GenAIExportError(f"cache of {self.key[0]} key heads and {self.value[0]} value heads")
        return self.key[0], math.ceil(self.joint_width / 2)


@dataclass(frozen=True)
class CacheLayout:
    """The cache of every layer, and the one [kv_heads, head_size] genai allocates for all."""

    layers: tuple[LayerCache, ...]

    @property
    def kv_heads(self) -> int:
        return self.layers[0].stored()[0]

    @property
    def head_size(self) -> int:
        return self.layers[0].stored()[1]

    def check(self) -> None:
        """genai holds one cache shape for every layer: refuse layers that differ."""
        shapes = {layer.stored() for layer in self.layers}
        if len(shapes) != 1:
            raise GenAIExportError(f"layers cache different shapes ([kv_heads, head_size]: {sorted(shapes)}); "
                                   "onnxruntime-genai holds one shape for every layer")


class GraphCache:
    """Duck-typed transformers ``Cache`` over the graph's past tensors: ``update`` appends a layer's
    new entries to its past and records the present (packed layers packed, see ``LayerCache``)."""

    is_compileable = False

    def __init__(self, past: list[tuple[torch.Tensor, torch.Tensor]] | None, layout: CacheLayout | None):
        self.past, self.layout = past, layout
        self.present: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.seen: dict[int, LayerCache] = {}  # what each layer cached, recorded when layout is None

    def update(self, key, value, layer_idx: int, *args, **kwargs):
        """Append ``key`` / ``value`` [batch, heads, sequence, width] to layer ``layer_idx``'s past."""
        if self.layout is None:  # probing: record what the layer caches, no past
            self.seen[layer_idx] = LayerCache(
                (key.shape[1], key.shape[-1]), (value.shape[1], value.shape[-1]), value is key)
            return key, value
        spec = self.layout.layers[layer_idx]
        assert self.past is not None  # a layout comes with the graph's past tensors
        past_k, past_v = self.past[layer_idx]
        if not spec.packed:
            k, v = torch.cat([past_k, key], 2), torch.cat([past_v, value], 2)
            self.present[layer_idx] = (k, v)
            return k, v
        joint = key if spec.shared else torch.cat([key, value], -1)
        half = spec.stored()[1]
        if 2 * half != joint.shape[-1]:
            joint = torch.nn.functional.pad(joint, (0, 2 * half - joint.shape[-1]))
        k = torch.cat([past_k, joint[..., :half]], 2)
        v = torch.cat([past_v, joint[..., half:]], 2)
        self.present[layer_idx] = (k, v)
        joint = torch.cat([k, v], -1)
        if spec.shared:
            whole = joint[..., :spec.key[1]]
            return whole, whole
        return joint[..., :spec.key[1]], joint[..., spec.key[1]:spec.joint_width]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Entries already cached (the past length)."""
        return 0 if self.past is None else self.past[layer_idx][0].shape[2]

    def __len__(self) -> int:
        return 0 if self.past is None else len(self.past)


def attention(module, query, key, value, attention_mask, scaling=None, dropout: float = 0.0,
              sliding_window=None, s_aux=None, **kwargs):
    """Attention of ``query`` [b, h, q, d] over ``key`` / ``value`` [b, kv_heads, k, d] (k = past + q):
    query i sits at cache position k - q + i and sees positions <= it that ``attention_mask``
    ([b, 1, 1, >= k], True for tokens) keeps, the last ``sliding_window`` tokens of them when set,
    and only its own chunk of tokens in a chunked-attention layer (Llama 4); an attention sink
    (``s_aux`` or the module's ``sinks``) adds one logit per head to the softmax."""
    b, h, q_len, _ = query.shape
    kv_len = key.shape[2]
    groups = h // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, 1)
        value = value.repeat_interleave(groups, 1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    positions = torch.arange(kv_len, device=query.device)
    allowed = (positions[None, :] <= positions[kv_len - q_len:, None])[None, None] & attention_mask[..., :kv_len]
    # windows and chunks count token positions (padding skipped), as the model sees each row alone
    tokens = attention_mask[:, 0, 0, :kv_len].to(torch.int64).cumsum(-1) - 1  # [b, k]
    k_tok, q_tok = tokens[:, None, :], tokens[:, kv_len - q_len:, None]
    if sliding_window:
        allowed = allowed & (k_tok > q_tok - sliding_window)[:, None]
    chunk = _attention_chunk(module)
    if chunk:
        same = torch.div(k_tok, chunk, rounding_mode="floor") == torch.div(q_tok, chunk, rounding_mode="floor")
        allowed = allowed & same[:, None]
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    sinks = s_aux if s_aux is not None else getattr(module, "sinks", None)
    if sinks is not None:
        sink = sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(b, -1, q_len, 1)
        joint = torch.cat([scores, sink], -1)
        probs = torch.softmax(joint - joint.amax(-1, keepdim=True), -1)[..., :-1]
    else:
        probs = torch.softmax(scores, -1)
    out = torch.matmul(probs.to(value.dtype), value)
    return out.transpose(1, 2).contiguous(), None


def _attention_chunk(module) -> int | None:
    """The chunk size of a layer with chunked local attention (Llama 4's ``chunked_attention``
    layer type), else None."""
    config = getattr(module, "config", None)
    types, index = getattr(config, "layer_types", None), getattr(module, "layer_idx", None)
    if config is None or types is None or index is None or types[index] != "chunked_attention":
        return None
    return config.attention_chunk_size


def _register_attention() -> None:
    from transformers import AttentionInterface

    AttentionInterface.register(ATTENTION, attention)


class GenAIDecoder(torch.nn.Module):
    """The decoder graph genai runs: (input_ids, attention_mask, position_ids, past...) ->
    (logits, present...)."""

    def __init__(self, model: PreTrainedModel, layout: CacheLayout):
        super().__init__()
        self.model, self.layout = model, layout
        n = len(layout.layers)
        self.input_names = (INPUT_IDS, ATTENTION_MASK, POSITION_IDS,
                            *[name % i for i in range(n) for name in (PAST_KEY, PAST_VALUE)])
        self.output_names = ("logits", *[name % i for i in range(n) for name in (PRESENT_KEY, PRESENT_VALUE)])

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Logits of every position and the cache with this call's entries appended."""
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = GraphCache(pairs, self.layout)
        mask = attention_mask.to(torch.bool)[:, None, None, :]
        out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                         past_key_values=cache, use_cache=True)
        present = [t for i in range(len(pairs)) for t in cache.present[i]]
        return (out.logits, *present)

    def example_inputs(self, batch: int = 2, sequence: int = 3, past: int = 4, seed: int = 0) -> tuple:
        """Random ids, a full mask, positions after ``past`` cached entries, random past."""
        g = torch.Generator().manual_seed(seed)
        vocab = self.model.config.get_text_config().vocab_size
        dtype = next(self.model.parameters()).dtype
        ids = torch.randint(0, vocab, (batch, sequence), generator=g)
        mask = torch.ones(batch, past + sequence, dtype=torch.int64)
        positions = (torch.arange(sequence) + past).expand(batch, sequence).contiguous()
        shape = (batch, self.layout.kv_heads, past, self.layout.head_size)
        caches = [torch.randn(shape, generator=g).to(dtype) for _ in range(2 * len(self.layout.layers))]
        return (ids, mask, positions, *caches)

    def dynamic_shapes(self) -> tuple:
        """Batch, sequence, total and past lengths stay dynamic."""
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        total, past = torch.export.Dim("total_sequence"), torch.export.Dim("past_sequence")
        return ({0: batch, 1: sequence}, {0: batch, 1: total}, {0: batch, 1: sequence},
                tuple({0: batch, 2: past} for _ in range(2 * len(self.layout.layers))))


def cache_layout(model: PreTrainedModel) -> CacheLayout:
    """What each layer of ``model`` caches, from one probing call (2 tokens, no past)."""
    cache = GraphCache(None, None)
    ids = torch.zeros(1, 2, dtype=torch.int64)
    try:
        with torch.no_grad():
            model(input_ids=ids, attention_mask=torch.ones(1, 1, 1, 2, dtype=torch.bool),
                  position_ids=torch.arange(2)[None], past_key_values=cache, use_cache=True)
    except (AttributeError, TypeError, NotImplementedError) as e:  # a cache API beyond update()
        raise GenAIExportError(f"{model_type_of(model.config)}: its layers keep state other than one key/value "
                               f"cache per layer (linear-attention or recurrent state: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:160]}); this decoder carries key/value caches only") from None
    text = model.config.get_text_config()
    n = text.num_hidden_layers
    missing = [i for i in range(n) if i not in cache.seen]
    if missing:
        raise GenAIExportError(f"{model_type_of(model.config)}: layers {missing} keep no key/value cache "
                               "through transformers' Cache.update (linear-attention or recurrent layers); "
                               "onnxruntime-genai's decoder carries key/value caches only")
    layout = CacheLayout(tuple(cache.seen[i] for i in range(n)))
    layout.check()
    return layout


def _use_attention(model: PreTrainedModel) -> None:
    _register_attention()
    model.set_attn_implementation(ATTENTION)


def _generation_fields(directory: Path | None, text) -> dict:
    """BOS / EOS / PAD ids and search defaults: generation_config.json over config.json."""
    fields = {k: getattr(text, k, None) for k in ("bos_token_id", "eos_token_id", "pad_token_id")}
    gen = {}
    if directory is not None and (directory / "generation_config.json").is_file():
        gen = json.loads((directory / "generation_config.json").read_text())
    for k in ("bos_token_id", "eos_token_id", "pad_token_id"):
        if gen.get(k) is not None:
            fields[k] = gen[k]
    eos = fields["eos_token_id"]
    eos = [] if eos is None else ([int(e) for e in eos] if isinstance(eos, (list, tuple)) else [int(eos)])
    pad = fields["pad_token_id"]
    pad = eos[0] if pad is None and eos else (0 if pad is None else int(pad))
    bos = fields["bos_token_id"]
    search = {"do_sample": bool(gen.get("do_sample", False)),
              "temperature": float(gen.get("temperature") or 1.0),
              "top_k": int(gen.get("top_k") or 50), "top_p": float(gen.get("top_p") or 1.0),
              "repetition_penalty": float(gen.get("repetition_penalty") or 1.0)}
    return {"bos": None if bos is None else int(bos), "eos": eos[0] if len(eos) == 1 else eos, "pad": pad,
            "search": search}


def genai_config(model: PreTrainedModel, layout: CacheLayout, directory: Path | None = None,
                 library: str | None = None, context_length: int | None = None) -> dict:
    """The ``genai_config.json`` of an exported decoder (dict)."""
    text = model.config.get_text_config()
    model_type = model_type_of(model.config)
    context = int(context_length or getattr(text, "max_position_embeddings", None) or 4096)
    tokens = _generation_fields(directory, text)
    n = len(layout.layers)
    session = {"log_id": "onnxruntime-genai", "provider_options": []}
    if library:
        session["custom_ops_library"] = library
    decoder = {
        "session_options": session,
        "filename": GRAPH_FILE,
        "head_size": layout.head_size,
        "hidden_size": int(text.hidden_size),
        "inputs": {"input_ids": INPUT_IDS, "attention_mask": ATTENTION_MASK, "position_ids": POSITION_IDS,
                   "past_key_names": PAST_KEY, "past_value_names": PAST_VALUE},
        "outputs": {"logits": "logits", "present_key_names": PRESENT_KEY, "present_value_names": PRESENT_VALUE},
        "num_attention_heads": int(getattr(text, "num_attention_heads", layout.kv_heads)),
        "num_hidden_layers": n,
        "num_key_value_heads": layout.kv_heads,
    }
    search = {"diversity_penalty": 0.0, "early_stopping": True, "length_penalty": 1.0, "max_length": context,
              "min_length": 0, "no_repeat_ngram_size": 0, "num_beams": 1, "num_return_sequences": 1,
              # the graph appends to the past it is given: genai must not share one buffer
              "past_present_share_buffer": False, **tokens["search"]}
    return {"model": {"bos_token_id": tokens["bos"], "context_length": context, "decoder": decoder,
                      "eos_token_id": tokens["eos"], "pad_token_id": tokens["pad"],
                      "type": GENAI_TYPES.get(model_type, "llama"), "vocab_size": int(text.vocab_size)},
            "search": search}


def export_genai(model: PreTrainedModel, out_dir: str | os.PathLike, *, checkpoint: str | os.PathLike | None = None,
                 weights_quant: WeightsQuant | None = None, context_length: int | None = None, library: bool = True,
                 check: bool = True, **kwargs: Any) -> dict:
    """Export ``model`` (an HF causal LM; patched here if not yet) as an onnxruntime-genai folder:
    ``model.onnx`` (+ ``model.onnx.data`` for big weights), ``genai_config.json``, the custom-op
    library (genai loads one only from inside the folder), and the tokenizer files of
    ``checkpoint`` (the HF directory) when it has them. Returns the genai config written."""
    from ascend_moe_onnx.exporters import export
    from ascend_moe_onnx.ort_custom_ops import get_library_path

    from .export import moe_blocks
    from .patching import patch

    if getattr(model, "lm_head", None) is None:
        raise GenAIExportError(f"{type(model).__name__}: no lm_head (generation needs a causal LM)")
    if not moe_blocks(model):
        patch(model)
    _use_attention(model)
    layout = cache_layout(model)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    wrapper = GenAIDecoder(model, layout)
    with real_rotary(model):
        export(wrapper, wrapper.example_inputs(), out / GRAPH_FILE, dynamic_shapes=wrapper.dynamic_shapes(),
               input_names=list(wrapper.input_names), output_names=list(wrapper.output_names),
               weights_quant=weights_quant, check=check, **kwargs)
    lib_name = None
    if library:
        lib = Path(get_library_path())
        lib_name = lib.name
        shutil.copy2(lib, out / lib_name)
    checkpoint = Path(checkpoint) if checkpoint is not None else None
    config = genai_config(model, layout, checkpoint, lib_name, context_length)
    (out / "genai_config.json").write_text(json.dumps(config, indent=4) + "\n")
    if checkpoint is not None:
        for name in TOKENIZER_FILES:
            if (checkpoint / name).is_file():
                shutil.copy2(checkpoint / name, out / name)
    return config
