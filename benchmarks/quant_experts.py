"""Quantized experts (docs/quantization.md): the model suite's expert calls with float32, int8
(W8A16) and 4-bit (W4A16) weights in the library's ``MoeRoutedExperts``, against ONNX Runtime's
``com.microsoft.QMoE`` on the same integers and scales, one process, interleaved, and against the
read bound of each candidate's own bytes.

    python -m ascend_moe_onnx.benchmarks.quant_experts [--tokens 1,16,256] [--blocks ...] [--threads 1]
        [--candidates float32,int4,w4a8,...]

``--threads 1,2`` times each candidate with both thread counts in the same interleaved samples
(candidate names get ``@2t``; ``x 1 thread`` is the 2-thread time over the 1-thread time).

What runs: the experts node of the model suite's blocks (benchmarks.model.BLOCKS: the Qwen3-like
block at its real width, the DeepSeek-V3-like one at width 64, its shared expert folded in as one
more expert of weight 1, as the exported ``ort`` formulation runs it), on token rows routed to k
distinct random experts. Successive calls rotate through ``ROTATION`` inputs with other experts
(decode reads each call's experts from DRAM, not from the cache the previous call filled).

Candidates: ``float32``; ``bfloat16`` (the same weights rounded to bfloat16: the op's bfloat16
products, on the path ASCEND_MOE_CPU_BF16_DOT leaves); ``torch-bf16``: torch eager on the bfloat16
weights (rows cast to bfloat16, each selected expert's gate/up and down as bfloat16 matmuls, oneDNN
where torch has it, summed per token in float32 as Hugging Face's expert loop does); ``int8`` (per
channel); ``int4`` (per group of 32); ``w8a8`` / ``w4a8``:
the same integers with int8 activations (``act_quant`` 1: per-token dynamic int8, integer dot
products on weights repacked at session creation); ``qmoe-int8`` /
``qmoe-int4``: QMoE with the same integers as its unsigned layout (the stored byte XOR 0x80 /
0x88: its zero point 2^(bits-1)), the same scales, fed router probabilities that select exactly the
same experts and ``router_weights`` with the same mixing weights. QMoE's per-channel 8-bit kernel
keeps float activations; its block-wise 8-bit kernel quantizes activations to int8 (so int8 is
compared per channel only).

Bound: the bytes of the distinct selected experts' weights and scales per call (averaged over the
rotation), at the machine's measured single-core read rate (benchmarks.read_probe through
benchmarks.model.read_rate); ``share`` = bound / time.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from typing import Any

import ml_dtypes
import numpy as np
import onnx
from onnx import TensorProto, helper

from ascend_moe_onnx.onnx_schemas import weight_quant

from . import model as model_suite
from . import timing

ROTATION = 8
INT4_BLOCK = weight_quant.DEFAULT_INT4_BLOCK  # the tiny presets' widths (32) take it too
CANDIDATES = ("float32", "bfloat16", "torch-bf16", "int8", "int4", "w8a8", "w4a8", "qmoe-int8", "qmoe-int4")


def block_shapes(name: str, size: str = "full") -> dict:
    """H, E, k, I and shared slices of a model-suite block (``size`` tiny: the preset's tiny one)."""
    from ascend_moe_onnx.models import presets

    preset, changes = model_suite.BLOCKS[name]
    cfg = presets.config(preset, size)
    if size == "full":
        cfg = cfg.replace(**changes)
    return dict(H=cfg.hidden, E=cfg.experts, k=cfg.top_k, I=cfg.intermediate, shared=cfg.shared)


def weights(shape: dict, seed: int = 0) -> dict:
    """float32 fc1 [E', 2I, H] (gate/up interleaved) and fc2 [E', H, I]; E' = E + shared slices."""
    rng = np.random.default_rng(seed)
    E, H, I = shape["E"] + shape["shared"], shape["H"], shape["I"]
    fc1 = np.empty((E, 2 * I, H), np.float32)
    fc2 = np.empty((E, H, I), np.float32)
    for e in range(E):  # one expert at a time: no float64 copy of the whole stack
        fc1[e] = rng.standard_normal((2 * I, H), np.float32) * np.float32(H ** -0.5)
        fc2[e] = rng.standard_normal((H, I), np.float32) * np.float32(I ** -0.5)
    return {"fc1": fc1, "fc2": fc2}


def quantized(w: dict, bits: int, block: int) -> dict:
    """The stacks quantized per expert (onnx_schemas.weight_quant)."""
    out = {}
    for name in ("fc1", "fc2"):
        qs = [weight_quant.quantize(w[name][e], bits, block) for e in range(w[name].shape[0])]
        out[name] = np.stack([q for q, _ in qs])
        out[name + "_scales"] = np.stack([s for _, s in qs])
    return out


def bfloat16(w: dict) -> dict:
    """The stacks rounded to bfloat16 (round to nearest even), one expert at a time."""
    out = {}
    for name in ("fc1", "fc2"):
        out[name] = np.empty(w[name].shape, ml_dtypes.bfloat16)
        for e in range(w[name].shape[0]):
            out[name][e] = w[name][e].astype(ml_dtypes.bfloat16)
    return out


class TorchBf16:
    """torch eager on bfloat16 experts: per call, the rows cast to bfloat16, each selected expert's
    rows through gate/up, SwiGLU and down as bfloat16 matmuls, weighted and summed per token in
    float32 (the expert loop of Hugging Face's MoE blocks)."""

    def __init__(self, arrays: dict, threads: int) -> None:
        import torch

        self.torch, self.threads = torch, threads
        self.fc1 = torch.from_numpy(arrays["fc1"].view(np.uint16)).view(torch.bfloat16)
        self.fc2 = torch.from_numpy(arrays["fc2"].view(np.uint16)).view(torch.bfloat16)

    def runner(self, inp: dict):
        """A callable running one input (its routing grouped once, as a plan would be)."""
        torch = self.torch
        x = torch.from_numpy(inp["x"])
        w = torch.from_numpy(inp["routing_weights"]).reshape(-1)
        k = inp["expert_idx"].shape[1]
        flat = torch.from_numpy(inp["expert_idx"]).reshape(-1)
        pairs = {e: (flat == e).nonzero().squeeze(1) for e in torch.unique(flat).tolist()}
        fc1, fc2, threads = self.fc1, self.fc2, self.threads

        def run():
            torch.set_num_threads(threads)
            with torch.inference_mode():
                xb = x.to(torch.bfloat16)
                y = torch.zeros(x.shape, dtype=torch.float32)
                for e, p in pairs.items():
                    tok = p // k
                    h = torch.nn.functional.linear(xb[tok], fc1[e])
                    a = torch.nn.functional.silu(h[:, 0::2]) * h[:, 1::2]
                    out = torch.nn.functional.linear(a, fc2[e]).float()
                    y.index_add_(0, tok, out * w[p, None])
                return y

        return run


def routing(shape: dict, tokens: int, rotation: int, seed: int = 1) -> list[dict]:
    """``rotation`` inputs: x [T, H], expert_idx [T, k'] (k distinct routed experts, + the shared
    slices), routing_weights [T, k'] (shared slots 1)."""
    rng = np.random.default_rng(seed)
    E, k, s = shape["E"], shape["k"], shape["shared"]
    out = []
    for _ in range(rotation):
        idx = np.stack([rng.choice(E, k, replace=False) for _ in range(tokens)]).astype(np.int64)
        w = rng.random((tokens, k)).astype(np.float32)
        if s:
            idx = np.concatenate([idx, np.tile(np.arange(E, E + s), (tokens, 1))], axis=1)
            w = np.concatenate([w, np.ones((tokens, s), np.float32)], axis=1)
        out.append({"x": rng.standard_normal((tokens, shape["H"]), np.float32), "expert_idx": idx,
                    "routing_weights": w})
    return out


def _save(nodes, inputs, shared: dict, path: str, domains) -> None:
    """A one-node model whose initializers are placeholders (a sparse file; the session gets the
    arrays themselves through ``add_initializer``)."""
    inits, offset = [], 0
    data = os.path.basename(path) + ".data"
    for name, a in shared.items():
        t = TensorProto(name=name, data_type=helper.np_dtype_to_tensor_dtype(a.dtype), dims=a.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data), ("offset", str(offset)), ("length", str(a.nbytes))):
            t.external_data.add(key=key, value=value)
        inits.append(t)
        offset += a.nbytes
    out = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "experts", inputs, [out], inits)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid(d, v) for d, v in domains]), path)
    with open(os.path.join(os.path.dirname(path), data), "wb") as f:
        f.truncate(offset)


def own_model(path: str, arrays: dict, bits: int, block: int, act_quant: int = 0) -> None:
    """MoeRoutedExperts on ``arrays`` (float, or quantized with ``bits`` / ``block``; ``act_quant``
    1: int8 activations)."""
    from ascend_moe_onnx import onnx_schemas

    names = ["x", "expert_idx", "routing_weights", "fc1", "fc2"] + (["fc1_scales", "fc2_scales"] if bits else [])
    attrs: dict[str, Any] = {"weight_bits": bits, "block_size": block} if bits else {}
    if act_quant:
        attrs["act_quant"] = act_quant
    node = helper.make_node("MoeRoutedExperts", names, ["y"], domain=onnx_schemas.DOMAIN, **attrs)
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", None]),
              helper.make_tensor_value_info("expert_idx", TensorProto.INT64, ["T", None]),
              helper.make_tensor_value_info("routing_weights", TensorProto.FLOAT, ["T", None])]
    _save([node], inputs, arrays, path, [("", 21), (onnx_schemas.DOMAIN, 1)])


def qmoe_arrays(q: dict, bits: int) -> dict:
    """QMoE's unsigned layout of the same integers (zero point 2^(bits-1)) and the same scales."""
    flip = np.uint8(0x80 if bits == 8 else 0x88)
    return {"fc1": q["fc1"].view(np.uint8) ^ flip, "fc2": q["fc2"].view(np.uint8) ^ flip,
            "fc1_scales": q["fc1_scales"], "fc2_scales": q["fc2_scales"]}


def qmoe_model(path: str, arrays: dict, bits: int, block: int, k: int) -> None:
    """com.microsoft.QMoE on ``arrays`` (qmoe_arrays), mixing with ``router_weights``."""
    attrs: dict[str, Any] = dict(k=k, activation_type="swiglu", swiglu_fusion=1, activation_alpha=1.0,
                                 activation_beta=0.0, normalize_routing_weights=0, expert_weight_bits=bits)
    if block:
        attrs["block_size"] = block
    node = helper.make_node("QMoE", ["x", "router_probs", "fc1", "fc1_scales", "", "fc2", "fc2_scales",
                                     "", "", "", "", "", "", "", "router_weights"], ["y"],
                            domain="com.microsoft", **attrs)
    inputs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["T", None])
              for n in ("x", "router_probs", "router_weights")]
    _save([node], inputs, arrays, path, [("", 21), ("com.microsoft", 1)])


def qmoe_inputs(inp: dict, experts: int) -> dict:
    """Router probabilities that select exactly ``expert_idx`` (2 there, 0 elsewhere) and the
    mixing weights scattered to their experts."""
    T = inp["x"].shape[0]
    probs = np.zeros((T, experts), np.float32)
    mix = np.zeros((T, experts), np.float32)
    rows = np.arange(T)[:, None]
    probs[rows, inp["expert_idx"]] = 2.0
    mix[rows, inp["expert_idx"]] = inp["routing_weights"]
    return {"x": inp["x"], "router_probs": probs, "router_weights": mix}


class _RotationRun:
    """Runs each of ``runs`` (bound runners, one per input of the rotation) once per call."""

    def __init__(self, runs: list) -> None:
        self.runs = runs

    def __call__(self) -> None:
        for r in self.runs:
            r()


def _runner(sess, rotation: list[dict]) -> _RotationRun:
    from . import common

    return _RotationRun([common.bound_runner(sess, inp) for inp in rotation])


def selected_bytes(arrays: dict, rotation: list[dict]) -> float:
    """Mean bytes of the distinct selected experts' weights (and scales) per call."""
    per_expert = sum(a.nbytes // a.shape[0] for a in arrays.values())
    return float(np.mean([len(np.unique(inp["expert_idx"])) * per_expert for inp in rotation]))


def schemes_of(w: dict, wanted=None) -> dict:
    """candidate -> (arrays, weight_bits, block_size, act_quant) of the library's candidates on the
    float32 stacks ``w``; only the weight forms the candidates ``wanted`` need are made (None: all)."""
    want = set(CANDIDATES if wanted is None else wanted)
    q8 = quantized(w, 8, 0) if want & {"int8", "w8a8", "qmoe-int8"} else {}
    q4 = quantized(w, 4, INT4_BLOCK) if want & {"int4", "w4a8", "qmoe-int4"} else {}
    bf = bfloat16(w) if want & {"bfloat16", "torch-bf16"} else {}
    return {"float32": (w, 0, 0, 0), "bfloat16": (bf, 16, 0, 0), "int8": (q8, 8, 0, 0),
            "int4": (q4, 4, INT4_BLOCK, 0), "w8a8": (q8, 8, 0, 1), "w4a8": (q4, 4, INT4_BLOCK, 1)}


def thread_tags(thread_counts: list[int]) -> dict[int, str]:
    """Suffix of a candidate's name per thread count: none for the first, ``@Nt`` for the others."""
    return {n: "" if n == thread_counts[0] else f"@{n}t" for n in thread_counts}


def build_sessions(name: str, schemes: dict, candidates, thread_counts: list[int], k: int, tmp: str) -> dict:
    """candidate (with its thread tag) -> (session, arrays) of the library's candidates in
    ``schemes`` (schemes_of) and of QMoE on their integers, one session per thread count."""
    tag = thread_tags(thread_counts)
    sessions = {}
    for cand, (arrays, bits, block, act_quant) in schemes.items():
        if cand not in candidates:
            continue
        path = os.path.join(tmp, f"{name}-{cand}.onnx")
        own_model(path, arrays, 0 if bits == 16 else bits, block, act_quant)  # bfloat16: the arrays' type
        for n in thread_counts:
            sessions[cand + tag[n]] = (model_suite.shared_session(path, arrays, n), arrays)
        if bits and not act_quant and "qmoe-" + cand in candidates:
            qa = qmoe_arrays(arrays, bits)
            path = os.path.join(tmp, f"{name}-qmoe-{cand}.onnx")
            qmoe_model(path, qa, bits, block, k)
            for n in thread_counts:
                sessions["qmoe-" + cand + tag[n]] = (model_suite.shared_session(path, qa, n), qa)
    return sessions


def session_runners(sessions: dict, rotation: list[dict], experts: int) -> dict:
    """candidate -> a runner of its session over ``rotation`` (QMoE gets qmoe_inputs)."""
    runners = {}
    for cand, (sess, _arrays) in sessions.items():
        rot = [qmoe_inputs(inp, experts) for inp in rotation] if cand.startswith("qmoe") else rotation
        runners[cand] = _runner(sess, rot)
    return runners


def run_block(name: str, tokens: list[int], threads, repeats: int, rate: float, tmp: str,
              size: str = "full", candidates=CANDIDATES) -> list[dict]:
    """Rows of ``format_rows`` for one block: every candidate at every token count."""
    shape = block_shapes(name, size)
    E = shape["E"] + shape["shared"]
    k = shape["k"] + shape["shared"]
    thread_counts = [threads] if isinstance(threads, int) else list(threads)
    schemes = schemes_of(weights(shape), candidates)
    sessions = build_sessions(name, schemes, candidates, thread_counts, k, tmp)
    tag = thread_tags(thread_counts)
    torch_runs = ({"torch-bf16" + tag[n]: TorchBf16(schemes["bfloat16"][0], n) for n in thread_counts}
                  if "torch-bf16" in candidates else {})
    rows = []
    for T in tokens:
        rotation = routing(shape, T, ROTATION if T <= 16 else 1)
        runners = session_runners(sessions, rotation, E)
        for cand, tb in torch_runs.items():
            runners[cand] = _RotationRun([tb.runner(inp) for inp in rotation])
        for r in runners.values():
            r()
        ref: dict[str, np.ndarray] = {c: runners[c].runs[0].binding.get_outputs()[0].numpy()
                                      for c in ("int8", "int4") if c in runners}
        if "torch-bf16" in runners:  # the bfloat16 candidate against torch's bfloat16 result
            ref["torch-bf16"] = runners["torch-bf16"].runs[0]().numpy()
        timings = timing.measure(runners, repeats=repeats, min_sample_s=0.02)
        base = timings["float32"].fastest / len(rotation) if "float32" in timings else float("nan")
        for cand, t in timings.items():
            best = t.fastest / len(rotation)
            plain = cand.split("@")[0]
            nbytes = selected_bytes(schemes["bfloat16"][0] if plain == "torch-bf16" else sessions[cand][1], rotation)
            row = dict(block=name, tokens=T, candidate=cand, us=best * 1e6, vs_float32=base / best,
                       mib=nbytes / 2**20, gbs=nbytes / best / 1e9, share=nbytes / rate / best)
            if plain != cand and plain in timings:
                row["vs_1_thread"] = best / (timings[plain].fastest / len(rotation))
            own = {"qmoe-int8": "int8", "qmoe-int4": "int4", "w8a8": "int8", "w4a8": "int4",
                   "bfloat16": "torch-bf16"}.get(plain)
            if own in ref:  # the same integers with float activations (this library's A16 kernel)
                got = runners[cand].runs[0].binding.get_outputs()[0].numpy()
                want = ref[own]
                row["max_rel_vs_own"] = float(np.abs(got - want).max() / np.abs(want).max())
                row["vs"] = own
            rows.append(row)
    return rows


def format_rows(rows: list[dict]) -> str:
    """A fixed-width table of run_block's rows."""
    head = f"{'block':15s} {'T':>4s} {'candidate':13s} {'us/call':>9s} {'x float32':>9s} {'MiB read':>9s} " \
           f"{'GB/s':>6s} {'share':>6s}  note"
    lines = [head, "-" * len(head)]
    for r in rows:
        note = f"max rel diff vs {r['vs']} {r['max_rel_vs_own']:.1e}" if "max_rel_vs_own" in r else ""
        if "vs_1_thread" in r:
            note = f"x 1 thread {r['vs_1_thread']:.2f}  " + note
        lines.append(f"{r['block']:15s} {r['tokens']:4d} {r['candidate']:13s} {r['us']:9.1f} {r['vs_float32']:9.2f} "
                     f"{r['mib']:9.2f} {r['gbs']:6.1f} {r['share']:6.2f}  {note}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", default=",".join(model_suite.BLOCKS))
    p.add_argument("--tokens", default="1,16,256")
    p.add_argument("--threads", default="1", help="intra-op threads; 1,2: both, interleaved")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--size", default="full", choices=("tiny", "full"), help="tiny: a smoke run")
    p.add_argument("--candidates", default=",".join(CANDIDATES), help=f"subset of {','.join(CANDIDATES)}")
    args = p.parse_args(argv)
    from .machine import a8_dot_path, bf16_dot_path, isa_path

    threads = [int(n) for n in args.threads.split(",")]
    rate = model_suite.read_rate(4 * (model_suite.last_level_cache_bytes() or 2**25), threads[0])
    print(f"read rate {rate / 1e9:.1f} GB/s (1 core, read_probe), kernel path {isa_path()}, "
          f"int8-activation dot path {a8_dot_path()}, bfloat16 dot path {bf16_dot_path()}, "
          f"{args.threads} thread(s), int4 block {INT4_BLOCK}, rotation {ROTATION} inputs up to 16 tokens")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.blocks.split(","):
            rows += run_block(name, [int(t) for t in args.tokens.split(",")], threads, args.repeats, rate, tmp,
                              args.size, tuple(args.candidates.split(",")))
            print(format_rows([r for r in rows if r["block"] == name]), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
