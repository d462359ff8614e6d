"""Generation speed of the exported onnxruntime-genai decoder (``moe-onnx export --hf DIR --genai``)
against transformers' eager model: ms/token of a 128-token prefill and of one decode step at a
context of 128 and 1024 tokens, 1 and 2 threads, ratios in one process (interleaved samples).

    python -m ascend_moe_onnx.benchmarks.genai_decode [--families qwen3_moe,deepseek_v3,gpt_oss]
        [--threads 1,2] [--contexts 128,1024] [--prefill 128] [--builder]

``--builder`` also times gpt-oss through onnxruntime-genai itself (whole decode steps, genai's own
work included), this exporter's folder against the one onnxruntime-genai's model builder writes
from the same checkpoint (float32, CPU).

The models are small random checkpoints built from transformers' config classes (``SMALL``), float32.
The decoder runs on ONNX Runtime's CPU provider with the library, through the same cache contract
genai uses (one session call per step; genai's own overhead per step is not included); transformers
runs its eager attention with a DynamicCache put back to the context after each step.
"""

from __future__ import annotations

import argparse
import tempfile
import time

import numpy as np
import torch

from .common import torch_threads
from .timing import measure

SMALL = dict(vocab_size=8192, hidden_size=512, intermediate_size=1024, moe_intermediate_size=256,
             num_hidden_layers=4, num_attention_heads=8, num_key_value_heads=2, head_dim=64,
             max_position_embeddings=4096, num_local_experts=16, num_experts=16, n_routed_experts=16,
             num_experts_per_tok=4, n_group=1, topk_group=1, first_k_dense_replace=1, q_lora_rank=128,
             kv_lora_rank=128, qk_rope_head_dim=32, qk_nope_head_dim=64, v_head_dim=64, n_shared_experts=1,
             pad_token_id=0, bos_token_id=1, eos_token_id=2, sliding_window=128, norm_topk_prob=True)
# DeepSeek-V3 attention as published: one key/value head per query head (MLA)
PER_FAMILY = {"deepseek_v3": dict(num_key_value_heads=8, head_dim=32)}  # head_dim: the rotary width


def small_model(model_type: str, seed: int = 0):
    """A small random causal LM of ``model_type`` (``SMALL`` sizes), eval mode."""
    import transformers

    base = transformers.CONFIG_MAPPING[model_type]()
    fields = {k: v for k, v in {**SMALL, **PER_FAMILY.get(model_type, {})}.items() if hasattr(base, k)}
    config = transformers.AutoConfig.for_model(model_type, **fields)
    torch.manual_seed(seed)
    model = transformers.AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    return model.eval().requires_grad_(False)


def _ort_step(sess, dec: dict, batch: int, tokens: int, past: int, vocab: int):
    g = np.random.default_rng(0)
    feeds: dict[str, np.ndarray] = {"input_ids": g.integers(3, vocab, (batch, tokens), dtype=np.int64),
             "attention_mask": np.ones((batch, past + tokens), np.int64),
             "position_ids": np.arange(past, past + tokens, dtype=np.int64)[None].repeat(batch, 0)}
    shape = (batch, dec["num_key_value_heads"], past, dec["head_size"])
    for i in range(dec["num_hidden_layers"]):
        feeds[dec["inputs"]["past_key_names"] % i] = g.standard_normal(shape, dtype=np.float32)
        feeds[dec["inputs"]["past_value_names"] % i] = g.standard_normal(shape, dtype=np.float32)
    return lambda: sess.run(None, feeds)


def _hf_step(model, tokens: int, past: int, vocab: int):
    from transformers import DynamicCache

    g = torch.Generator().manual_seed(0)
    cache = DynamicCache(config=model.config)
    with torch.no_grad():
        if past:
            model(input_ids=torch.randint(3, vocab, (1, past), generator=g), past_key_values=cache, use_cache=True)
    ids = torch.randint(3, vocab, (1, tokens), generator=g)
    positions = torch.arange(past, past + tokens)[None]

    # Each step puts the cache back to the context. Cache layers replace their tensors on update
    # (torch.cat), so restoring each layer's attributes is O(1) and works for sliding-window layers,
    # which cannot crop once the context passes their window.
    context = [dict(vars(layer)) for layer in cache.layers]

    def run():
        with torch.no_grad():
            model(input_ids=ids, position_ids=positions, past_key_values=cache, use_cache=True,
                  logits_to_keep=1)
        for layer, state in zip(cache.layers, context):
            vars(layer).update(state)
    return run


def save_tokenizer(directory, vocab: int) -> None:
    """A word-level tokenizer of ``vocab`` tokens ("t0" ... ) saved beside a random checkpoint
    (the genai model builder needs one)."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"t{i}": i for i in range(vocab)}
    backend = Tokenizer(models.WordLevel(words, unk_token="t0"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="t0", pad_token="t0", bos_token="t1",
                            eos_token="t2").save_pretrained(directory)


def _with_threads(folder, threads: int) -> None:
    """Set the decoder's intra-op threads in a genai folder's config."""
    import json
    from pathlib import Path

    path = Path(folder) / "genai_config.json"
    config = json.loads(path.read_text())
    config["model"]["decoder"]["session_options"].update(intra_op_num_threads=threads, inter_op_num_threads=1)
    path.write_text(json.dumps(config, indent=4))


def genai_prompt(context: int, vocab: int) -> np.ndarray:
    """The [1, context] int32 prompt of the genai timings (random ids past the special ones)."""
    return np.random.default_rng(0).integers(3, vocab, (1, context), dtype=np.int32)


def genai_decode_run(folder, context: int, steps: int, vocab: int):
    """A callable timing ``steps`` genai decode steps after a ``context``-token prompt (seconds per step)."""
    import onnxruntime_genai as og

    model = og.Model(str(folder))
    prompt = genai_prompt(context, vocab)

    def run() -> float:
        params = og.GeneratorParams(model)
        # min_length keeps the end-of-sequence token from ending a timed run: genai stops growing a
        # finished sequence, and a further step then feeds a past as long as the present it expects
        params.set_search_options(do_sample=False, max_length=context + steps + 1, min_length=context + steps + 1)
        gen = og.Generator(model, params)
        gen.append_tokens(prompt)
        t0 = time.perf_counter()
        for _ in range(steps):
            gen.generate_next_token()
        return (time.perf_counter() - t0) / steps
    return run


def builder_comparison(threads_list, contexts, repeats: int = 5, steps: int = 16) -> list[dict]:
    """gpt-oss through onnxruntime-genai: this exporter's folder against the genai model builder's
    (float32, CPU), ms per decode step after a prompt of each context, interleaved."""
    import subprocess
    import sys
    from pathlib import Path

    from ascend_moe_onnx.hf import genai

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        small_model("gpt_oss").save_pretrained(root / "hf")
        save_tokenizer(root / "hf", SMALL["vocab_size"])
        genai.export_genai(small_model("gpt_oss"), root / "ours", checkpoint=root / "hf", check=False)
        built = subprocess.run([sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(root / "hf"),
                                "-o", str(root / "builder"), "-p", "fp32", "-e", "cpu", "-c", str(root / "cache")],
                               capture_output=True, text=True)
        if built.returncode:
            raise RuntimeError(f"the genai builder failed: {built.stderr.strip().splitlines()[-1:]}")
        for threads in threads_list:
            for folder in ("ours", "builder"):
                _with_threads(root / folder, threads)
            for context in contexts:
                runs = {k: genai_decode_run(root / k, context, steps, SMALL["vocab_size"]) for k in ("ours", "builder")}
                samples: dict[str, list[float]] = {k: [] for k in runs}
                for rep in range(repeats):
                    for k in (list(runs) if rep % 2 == 0 else list(runs)[::-1]):
                        samples[k].append(runs[k]())
                ours, theirs = (1e3 * float(np.median(samples[k])) for k in ("ours", "builder"))
                rows.append(dict(family="gpt_oss", threads=threads, case=f"genai decode @{context}",
                                 hf_ms=theirs, onnx_ms=ours, ratio=ours / theirs))
                print(f"gpt_oss      {threads} thr  genai decode @{context:<5d} builder {theirs:8.3f} ms/token  "
                      f"ours {ours:8.3f} ms/token  ours/builder {ours / theirs:5.2f}", flush=True)
    return rows


def run(families, threads_list, contexts, prefill: int, repeats: int = 5) -> list[dict]:
    """Measure every case; returns rows of {family, threads, case, hf_ms, onnx_ms, ratio}."""
    from ascend_moe_onnx.hf import genai
    from ascend_moe_onnx.hf import generate as gen

    rows = []
    for family in families:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            genai.export_genai(small_model(family), tmp, check=False)
            export_s = time.perf_counter() - t0
            reference = small_model(family)
            cfg = gen._config(tmp)["model"]
            vocab = cfg["vocab_size"]
            for threads in threads_list:
                sess = gen.session(tmp, threads)
                cases = [(f"prefill {prefill}", prefill, 0)] + [(f"decode @{c}", 1, c) for c in contexts]
                for name, tokens, past in cases:
                    with torch_threads(threads):
                        timings = measure({"hf": _hf_step(reference, tokens, past, vocab),
                                           "onnx": _ort_step(sess, cfg["decoder"], 1, tokens, past, vocab)},
                                          repeats=repeats, min_sample_s=0.05)
                    hf_ms, onnx_ms = (1e3 * timings[k].median / tokens for k in ("hf", "onnx"))
                    rows.append(dict(family=family, threads=threads, case=name, hf_ms=hf_ms, onnx_ms=onnx_ms,
                                     ratio=onnx_ms / hf_ms, export_s=export_s))
                    print(f"{family:12s} {threads} thr  {name:13s}  HF eager {hf_ms:8.3f} ms/token  "
                          f"ONNX {onnx_ms:8.3f} ms/token  ONNX/HF {onnx_ms / hf_ms:5.2f}", flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--families", default="qwen3_moe,deepseek_v3,gpt_oss")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--contexts", default="128,1024")
    p.add_argument("--prefill", type=int, default=128)
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--builder", action="store_true",
                   help="also gpt-oss through onnxruntime-genai against the genai model builder's folder")
    a = p.parse_args(argv)
    threads, contexts = [int(t) for t in a.threads.split(",")], [int(c) for c in a.contexts.split(",")]
    if a.families:
        run(a.families.split(","), threads, contexts, a.prefill, a.repeats)
    if a.builder:
        builder_comparison(threads, contexts, a.repeats)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
