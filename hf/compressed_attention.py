"""DeepSeek-V4's attention (a sliding window, alone or with compressed sparse attention, CSA, or
heavily compressed attention, HCA) over a cache of one row per position, which genai can hold.

transformers' DeepSeek-V4 layers keep, beside the sliding window's key (= value), the compressed
entries emitted so far, the tokens of the window not yet compressed, the previous window's
overlap half (CSA) and the same again for the lightning indexer (CSA). All of it is a function of
per-token projections: the compressor's ``kv_proj`` / ``gate_proj`` and the indexer's. So each
layer caches, per position, one row ``[sliding key | compressor kv | compressor gate | indexer kv |
indexer gate]`` (what its kind has; zero-padded to the widest layer's row, so every layer has one
width), and each call recomputes the compressed entries of every completed window from the rows:
exact, at O(context) work per layer and step (the indexer's top-k, a rank by comparison, at
O(entries²) per query). Rows are placed by token position (the cumulative
attention mask), so padding on either side is no token: it enters no window and no attention.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any

import torch

# DeepSeek-V4's attention layer types
SLIDING, CSA, HCA = "sliding_attention", "compressed_sparse_attention", "heavily_compressed_attention"


def compressed_modules(model: torch.nn.Module) -> dict[int, Any]:
    """{layer index: attention module} of ``model``'s DeepSeek-V4 attention layers (a sliding
    window with an optional ``compressor``, grouped output projection, attention sinks)."""
    found: dict[int, Any] = {}
    for m in model.modules():
        if getattr(m, "layer_type", None) in (SLIDING, CSA, HCA) and hasattr(m, "compressor") \
                and hasattr(m, "o_a_proj") and hasattr(m, "sinks"):
            found[getattr(m, "layer_idx")] = m  # noqa: B009  (an HF attribute mypy cannot see)
    return found


def _compressor_width(module: Any) -> int:
    compressor = module.compressor
    return 0 if compressor is None else compressor.kv_proj.out_features


def _indexer_width(module: Any) -> int:
    indexer = getattr(module.compressor, "indexer", None)
    return 0 if indexer is None else indexer.kv_proj.out_features


def row_width(module: Any) -> int:
    """Values one position of this layer caches: its sliding key, the compressor's kv and gate,
    the indexer's kv and gate."""
    return module.head_dim + 2 * _compressor_width(module) + 2 * _indexer_width(module)


@contextlib.contextmanager
def compressed_attention(modules: dict[int, Any]) -> Iterator[None]:
    """While inside: the DeepSeek-V4 attention layers ``modules`` (:func:`compressed_modules`) run
    :func:`attention_forward`, caching rows as wide as the widest layer's."""
    width = max((row_width(m) for m in modules.values()), default=0)
    try:
        for m in modules.values():
            m.__dict__["forward"] = functools.partial(attention_forward, m, width=width)
        yield
    finally:
        for m in modules.values():
            m.__dict__.pop("forward", None)


def longest_window(modules: dict[int, Any]) -> int:
    """The most positions one compressed entry of ``modules`` pools (0 without compressors)."""
    return max((m.compressor.compress_rate for m in modules.values() if m.compressor is not None), default=0)


def _by_position(rows: torch.Tensor, tokens: torch.Tensor, rate: int) -> torch.Tensor:
    """``rows`` [b, k, width] of the cache slots laid out by token position, for the first
    ``k // rate`` windows of ``rate`` positions: [b, windows, rate, width]. ``tokens`` [b, k] is 1
    for a token, 0 for padding; a position no row holds yet gets some row's values (its window is
    never visible)."""
    b, k, width = rows.shape
    windows = k // rate
    position = tokens.cumsum(-1) - 1  # slot j holds token position[j] where tokens[j]
    target = torch.where(tokens > 0, position, torch.full_like(position, k))  # padding: a spare column
    slots = torch.arange(k, device=rows.device)[None].expand(b, -1)
    slot = torch.zeros(b, k + 1, dtype=torch.int64, device=rows.device).scatter(1, target, slots)
    dense = rows.gather(1, slot[:, :windows * rate, None].expand(-1, -1, width))
    return dense.reshape(b, windows, rate, width)


def _compress(compressor: Any, kv: torch.Tensor, gate: torch.Tensor, overlap: bool,
              rope) -> torch.Tensor:
    """One compressed entry per window (HF's compressor / indexer on whole windows): ``kv`` /
    ``gate`` [b, windows, rate, c]; with ``overlap`` (CSA) each entry pools the previous window's
    first half of the channels with its own second half. Returns [b, windows, c or c / 2], normed
    and rotated at each window's first position."""
    b, windows, rate, _ = kv.shape
    gate = gate + compressor.position_bias
    if overlap:
        half = kv.shape[-1] // 2
        first_kv = kv.new_zeros(b, 1, rate, half)
        first_gate = gate.new_full((b, 1, rate, half), float("-inf"))  # window 0 has no previous window
        previous_kv = torch.cat([first_kv, kv[..., :half]], 1)[:, :windows]
        previous_gate = torch.cat([first_gate, gate[..., :half]], 1)[:, :windows]
        kv = torch.cat([previous_kv, kv[..., half:]], 2)
        gate = torch.cat([previous_gate, gate[..., half:]], 2)
    pooled = (kv * gate.softmax(dim=2, dtype=torch.float32).to(kv.dtype)).sum(dim=2)
    compressed = compressor.kv_norm(pooled)
    positions = (torch.arange(windows, device=kv.device) * rate)[None].expand(b, -1)
    cos, sin = compressor.rotary_emb(compressed, position_ids=positions, layer_type=compressor.rope_layer_type)
    return rope(compressed.unsqueeze(1), cos, sin).squeeze(1)


def _selected(scores: torch.Tensor, top: int) -> torch.Tensor:
    """[b, q, n] True for the ``top`` highest ``scores`` of each query (ties to the lower index):
    ranks by comparison, so no TopK over a possibly empty axis and no data-dependent k."""
    index = torch.arange(scores.shape[-1], device=scores.device)
    above = scores[..., None, :] > scores[..., :, None]  # [b, q, n (this), n (other)]
    tied_before = (scores[..., None, :] == scores[..., :, None]) & (index[None, :] < index[:, None])
    rank = (above | tied_before).to(torch.int64).sum(-1)
    return rank < top


def attention_forward(module: Any, hidden_states: torch.Tensor, position_embeddings,
                      position_ids: torch.Tensor, attention_mask=None, cache=None, *, width: int,
                      **kwargs) -> tuple[torch.Tensor, None]:
    """DeepSeek-V4's ``DeepseekV4Attention.forward`` over ``cache`` (``hf.genai.GraphCache``): this
    call's rows appended to the layer's past rows, the sliding window over the rows' keys, the
    compressed entries of every completed window recomputed from the rows, the indexer's top-k
    choice among them (CSA), HF's per-query causality of the entries, attention sinks."""
    from .genai import _allowed, attend

    hf = sys.modules[type(module).__module__]
    rope = hf.apply_rotary_pos_emb
    b, s, _ = hidden_states.shape
    hd = module.head_dim
    cos, sin = position_embeddings[module.rope_layer_type]
    q_residual = module.q_a_norm(module.q_a_proj(hidden_states))
    q = module.q_b_proj(q_residual).view(b, s, -1, hd).transpose(1, 2)
    q = rope(module.q_b_norm(q), cos, sin)
    kv = rope(module.kv_norm(module.kv_proj(hidden_states)).view(b, s, 1, hd).transpose(1, 2), cos, sin)

    compressor = module.compressor
    indexer = getattr(compressor, "indexer", None)
    parts = [kv]
    for projections in (compressor, indexer):
        if projections is not None:
            parts += [projections.kv_proj(hidden_states).unsqueeze(1).to(kv.dtype),
                      projections.gate_proj(hidden_states).unsqueeze(1).to(kv.dtype)]
    row = torch.cat(parts, -1)
    row = torch.nn.functional.pad(row, (0, width - row.shape[-1]))
    rows = cache.update(row, row, module.layer_idx)[0][:, 0]  # [b, k, width]: past and this call's
    k = rows.shape[1]
    tokens = cache.tokens[:, :k] if cache.tokens is not None else \
        torch.ones(b, k, dtype=torch.int64, device=rows.device)
    mask = tokens.to(torch.bool)[:, None, None, :]
    keys = [rows[:, None, :, :hd]]
    allowed = [_allowed(module, mask, s, k, module.sliding_window)]
    if compressor is not None:
        rate = compressor.compress_rate
        dense = _by_position(rows, tokens.to(torch.int64), rate)
        c = _compressor_width(module)
        compressed = _compress(compressor, dense[..., hd:hd + c], dense[..., hd + c:hd + 2 * c], indexer is not None,
                               rope)
        # query t sees entry w once its window is complete: (w + 1) * rate <= t + 1
        q_positions = tokens.to(torch.int64).cumsum(-1)[:, k - s:] - 1  # [b, s]
        entry = torch.arange(compressed.shape[1], device=rows.device)
        visible = entry[None, None, :] < torch.div(q_positions + 1, rate, rounding_mode="floor")[..., None]
        if indexer is not None:
            i = hd + 2 * c
            ic = _indexer_width(module)
            keys_i = _compress(indexer, dense[..., i:i + ic], dense[..., i + ic:i + 2 * ic], True, rope)
            cos_q, sin_q = indexer.rotary_emb(hidden_states, position_ids=position_ids,
                                              layer_type=indexer.rope_layer_type)
            query_i = indexer.q_b_proj(q_residual).view(b, s, -1, indexer.head_dim).transpose(1, 2)
            query_i = rope(query_i, cos_q, sin_q).transpose(1, 2)
            scores = indexer.scorer(query_i, keys_i, hidden_states)  # [b, s, windows]
            scores = scores.masked_fill(~visible, float("-inf"))
            visible = visible & _selected(scores, indexer.index_topk)
        keys.append(compressed.unsqueeze(1).to(kv.dtype))
        allowed.append(visible[:, None])
    key = torch.cat(keys, 2)
    out = attend(module, q, key, key, torch.cat(allowed, -1), module.scaling, module.sinks)  # [b, s, h, hd]
    # K = V carried the keys' rotation into the output: undo it at the query's position
    out = rope(out.transpose(1, 2), cos, -sin).transpose(1, 2)
    grouped = module.o_a_proj(out.reshape(b, s, module.config.o_groups, -1)).flatten(2)
    return module.o_b_proj(grouped), None
