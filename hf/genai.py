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

A linear-attention layer (Qwen3.5-MoE's and Qwen3-Next's gated DeltaNet) keeps no key/value cache
but a convolution state ``past_key_values.<i>.conv_state`` [batch, channels, kernel - 1] and a
recurrent state ``past_key_values.<i>.recurrent_state`` [batch, heads, key_dim, value_dim] (float32),
returned as ``present.<i>.conv_state`` / ``.recurrent_state``: the names and layouts genai's
recurrent state holds, declared with the ``layer_types`` of ``genai_config.json``. Its recurrence
is traced as one ``torch.ops.ascend_moe.gated_delta_rule`` (ONNX Runtime's ``LinearAttention``),
since HF's loops over the sequence in Python.

A layer whose cache entries are not one key and one value of the same shape (DeepSeek-V3's MLA
caches the compressed latent and the rotary key, of different widths; a DeepSeek-V4 layer one row
per position as both, see ``hf.compressed_attention``) is stored *packed*: its entries joined
along the last axis and split into two halves of equal width, the cache's key and value. An MLA
layer's cache then holds exactly what the HF model caches, and its attention reads the two halves
as they are, with its up-projection absorbed into the query and the output
(:func:`mla_attention`), instead of expanding the whole latent
through ``kv_b_proj`` at every step as HF's eager code does.
"""

from __future__ import annotations

import contextlib
import functools
import json
import math
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from ascend_moe_onnx.models.hf_routing import model_type_of

from .compressed_attention import compressed_attention, compressed_modules, longest_window
from .rotary import real_rotary

if TYPE_CHECKING:
    from transformers import PreTrainedModel

    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

ATTENTION = "ascend_genai"  # the name of the attention function in transformers' AttentionInterface
ABSORBED = "genai_absorbed_mla"  # set on an MLA attention module while its latent attention is traced
GRAPH_FILE = "model.onnx"
INPUT_IDS, ATTENTION_MASK, POSITION_IDS = "input_ids", "attention_mask", "position_ids"
PAST_KEY, PAST_VALUE = "past_key_values.%d.key", "past_key_values.%d.value"
PRESENT_KEY, PRESENT_VALUE = "present.%d.key", "present.%d.value"
PAST_CONV, PAST_RECURRENT = "past_key_values.%d.conv_state", "past_key_values.%d.recurrent_state"
PRESENT_CONV, PRESENT_RECURRENT = "present.%d.conv_state", "present.%d.recurrent_state"
# The functions of a transformers modeling module that run a gated DeltaNet's recurrence.
DELTA_RULE_FUNCTIONS = ("torch_chunk_gated_delta_rule", "torch_recurrent_gated_delta_rule")
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
class LayerState:
    """What one linear-attention layer keeps: its convolution state [channels, kernel - 1] and its
    recurrent state [heads, key_dim, value_dim]."""

    conv: tuple[int, int]
    recurrent: tuple[int, int, int]


@dataclass(frozen=True)
class CacheLayout:
    """The cache of every layer, and the one [kv_heads, head_size] genai allocates for all key/value
    layers."""

    layers: tuple[LayerCache | LayerState, ...]

    @property
    def attention(self) -> list[LayerCache]:
        return [layer for layer in self.layers if isinstance(layer, LayerCache)]

    @property
    def kv_heads(self) -> int:
        return self.attention[0].stored()[0]

    @property
    def head_size(self) -> int:
        return self.attention[0].stored()[1]

    @property
    def layer_types(self) -> list[str]:
        """genai's name of each layer's kind."""
        return ["full_attention" if isinstance(layer, LayerCache) else "linear_attention" for layer in self.layers]

    def names(self, past: bool) -> list[str]:
        """The graph's cache inputs (``past``) or outputs, two per layer in layer order."""
        kv, state = ((PAST_KEY, PAST_VALUE), (PAST_CONV, PAST_RECURRENT)) if past else \
            ((PRESENT_KEY, PRESENT_VALUE), (PRESENT_CONV, PRESENT_RECURRENT))
        return [name % i for i, layer in enumerate(self.layers)
                for name in (kv if isinstance(layer, LayerCache) else state)]

    def check(self) -> None:
        """genai holds one cache shape for every key/value layer: refuse layers that differ."""
        if not self.attention:
            raise GenAIExportError("no layer keeps a key/value cache; onnxruntime-genai's decoder needs one")
        shapes = {layer.stored() for layer in self.attention}
        if len(shapes) != 1:
            raise GenAIExportError(f"layers cache different shapes ([kv_heads, head_size]: {sorted(shapes)}); "
                                   "onnxruntime-genai holds one shape for every layer")


class GraphCache:
    """Duck-typed transformers ``Cache`` over the graph's past tensors: ``update`` appends a layer's
    new entries to its past and records the present (packed layers packed, see ``LayerCache``); a
    linear-attention layer reads and records its convolution and recurrent states."""

    is_compileable = False

    def __init__(self, past: list[tuple[torch.Tensor, torch.Tensor]] | None, layout: CacheLayout | None,
                 absorbed: frozenset[int] = frozenset()):
        self.past, self.layout = past, layout
        self.absorbed = absorbed  # packed MLA layers whose attention reads the halves (mla_attention)
        self.present: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        self.seen: dict[int, LayerCache | LayerState] = {}  # what each layer cached, recorded when layout is None
        self.conv: dict[int, torch.Tensor] = {}  # a linear-attention layer's states: present, or when
        self.recurrent: dict[int, torch.Tensor] = {}  # probing (layout None) the state of no past
        self.tokens: torch.Tensor | None = None  # the graph's attention mask [batch, total], 1 for tokens
        self.more_states: set[int] = set()  # layers keeping several conv / recurrent states (state_idx > 0)

    def _past(self, layer_idx: int) -> tuple[torch.Tensor, torch.Tensor]:
        assert self.past is not None, "a layout comes with the graph's past tensors"
        return self.past[layer_idx]

    def get_conv_state(self, layer_idx: int, state_idx: int = 0):
        """None: HF then prepends the past through ``update_conv_state`` and convolves the whole, one
        path for every sequence length (its single-token path would fix the graph's length at 1)."""
        return None

    def update_conv_state(self, hidden_states, layer_idx: int, state_idx: int = 0, conv_kernel_size=None,
                          **kwargs):
        """``hidden_states`` [batch, channels, sequence] with layer ``layer_idx``'s past convolution
        state prepended; its last ``conv_kernel_size - 1`` columns are the present."""
        width = int(conv_kernel_size) - 1
        if state_idx:
            self.more_states.add(layer_idx)
        if self.layout is None:
            self.conv[layer_idx] = hidden_states.new_zeros(hidden_states.shape[0], hidden_states.shape[1], width)
            return hidden_states
        joint = torch.cat([self._past(layer_idx)[0].to(hidden_states.dtype), hidden_states], -1)
        if self.tokens is None:
            self.conv[layer_idx] = joint[..., joint.shape[-1] - width:]
            return joint
        # the columns up to each row's last token: right padding (genai's batches) is no input
        sequence = hidden_states.shape[-1]
        tokens = self.tokens[:, self.tokens.shape[1] - sequence:] > 0
        order = torch.arange(1, sequence + 1, device=joint.device)
        last = (tokens * order).amax(1) + width - 1  # in joint's columns; the past's last without tokens
        index = last[:, None] - (width - 1) + torch.arange(width, device=joint.device)
        self.conv[layer_idx] = joint.gather(2, index[:, None, :].expand(-1, joint.shape[1], -1))
        return joint

    def get_recurrent_state(self, layer_idx: int, state_idx: int = 0):
        return None if self.layout is None else self._past(layer_idx)[1]

    def update_recurrent_state(self, recurrent_states, layer_idx: int, state_idx: int = 0, **kwargs):
        if state_idx:
            self.more_states.add(layer_idx)
        self.recurrent[layer_idx] = recurrent_states
        return recurrent_states

    def get_recurrent_states_to_keep(self, layer_idx: int) -> int:
        return 0  # no intermediate states: genai keeps the last one

    def is_recording_past(self, layer_idx: int) -> bool:
        return False

    def has_previous_state(self, layer_idx: int | None = None, state_idx: int | None = None) -> bool:
        return self.past is not None

    def update(self, key, value, layer_idx: int, *args, **kwargs):
        """Append ``key`` / ``value`` [batch, heads, sequence, width] to layer ``layer_idx``'s past."""
        if self.layout is None:  # probing: record what the layer caches, no past
            self.seen[layer_idx] = LayerCache(
                (key.shape[1], key.shape[-1]), (value.shape[1], value.shape[-1]), value is key)
            return key, value
        spec = self.layout.layers[layer_idx]
        assert isinstance(spec, LayerCache), "update() is called by key/value layers only"
        past_k, past_v = self._past(layer_idx)
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
        if layer_idx in self.absorbed:
            return k, v
        joint = torch.cat([k, v], -1)
        if spec.shared:
            whole = joint[..., :spec.key[1]]
            return whole, whole
        return joint[..., :spec.key[1]], joint[..., spec.key[1]:spec.joint_width]

    def get_seq_length(self, layer_idx: int = 0) -> int:
        """Entries already cached (the past length; a key/value layer's when ``layer_idx`` is not one)."""
        if self.past is None or self.layout is None:
            return 0
        if not isinstance(self.layout.layers[layer_idx], LayerCache):
            layer_idx = self.layout.layers.index(self.layout.attention[0])
        return self.past[layer_idx][0].shape[2]

    def __len__(self) -> int:
        return 0 if self.past is None else len(self.past)


def attention(module, query, key, value, attention_mask, scaling=None, dropout: float = 0.0,
              sliding_window=None, s_aux=None, **kwargs):
    """Attention of ``query`` [b, h, q, d] over ``key`` / ``value`` [b, kv_heads, k, d] (k = past + q):
    query i sits at cache position k - q + i and sees positions <= it that ``attention_mask``
    ([b, 1, 1, >= k], True for tokens) keeps, the last ``sliding_window`` tokens of them when set,
    and only its own chunk of tokens in a chunked-attention layer (Llama 4); an attention sink
    (``s_aux`` or the module's ``sinks``) adds one logit per head to the softmax. An MLA layer that
    :func:`absorbed_mla` marks gets its packed latent cache halves as ``key`` / ``value`` and runs
    :func:`mla_attention`."""
    if getattr(module, ABSORBED, False):
        return mla_attention(module, query, key, value, attention_mask, scaling, sliding_window), None
    q_len, kv_len = query.shape[2], key.shape[2]
    allowed = _allowed(module, attention_mask, q_len, kv_len, sliding_window)
    return attend(module, query, key, value, allowed, scaling, s_aux), None


def attend(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, allowed: torch.Tensor,
           scaling=None, sinks=None) -> torch.Tensor:
    """Softmax attention of ``query`` [b, h, q, d] over ``key`` / ``value`` [b, kv_heads, k, d]
    where ``allowed`` [b, 1, q, k] is True, with one sink logit per head (``sinks`` or the module's)
    in the softmax; returns [b, q, h, d]."""
    b, h, q_len, _ = query.shape
    groups = h // key.shape[1]
    if groups > 1:
        key = key.repeat_interleave(groups, 1)
        value = value.repeat_interleave(groups, 1)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling
    scores = scores.masked_fill(~allowed, torch.finfo(scores.dtype).min)
    sinks = sinks if sinks is not None else getattr(module, "sinks", None)
    if sinks is not None:
        sink = sinks.to(scores.dtype).reshape(1, -1, 1, 1).expand(b, -1, q_len, 1)
        joint = torch.cat([scores, sink], -1)
        probs = torch.softmax(joint - joint.amax(-1, keepdim=True), -1)[..., :-1]
    else:
        probs = torch.softmax(scores, -1)
    out = torch.matmul(probs.to(value.dtype), value)
    return out.transpose(1, 2).contiguous()


def _allowed(module, attention_mask: torch.Tensor, q_len: int, kv_len: int, sliding_window) -> torch.Tensor:
    """[b, 1, q, k] True where a query sees a cache position (see :func:`attention`)."""
    positions = torch.arange(kv_len, device=attention_mask.device)
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
    return allowed


def mla_attention(module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                  attention_mask: torch.Tensor, scaling, sliding_window=None) -> torch.Tensor:
    """Multi-head latent attention over the compressed cache, with the up-projection absorbed (as
    DeepSeek's inference code does): ``query`` [b, h, q, nope + rope] as the HF layer builds it,
    ``key`` / ``value`` [b, 1, k, half] the packed cache halves (joined: the normalised latent
    [kv_lora_rank], the rotary key [rope], zero padding). Each head's no-position query is taken
    into latent space through its slice of ``kv_b_proj`` (W_UK), scored against the latent and the
    rotary key in one single-head attention with the heads folded into the query rows, and the
    latent output is projected back per head (W_UV). Returns [b, q, h, v_head_dim]: what HF's
    attention returns after expanding the whole latent through ``kv_b_proj``."""
    b, h, q_len, _ = query.shape
    kv_len, half = key.shape[2], key.shape[3]
    nope, rank = module.qk_nope_head_dim, module.kv_lora_rank
    weight = module.kv_b_proj.weight.view(h, nope + module.v_head_dim, rank)
    w_uk, w_uv_t = weight[:, :nope], weight[:, nope:].transpose(1, 2)  # [h, nope, rank], [h, rank, v]
    q_latent = torch.matmul(query[..., :nope], w_uk)  # [b, h, q, rank]
    q_joint = torch.cat([q_latent, query[..., nope:]], -1)
    q_joint = torch.nn.functional.pad(q_joint, (0, 2 * half - q_joint.shape[-1])).reshape(b, 1, h * q_len, 2 * half)
    scores = (torch.matmul(q_joint[..., :half], key.transpose(2, 3)) +
              torch.matmul(q_joint[..., half:], value.transpose(2, 3))).reshape(b, h, q_len, kv_len)
    scaling = query.shape[-1] ** -0.5 if scaling is None else scaling
    scores = (scores * scaling).masked_fill(~_allowed(module, attention_mask, q_len, kv_len, sliding_window),
                                            torch.finfo(scores.dtype).min)
    probs = torch.softmax(scores, -1).to(key.dtype).reshape(b, 1, h * q_len, kv_len)
    latent = torch.cat([torch.matmul(probs, key), torch.matmul(probs, value)], -1)[..., :rank]
    out = torch.matmul(latent.reshape(b, h, q_len, rank), w_uv_t)  # [b, h, q, v]
    return out.transpose(1, 2).contiguous()


def mla_modules(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """{layer index: attention module} of ``model``'s multi-head latent attention layers that
    :func:`mla_attention` serves: transformers' MLA (``expand_kv`` over a bias-free ``kv_b_proj``)."""
    found: dict[int, torch.nn.Module] = {}
    for m in model.modules():
        proj, index = getattr(m, "kv_b_proj", None), getattr(m, "layer_idx", None)
        if hasattr(m, "expand_kv") and isinstance(proj, torch.nn.Linear) and proj.bias is None \
                and isinstance(index, int):
            found[index] = m
    return found


@contextlib.contextmanager
def absorbed_mla(modules: dict[int, torch.nn.Module]):
    """While inside: the MLA layers ``modules`` keep their latent cache as the packed halves the
    cache returns (``expand_kv`` passes them through) and :func:`attention` runs
    :func:`mla_attention` for them."""
    try:
        for m in modules.values():
            m.__dict__["expand_kv"] = _packed_latent  # an instance attribute shadowing the method
            m.__dict__[ABSORBED] = True
        yield
    finally:
        for m in modules.values():
            m.__dict__.pop("expand_kv", None)
            m.__dict__.pop(ABSORBED, None)


def _packed_latent(key: torch.Tensor, value: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return key, value


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
        self.input_names = (INPUT_IDS, ATTENTION_MASK, POSITION_IDS, *layout.names(past=True))
        self.output_names = ("logits", *layout.names(past=False))
        # MLA layers attend over their packed latent cache directly (no per-step expansion)
        self.mla = {i: m for i, m in mla_modules(model).items()
                    if isinstance(spec := layout.layers[i], LayerCache) and spec.packed and not spec.shared
                    and spec.key == (1, m.kv_lora_rank)}
        # DeepSeek-V4 layers cache per-position rows and recompute their compressed entries
        self.compressed = compressed_modules(model)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor, position_ids: torch.Tensor,
                *past: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """Logits of every position and the cache with this call's entries appended."""
        pairs = [(past[2 * i], past[2 * i + 1]) for i in range(len(past) // 2)]
        cache = GraphCache(pairs, self.layout, frozenset(self.mla))
        cache.tokens = attention_mask
        mask = attention_mask.to(torch.bool)[:, None, None, :]
        with traced_delta_rule(self.model, attention_mask), absorbed_mla(self.mla), \
                compressed_attention(self.compressed):
            out = self.model(input_ids=input_ids, attention_mask=mask, position_ids=position_ids,
                             past_key_values=cache, use_cache=True)
        present = [t for i, layer in enumerate(self.layout.layers) for t in
                   (cache.present[i] if isinstance(layer, LayerCache) else (cache.conv[i], cache.recurrent[i]))]
        return (out.logits, *present)

    def example_inputs(self, batch: int = 2, sequence: int = 3, past: int | None = None, seed: int = 0) -> tuple:
        """Random ids, a full mask, positions after ``past`` cached entries (by default 4, or enough
        for two compressed windows), random past."""
        if past is None:
            past = max(4, 2 * longest_window(self.compressed))
        g = torch.Generator().manual_seed(seed)
        vocab = self.model.config.get_text_config().vocab_size
        dtype = next(self.model.parameters()).dtype
        ids = torch.randint(0, vocab, (batch, sequence), generator=g)
        mask = torch.ones(batch, past + sequence, dtype=torch.int64)
        positions = (torch.arange(sequence) + past).expand(batch, sequence).contiguous()
        caches = []
        for layer in self.layout.layers:
            if isinstance(layer, LayerCache):
                shape = (batch, self.layout.kv_heads, past, self.layout.head_size)
                caches += [torch.randn(shape, generator=g).to(dtype) for _ in range(2)]
            else:
                caches += [torch.randn((batch, *layer.conv), generator=g).to(dtype),
                           torch.randn((batch, *layer.recurrent), generator=g)]
        return (ids, mask, positions, *caches)

    def dynamic_shapes(self) -> tuple:
        """Batch, sequence, total and past lengths stay dynamic."""
        batch, sequence = torch.export.Dim("batch"), torch.export.Dim("sequence")
        total, past = torch.export.Dim("total_sequence"), torch.export.Dim("past_sequence")
        return ({0: batch, 1: sequence}, {0: batch, 1: total}, {0: batch, 1: sequence},
                tuple({0: batch, 2: past} if isinstance(layer, LayerCache) else {0: batch}
                      for layer in self.layout.layers for _ in range(2)))


def gated_delta_rule(query, key, value, g, beta, chunk_size: int = 64, initial_state=None,
                     output_final_state: bool = False, use_qk_l2norm_in_kernel: bool = False, *,
                     tokens: torch.Tensor | None = None, **kwargs):
    """transformers' ``torch_chunk_gated_delta_rule`` / ``torch_recurrent_gated_delta_rule`` (same
    arguments and results: query / key [batch, sequence, k_heads, key_dim], value [batch, sequence,
    v_heads, value_dim], g / beta [batch, sequence, v_heads]) as one traceable
    ``torch.ops.ascend_moe.gated_delta_rule`` over the whole sequence. Where ``tokens`` [batch,
    sequence] is 0 (padding) the state neither decays nor takes an update (decay 0, beta 0): right
    padding's convolution still sees the tokens before it."""
    import ascend_moe_onnx.exporters  # noqa: F401  (defines torch.ops.ascend_moe.gated_delta_rule)

    b, t, k_heads, key_dim = key.shape
    v_heads, value_dim = value.shape[-2:]
    if v_heads != k_heads:  # each query/key head serves v_heads // k_heads consecutive value heads
        query = query.repeat_interleave(v_heads // k_heads, dim=2)
        key = key.repeat_interleave(v_heads // k_heads, dim=2)
    query, key = query.float(), key.float()
    if use_qk_l2norm_in_kernel:
        query = query * torch.rsqrt((query * query).sum(-1, keepdim=True) + 1e-6)
        key = key * torch.rsqrt((key * key).sum(-1, keepdim=True) + 1e-6)
    if tokens is not None:
        g, beta = (x * tokens[..., None].to(x.dtype) for x in (g, beta))
    state = (torch.zeros(b, v_heads, key_dim, value_dim, dtype=torch.float32, device=value.device)
             if initial_state is None else initial_state.float())
    out, final = torch.ops.ascend_moe.gated_delta_rule(
        query.reshape(b, t, -1), key.reshape(b, t, -1), value.float().reshape(b, t, -1), state, g.float(),
        beta.float(), v_heads, key_dim ** -0.5)
    return out.reshape(b, t, v_heads, value_dim).to(value.dtype), final if output_final_state else None


def _delta_rule_modules(model: torch.nn.Module) -> list:
    """The modeling modules of ``model``'s layers that run a gated DeltaNet recurrence."""
    modules = {type(m).__module__ for m in model.modules()}
    return [sys.modules[name] for name in sorted(modules)
            if all(hasattr(sys.modules.get(name), f) for f in DELTA_RULE_FUNCTIONS)]


@contextlib.contextmanager
def traced_delta_rule(model: torch.nn.Module, attention_mask: torch.Tensor):
    """While inside: the gated DeltaNet layers of ``model`` run :func:`gated_delta_rule` (their
    modeling module's functions, looked up at each call, swapped and restored) and zero the padding
    tokens of ``attention_mask`` [batch, total] (HF's 2-D padding mask of a linear-attention layer,
    which it derives only from a 2-D model mask): a zero input leaves the states of left padding
    zero, as if the prompt started after it; right padding leaves them as they were after the last
    token (:func:`gated_delta_rule`, ``GraphCache.update_conv_state``)."""
    modules = _delta_rule_modules(model)
    saved = [(m, f, getattr(m, f)) for m in modules for f in DELTA_RULE_FUNCTIONS]
    names = {m.__name__ for m in modules}

    def padding_mask(module, args, kwargs):
        hidden = kwargs["hidden_states"] if "hidden_states" in kwargs else args[0]
        tokens = attention_mask[:, attention_mask.shape[1] - hidden.shape[1]:]
        kwargs["attention_mask"] = tokens
        for m, f, _ in saved:  # this layer's tokens, for the recurrence it runs next
            setattr(m, f, functools.partial(gated_delta_rule, tokens=tokens))
        return args, kwargs

    hooks = [m.register_forward_pre_hook(padding_mask, with_kwargs=True) for name, m in model.named_modules()
             if name.endswith("linear_attn") and type(m).__module__ in names]
    try:
        for m, f, _ in saved:
            setattr(m, f, gated_delta_rule)
        yield
    finally:
        for hook in hooks:
            hook.remove()
        for m, f, fn in saved:
            setattr(m, f, fn)


def cache_layout(model: PreTrainedModel) -> CacheLayout:
    """What each layer of ``model`` caches, from one probing call (2 tokens, no past)."""
    cache = GraphCache(None, None)
    ids = torch.zeros(1, 2, dtype=torch.int64)
    try:
        with torch.no_grad(), compressed_attention(compressed_modules(model)):
            model(input_ids=ids, attention_mask=torch.ones(1, 1, 1, 2, dtype=torch.bool),
                  position_ids=torch.arange(2)[None], past_key_values=cache, use_cache=True)
    except (AttributeError, TypeError, NotImplementedError) as e:  # a cache API beyond update()
        raise GenAIExportError(f"{model_type_of(model.config)}: its layers keep state other than one key/value "
                               f"cache per layer (linear-attention or recurrent state: {type(e).__name__}: "
                               f"{str(e).splitlines()[0][:160]}); this decoder carries key/value caches and gated "
                               "DeltaNet states only") from None
    text = model.config.get_text_config()
    n = text.num_hidden_layers
    states = {i for i in range(n) if i in cache.conv or i in cache.recurrent}
    if states:
        odd = [i for i in states if not (i in cache.conv and i in cache.recurrent) or i in cache.more_states]
        if odd or not _delta_rule_modules(model):
            raise GenAIExportError(f"{model_type_of(model.config)}: layers {sorted(states)} keep a convolution or "
                                   "recurrent state that is not a gated DeltaNet's (linear-attention or recurrent "
                                   "state); this decoder carries key/value caches and gated DeltaNet states only")
        for i in states:
            conv, recurrent = cache.conv[i].shape, cache.recurrent[i].shape
            cache.seen[i] = LayerState((conv[1], conv[2]), (recurrent[1], recurrent[2], recurrent[3]))
    missing = [i for i in range(n) if i not in cache.seen]
    if missing:
        raise GenAIExportError(f"{model_type_of(model.config)}: layers {missing} keep no key/value cache "
                               "through transformers' Cache.update (linear-attention or recurrent layers); "
                               "this decoder carries key/value caches and gated DeltaNet states only")
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
    decoder: dict[str, Any] = {
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
    if len(layout.attention) != n:  # linear-attention layers: genai's recurrent state holds theirs
        decoder["inputs"].update(past_conv_names=PAST_CONV, past_recurrent_names=PAST_RECURRENT)
        decoder["outputs"].update(present_conv_names=PRESENT_CONV, present_recurrent_names=PRESENT_RECURRENT)
        decoder["layer_types"] = layout.layer_types
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
