"""Greedy generation with an exported genai folder (``hf.genai``), and the check against
transformers' ``generate``.

``generate_ort`` is the project's own small loop over an ONNX Runtime session with the cache
contract genai uses (left-padded prompts, attention mask of past + new tokens, positions counted
over the unpadded tokens, presents fed back as the next pasts); ``generate_genai`` runs the same
folder through onnxruntime-genai. ``compare`` runs one of them and HF's ``generate`` on the same
prompts and reports the tokens and ms/token of each.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnxruntime as ort
    import onnxruntime_genai as og
    from transformers import GenerationMixin


def genai_installed() -> bool:
    """Whether onnxruntime-genai can be imported."""
    try:
        import onnxruntime_genai  # noqa: F401
    except ImportError:
        return False
    return True


def _config(folder: str | os.PathLike) -> dict:
    path = Path(folder) / "genai_config.json"
    if not path.is_file():
        raise FileNotFoundError(f"no genai_config.json in {folder} (export with `moe-onnx export --hf DIR --genai`)")
    return json.loads(path.read_text())


def session(folder: str | os.PathLike, threads: int | None = None) -> ort.InferenceSession:
    """An ONNX Runtime session of the folder's decoder, the folder's custom-op library registered."""
    import onnxruntime as ort

    folder = Path(folder)
    decoder = _config(folder)["model"]["decoder"]
    options = ort.SessionOptions()
    lib = decoder["session_options"].get("custom_ops_library")
    if lib:
        options.register_custom_ops_library(str(folder / lib))
    if threads:
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
    return ort.InferenceSession(str(folder / decoder["filename"]), options, providers=["CPUExecutionProvider"])


def _eos_ids(model: dict) -> list[int]:
    eos = model.get("eos_token_id")
    return [] if eos is None else (list(eos) if isinstance(eos, list) else [eos])


def generate_ort(folder: str | os.PathLike, prompts: list[list[int]], new_tokens: int, *,
                 sess: ort.InferenceSession | None = None, threads: int | None = None,
                 stop_at_eos: bool = False) -> list[list[int]]:
    """Greedy continuation of each prompt by ``new_tokens`` tokens (prompts left-padded into one batch).
    Without ``stop_at_eos`` the EOS ids are suppressed, as transformers' ``min_new_tokens`` does."""
    folder = Path(folder)
    cfg = _config(folder)["model"]
    dec = cfg["decoder"]
    sess = sess or session(folder, threads)
    b, longest = len(prompts), max(len(p) for p in prompts)
    pad = cfg.get("pad_token_id") or 0
    ids = np.full((b, longest), pad, dtype=np.int64)
    mask = np.zeros((b, longest), dtype=np.int64)
    for i, p in enumerate(prompts):
        ids[i, longest - len(p):] = p
        mask[i, longest - len(p):] = 1
    positions = np.maximum(np.cumsum(mask, 1) - 1, 0)
    layers = dec["num_hidden_layers"]
    feeds = _empty_cache(sess, b)
    eos = _eos_ids(cfg)
    out: list[list[int]] = [[] for _ in range(b)]
    done = np.zeros(b, dtype=bool)
    outputs = [o.name for o in sess.get_outputs()]
    for _ in range(new_tokens):
        feeds.update({"input_ids": ids, "attention_mask": mask, "position_ids": positions})
        results = dict(zip(outputs, sess.run(None, feeds)))
        logits = results[dec["outputs"]["logits"]][:, -1, :].astype(np.float32)
        if not stop_at_eos and eos:
            logits[:, eos] = -np.inf
        nxt = logits.argmax(-1)
        for i in range(b):
            if not done[i]:
                out[i].append(int(nxt[i]))
                done[i] = stop_at_eos and int(nxt[i]) in eos
        if done.all():
            break
        for kind in CACHE_KINDS:  # each layer's present is its next past
            past, present = dec["inputs"].get(f"past_{kind}_names"), dec["outputs"].get(f"present_{kind}_names")
            for i in range(layers):
                if past and past % i in feeds:
                    feeds[past % i] = results[present % i]
        ids = nxt[:, None].astype(np.int64)
        positions = positions[:, -1:] + 1
        mask = np.concatenate([mask, np.ones((b, 1), np.int64)], 1)
    return out


# The cache entries of genai_config's decoder inputs / outputs (``past_<kind>_names``).
CACHE_KINDS = ("key", "value", "conv", "recurrent")


def _empty_cache(sess, batch: int) -> dict:
    """Every cache input of ``sess`` for ``batch`` sequences before the first token: past lengths 0,
    states zero."""
    dtypes = {"tensor(float)": np.float32, "tensor(float16)": np.float16}
    return {i.name: np.zeros([batch if k == 0 else (d if isinstance(d, int) else 0) for k, d in enumerate(i.shape)],
                             dtypes.get(i.type, np.float32))
            for i in sess.get_inputs() if i.name.startswith("past_key_values")}


def generate_genai(folder: str | os.PathLike, prompts: list[list[int]], new_tokens: int, *,
                   model: og.Model | None = None) -> list[list[int]]:
    """Greedy continuation of each prompt by ``new_tokens`` tokens through onnxruntime-genai (EOS
    suppressed until then, as transformers' ``min_new_tokens`` does). Prompts of one call go in one
    batch, padded with the model's pad id."""
    import onnxruntime_genai as og

    model = model or og.Model(str(folder))
    pad = _config(folder)["model"].get("pad_token_id") or 0
    longest = max(len(p) for p in prompts)
    if len(prompts) > 1 and any(pad in p for p in prompts):
        raise ValueError(f"a prompt holds the pad id {pad}: genai would take it for padding in a batch")
    ids = np.full((len(prompts), longest), pad, dtype=np.int32)
    for i, p in enumerate(prompts):  # genai takes trailing pad ids for padding (right padding)
        ids[i, :len(p)] = p
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=longest + new_tokens, min_length=longest + new_tokens,
                              batch_size=len(prompts))
    gen = og.Generator(model, params)
    gen.append_tokens(ids)
    while not gen.is_done():
        gen.generate_next_token()
    return [list(map(int, gen.get_sequence(i)))[longest:] for i in range(len(prompts))]


def generate_hf(model: GenerationMixin, prompts: list[list[int]], new_tokens: int) -> list[list[int]]:
    """transformers' greedy ``generate`` of each prompt alone (batch 1), EOS suppressed until ``new_tokens``."""
    import torch

    out = []
    with torch.no_grad():
        for p in prompts:
            ids = torch.tensor([p])
            seq = model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=new_tokens,
                                 min_new_tokens=new_tokens, do_sample=False, num_beams=1)
            out.append(seq[0, len(p):].tolist())
    return out


@dataclass
class Comparison:
    """Tokens and ms/token of the exported folder (``runtime``) and of transformers."""

    runtime: str
    tokens: list[list[int]]
    hf_tokens: list[list[int]]
    ms_per_token: float
    hf_ms_per_token: float
    first_difference: list[int | None] = field(default_factory=list)

    @property
    def equal(self) -> bool:
        return self.tokens == self.hf_tokens


def compare(folder: str | os.PathLike, model: GenerationMixin, prompts: list[list[int]], new_tokens: int, *,
            runtime: str | None = None,
            threads: int | None = None) -> Comparison:
    """Generate ``new_tokens`` greedy tokens per prompt with the folder (genai when installed, else
    ``generate_ort``) and with the HF ``model``; ms/token of each (whole generation / tokens)."""
    runtime = runtime or ("genai" if genai_installed() else "ort")
    if runtime == "genai":
        import onnxruntime_genai as og

        handle = og.Model(str(folder))
        run = lambda: generate_genai(folder, prompts, new_tokens, model=handle)  # noqa: E731
    elif runtime == "ort":
        sess = session(folder, threads)
        run = lambda: generate_ort(folder, prompts, new_tokens, sess=sess)  # noqa: E731
    else:
        raise ValueError(f"runtime must be 'genai' or 'ort', got {runtime!r}")
    start = time.perf_counter()
    tokens = run()
    elapsed = time.perf_counter() - start
    start = time.perf_counter()
    hf_tokens = generate_hf(model, prompts, new_tokens)
    hf_elapsed = time.perf_counter() - start
    count = new_tokens * len(prompts)
    first = [next((j for j, (a, b) in enumerate(zip(x, y)) if a != b), None) for x, y in zip(tokens, hf_tokens)]
    return Comparison(runtime, tokens, hf_tokens, 1e3 * elapsed / count, 1e3 * hf_elapsed / count, first)
