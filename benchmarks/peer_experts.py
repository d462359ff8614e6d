"""Peer benchmark of the routed experts: the library's ``MoeRoutedExperts`` (float32, W8A16, W4A16
g32, W8A8, W4A8 g32) against llama.cpp's ggml CPU backend, torch bfloat16 and ONNX Runtime's
``com.microsoft.QMoE``, on the model suite's two blocks, one process, interleaved repetitions.

    python -m ascend_moe_onnx.benchmarks.peer_experts [--blocks ...] [--tokens 1,16,256,1024]
        [--threads 1,2] [--candidates ...] [--repeats N] [--ggml-lib DIR] [--out DIR]

Blocks (``quant_experts.block_shapes``, from ``model.BLOCKS``): the Qwen3-30B-A3B-like block (H 2048,
E 128, k 8, I 768) and the DeepSeek-V3-like one (H 7168, E 256, k 8, I 64, one shared expert); the
same seeded float32 weights and routed inputs as ``quant_experts`` (k distinct random experts per
token; up to 16 tokens successive calls rotate through ``quant_experts.ROTATION`` inputs, so decode
reads its experts from DRAM).

Candidates (``CANDIDATES``):
- the library (``PROJECT``): the experts node of ``quant_experts`` (the shared expert one more
  expert of weight 1), weights quantized by ``onnx_schemas.weight_quant``;
- ggml (``GGML``, ``ggml_bridge``): llama.cpp's ``build_moe_ffn`` (``ggml_mul_mat_id`` gate and up,
  SwiGLU, ``ggml_mul_mat_id`` down, weights multiplied in, the k slots added) plus the shared expert
  as llama.cpp's ``build_ffn``, on weights quantized by ggml itself (q4_0, q4_K, q8_0, bf16; q4_K
  rows of 64 take llama.cpp's fallback q5_0), read in place or, ``-repack``, repacked at load time
  into ggml-cpu's CPU_REPACK buffer where ggml has a repacked form for the type on this CPU;
- ``torch-bf16``: the same FFN as an eager reference writes it (Hugging Face's loop over the hit
  experts, ``F.linear`` on bfloat16 weights and activations, ``index_add_``);
- ``qmoe-int8`` / ``qmoe-int4``: QMoE on the library's integers (``quant_experts``).

Per candidate, case and thread count: the fastest per-call time over interleaved repetitions;
``ratio`` = candidate ÷ project time for the equal-bits pairings (``PAIRINGS``); the error of its
output rows against a float64 reference computed on its own dequantized weights (ggml's through its
type traits' ``to_float``, the library's and QMoE's through ``weight_quant.dequantize``, bfloat16's
exactly), ``rms`` = ||y - ref|| / ||ref|| and ``max`` = max |y - ref| / max |ref| over the first
``ERROR_ROWS`` tokens of the case's first input; ``read share`` = (weight bytes the call reads: the
distinct selected experts' weights and scales in the candidate's own format, averaged over the
rotation) ÷ the measured read bandwidth (``model.read_rate``, DRAM-sized buffer, the case's
thread count) ÷ time; ``compute share`` = (2·T·k'·3·H·I multiply-add operations) ÷ the measured
peak of the candidate's arithmetic (``compute_probe``: float32 FMAs for float activations,
int8 dot products for int8 activations, bfloat16 dot products where the CPU has them) ÷ time.
Results: ``<out>/peer_experts.{json,md}`` (default ./benchmark-results).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import shlex
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from ascend_moe_onnx.onnx_schemas import weight_quant

from . import ggml_bridge, timing
from . import model as model_suite
from . import quant_experts as qe

PROJECT = ("float32", "int8", "int4", "w8a8", "w4a8")
GGML = {"ggml-q4_0": ("q4_0", False), "ggml-q4_0-repack": ("q4_0", True), "ggml-q4_K": ("q4_K", False),
        "ggml-q4_K-repack": ("q4_K", True), "ggml-q8_0": ("q8_0", False), "ggml-bf16": ("bf16", False)}
OTHERS = ("torch-bf16", "qmoe-int8", "qmoe-int4")
CANDIDATES = PROJECT + tuple(GGML) + OTHERS
LABELS = {"float32": "float32", "int8": "W8A16", "int4": "W4A16 g32", "w8a8": "W8A8", "w4a8": "W4A8 g32",
          "ggml-q4_0": "ggml q4_0", "ggml-q4_0-repack": "ggml q4_0 repacked", "ggml-q4_K": "ggml q4_K",
          "ggml-q4_K-repack": "ggml q4_K repacked", "ggml-q8_0": "ggml q8_0", "ggml-bf16": "ggml bf16",
          "torch-bf16": "torch bf16", "qmoe-int8": "QMoE int8", "qmoe-int4": "QMoE int4 g32"}
# equal bits: (group, the library's candidates, the peers timed against them)
PAIRINGS = (("4-bit", ("int4", "w4a8"), ("ggml-q4_0", "ggml-q4_0-repack", "ggml-q4_K", "ggml-q4_K-repack",
                                          "qmoe-int4")),
            ("8-bit", ("int8", "w8a8"), ("ggml-q8_0", "qmoe-int8")),
            ("float", ("float32",), ("ggml-bf16", "torch-bf16")))
# the weights each candidate's reference is computed on (its own dequantized weights)
REFERENCE_WEIGHTS = {"float32": "float32", "int8": "int8", "w8a8": "int8", "qmoe-int8": "int8", "int4": "int4",
                     "w4a8": "int4", "qmoe-int4": "int4", "torch-bf16": "bf16", "ggml-bf16": "bf16",
                     **{c: "ggml-" + t for c, (t, _) in GGML.items() if t != "bf16"}}
ERROR_ROWS = 8
MAX_CALL_S = 2.0  # default --max-call-s: a slower runner (torch bf16 without AVX-512 BF16) is left out
ROTATE_MAX_TOKENS = 16  # as quant_experts: from 256 tokens on every expert is selected anyway


def arithmetic(candidate: str, cpu_bf16: bool) -> str:
    """The compute_probe kind a candidate's products run on: int8 for int8 activations (the
    library's A8 kernels; ggml's quantized types, whose activations ggml quantizes to 8 bits),
    bf16 for bfloat16 products where the CPU has them (else they run as float32), else fp32."""
    if candidate in ("w8a8", "w4a8") or (candidate.startswith("ggml-") and candidate != "ggml-bf16"):
        return "int8"
    if candidate in ("ggml-bf16", "torch-bf16") and cpu_bf16:
        return "bf16"
    return "fp32"


def ggml_expert_bytes(type_name: str, H: int, I: int) -> int:
    """Bytes of one expert's gate, up ([I, H]) and down ([H, I]) in ggml's ``type_name`` (with
    llama.cpp's fallback where the rows do not fit its blocks)."""
    rb, pt = ggml_bridge.row_bytes, ggml_bridge.projection_type
    return 2 * I * rb(pt(type_name, H), H) + H * rb(pt(type_name, I), I)


def candidate_expert_bytes(candidate: str, shape: dict, arrays: dict | None = None) -> int:
    """Bytes one expert occupies in ``candidate``'s format: the library's and QMoE's from their
    ``arrays`` (weights and scales), ggml's from its block sizes, bfloat16's 2 per weight."""
    H, I = shape["H"], shape["I"]
    if candidate in GGML:
        return ggml_expert_bytes(GGML[candidate][0], H, I)
    if candidate == "torch-bf16":
        return 2 * 3 * H * I
    if arrays is None:
        raise ValueError(f"the bytes of {candidate} come from its arrays")
    return sum(a.nbytes // a.shape[0] for a in arrays.values())


def mean_distinct_experts(rotation: list[dict]) -> float:
    """Mean number of distinct experts (routed and shared) a call of the rotation reads."""
    return float(np.mean([len(np.unique(inp["expert_idx"])) for inp in rotation]))


def call_flops(shape: dict, tokens: int) -> int:
    """Multiply-add operations (2 per multiply-add) of one call: T·k' pairs through 3·H·I weights."""
    return 2 * tokens * (shape["k"] + shape["shared"]) * 3 * shape["H"] * shape["I"]


def reference_ffn(x: np.ndarray, expert_idx: np.ndarray, routing_weights: np.ndarray, expert) -> np.ndarray:
    """y [T, H] in float64 of the SwiGLU experts: ``expert(e)`` -> (gate [I, H], up [I, H], down
    [H, I]), the weights a candidate dequantizes to."""
    x64 = x.astype(np.float64)
    y = np.zeros(x.shape, np.float64)
    for e in np.unique(expert_idx):
        t, j = np.nonzero(expert_idx == e)
        gate, up, down = (np.asarray(m, np.float64) for m in expert(int(e)))
        xe = x64[t]
        g, u = xe @ gate.T, xe @ up.T
        out = (g / (1.0 + np.exp(-g)) * u) @ down.T
        np.add.at(y, t, out * routing_weights[t, j, None].astype(np.float64))
    return y


def errors(y: np.ndarray, ref: np.ndarray) -> dict:
    """rms = ||y - ref|| / ||ref||, max = max |y - ref| / max |ref|."""
    d = y.astype(np.float64) - ref
    return {"rms": float(np.linalg.norm(d) / np.linalg.norm(ref)), "max": float(np.abs(d).max() / np.abs(ref).max())}


def split_gate_up(fc1: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Gate and up rows of one expert's interleaved [2I, H] gate/up matrix."""
    return fc1[0::2], fc1[1::2]


# ---- candidates ------------------------------------------------------------------------------------

class TorchBf16:
    """The eager reference in bfloat16: Hugging Face's loop over the hit experts."""

    def __init__(self, gate, up, down, shape: dict):
        import torch

        self.torch = torch
        self.gate, self.up, self.down = gate, up, down  # bf16 [E', I, H], [E', I, H], [E', H, I]
        self.E, self.shared = shape["E"], shape["shared"]
        self.last: Any = None

    def inputs(self, rotation: list[dict]) -> list:
        """Each input as torch tensors: x and routing weights in bfloat16, routed experts only."""
        t, k = self.torch, self.shared
        out = []
        for inp in rotation:
            cols = inp["expert_idx"].shape[1] - k
            out.append((t.from_numpy(inp["x"]).to(t.bfloat16), t.from_numpy(inp["expert_idx"][:, :cols].copy()),
                        t.from_numpy(inp["routing_weights"][:, :cols].copy()).to(t.bfloat16)))
        return out

    def ffn(self, e: int, v):
        F = self.torch.nn.functional
        return F.linear(F.silu(F.linear(v, self.gate[e])) * F.linear(v, self.up[e]), self.down[e])

    def __call__(self, x, idx, w):
        torch = self.torch
        with torch.inference_mode():
            y = torch.zeros_like(x)
            mask = torch.nn.functional.one_hot(idx, self.E).permute(2, 1, 0)  # [E, k, T]
            for e in mask.sum(dim=(-1, -2)).nonzero().flatten().tolist():
                j, t = torch.where(mask[e])
                y.index_add_(0, t, self.ffn(e, x[t]) * w[t, j, None])
            for s in range(self.shared):
                y += self.ffn(self.E + s, x)
            self.last = y
        return y


class _Calls:
    """A zero-argument runner: ``fn(*args)`` for each args of ``calls`` (one pass over a rotation)."""

    def __init__(self, fn, calls: list, before=None):
        self.fn, self.calls, self.before = fn, calls, before

    def __call__(self) -> None:
        if self.before is not None:
            self.before()
        for args in self.calls:
            self.fn(*args)


def _ggml_ffns(g, w: dict, shape: dict, candidates, thread_counts) -> dict:
    """candidate -> ggml_bridge.MoeFfn of the ggml candidates on the float32 stacks ``w``, each type
    quantized once (the repacked and plain candidates share the quantized bytes)."""
    E, s, H, I = shape["E"], shape["shared"], shape["H"], shape["I"]
    projections: dict[str, tuple] = {}
    ffns = {}
    for cand, (type_name, repack) in GGML.items():
        if cand not in candidates:
            continue
        if repack and not (g.has_buffer_type(ggml_bridge.REPACK_BUFFER)):
            continue
        if type_name not in projections:
            def stack(mats, experts, rows, cols, t=type_name):
                return ggml_bridge.quantize_stack(g, t, mats, experts, rows, cols)
            routed = (stack(lambda e: w["fc1"][e, 0::2], E, I, H), stack(lambda e: w["fc1"][e, 1::2], E, I, H),
                      stack(lambda e: w["fc2"][e], E, H, I))
            shared = tuple(stack(lambda e, m=m: m(E + e), s, r, c) for m, r, c in (
                (lambda e: w["fc1"][e, 0::2], I, H), (lambda e: w["fc1"][e, 1::2], I, H),
                (lambda e: w["fc2"][e], H, I))) if s else None
            projections[type_name] = (routed, shared)
        routed, shared = projections[type_name]
        if repack and not any(ggml_bridge.repackable(g, p) for p in routed):
            continue  # no repacked form for this type here: the candidate would be the plain one
        ffns[cand] = ggml_bridge.MoeFfn(g, routed[0], routed[1], routed[2], shared=shared, repack=repack,
                                        threads=tuple(thread_counts))
    return ffns


def _ggml_expert(g, ffn) -> Any:
    """expert(e) -> (gate, up, down) dequantized by ggml (the shared expert after the routed ones)."""
    def expert(e: int):
        gate, up, down = ffn.projections[:3] if e < ffn.experts else ffn.projections[3:]
        i = e if e < ffn.experts else e - ffn.experts
        return gate.expert(g, i), up.expert(g, i), down.expert(g, i)
    return expert


def _project_expert(arrays: dict, bits: int, block: int):
    def expert(e: int):
        if bits == 0:
            fc1, fc2 = arrays["fc1"][e], arrays["fc2"][e]
        else:
            fc1 = weight_quant.dequantize(arrays["fc1"][e], arrays["fc1_scales"][e], bits, block)
            fc2 = weight_quant.dequantize(arrays["fc2"][e], arrays["fc2_scales"][e], bits, block)
        return (*split_gate_up(fc1), fc2)
    return expert


def _bf16_weights(w: dict, ffns: dict):
    """bfloat16 gate, up, down stacks [E', ...] as torch tensors: ggml's bf16 bytes where the
    ggml-bf16 candidate exists (the same round-to-nearest-even values), else torch's conversion."""
    import torch

    ffn = ffns.get("ggml-bf16")
    if ffn is not None:
        stacks = []
        for i in range(3):
            parts = [ffn.projections[i]] + ([ffn.projections[3 + i]] if ffn.shared else [])
            mats = [torch.from_numpy(p.data.view(np.int16)).view(torch.bfloat16).view(p.experts, p.rows, p.cols)
                    for p in parts]
            stacks.append(mats[0] if len(mats) == 1 else torch.cat(mats))
        return tuple(stacks)
    fc1 = torch.from_numpy(w["fc1"])
    return (fc1[:, 0::2].to(torch.bfloat16), fc1[:, 1::2].to(torch.bfloat16),
            torch.from_numpy(w["fc2"]).to(torch.bfloat16))


def predicted_too_slow(last: dict, tokens: int, max_call_s: float) -> set[str]:
    """Runners whose call at ``tokens`` is predicted to exceed ``max_call_s`` seconds: ``last`` maps
    runner -> (tokens, seconds per call) of its last case; the time grows in proportion to T."""
    return {key for key, (t, s) in last.items() if s * tokens / t > max_call_s}


def run_block(name: str, tokens: list[int], thread_counts: list[int], repeats: int, rates: dict, g,
              tmp: str, size: str = "full", candidates=CANDIDATES, log=print,
              max_call_s: float = float("inf")) -> list[dict]:
    """One row per (token count, candidate, thread count) of one block (see the module docstring);
    runners predicted to take over ``max_call_s`` per call (``predicted_too_slow``) are left out
    from that token count on (a row with ``skipped``)."""
    import torch

    from . import common
    from .machine import OtherLoad

    shape = qe.block_shapes(name, size)
    E, k = shape["E"] + shape["shared"], shape["k"] + shape["shared"]
    tag = qe.thread_tags(thread_counts)
    w = qe.weights(shape)
    schemes = qe.schemes_of(w)
    log(f"{name}: building the library's and QMoE's sessions")
    sessions = qe.build_sessions(name, schemes, candidates, thread_counts, k, tmp)
    ffns = {}
    if g is not None:
        log(f"{name}: quantizing with ggml")
        ffns = _ggml_ffns(g, w, shape, candidates, thread_counts)
    bf16 = _bf16_weights(w, ffns) if "torch-bf16" in candidates or "ggml-bf16" in ffns else None
    eager = TorchBf16(bf16[0], bf16[1], bf16[2], shape) if bf16 is not None and "torch-bf16" in candidates else None
    experts: dict[str, Any] = {
        "float32": _project_expert(w, 0, 0), "int8": _project_expert(schemes["int8"][0], 8, 0),
        "int4": _project_expert(schemes["int4"][0], 4, qe.INT4_BLOCK),
        **{REFERENCE_WEIGHTS[c]: _ggml_expert(g, f) for c, f in ffns.items() if c != "ggml-bf16"}}
    if bf16 is not None:
        experts["bf16"] = lambda e: tuple(m[e].float().numpy() for m in bf16)
    rows: list[dict] = []
    last: dict[str, tuple[int, float]] = {}
    for T in tokens:
        rotation = qe.routing(shape, T, qe.ROTATION if T <= ROTATE_MAX_TOKENS else 1)
        slow = predicted_too_slow(last, T, max_call_s)  # stays in `last`: slower still at larger T
        for key in sorted(slow):
            cand, _, thr = key.partition("@")
            rows.append(dict(block=name, tokens=T, candidate=cand, threads=int(thr[:-1]) if thr else thread_counts[0],
                             skipped=f"predicted over {max_call_s:g} s per call"))
        runners: dict[str, Any] = {c: r for c, r in qe.session_runners(sessions, rotation, E).items() if c not in slow}
        # first calls: warm-up, and each candidate's output of the first input (for the errors)
        first: dict[str, np.ndarray] = {}
        for cand in list(runners):
            runners[cand]()
            if "@" not in cand:
                first[cand] = runners[cand].runs[0].binding.get_outputs()[0].numpy()
        routed = k - shape["shared"]  # ggml and torch take the shared expert apart
        for cand, ffn in ffns.items():
            grs = [ffn.graph(inp["x"], inp["expert_idx"][:, :routed], inp["routing_weights"][:, :routed])
                   for inp in rotation]
            for n in thread_counts:
                if cand + tag[n] not in slow:
                    runners[cand + tag[n]] = _Calls(lambda gr, f=ffn, n=n: f.compute(gr, n), [(gr,) for gr in grs])
            if cand not in slow:
                ffn.compute(grs[0], thread_counts[0])
                first[cand] = ffn.output(grs[0])
        if eager is not None:
            calls = eager.inputs(rotation)
            for n in thread_counts:
                if "torch-bf16" + tag[n] not in slow:
                    runners["torch-bf16" + tag[n]] = _Calls(eager, calls, before=lambda n=n: torch.set_num_threads(n))
            if "torch-bf16" not in slow:
                with common.torch_threads(thread_counts[0]):
                    first["torch-bf16"] = eager(*calls[0]).float().numpy()
        errs = _case_errors(first, rotation[0], experts)
        log(f"{name} T={T}: timing {len(runners)} runners")
        with OtherLoad() as load:
            timings = timing.measure(runners, repeats=repeats, min_sample_s=0.02,
                                     warmup_s=timing.warmup_for(max(thread_counts)))
        for ffn in ffns.values():
            ffn.close_graphs()
        distinct = mean_distinct_experts(rotation)
        flops = call_flops(shape, T)
        for key, t in timings.items():
            cand, _, thr = key.partition("@")
            n = int(thr[:-1]) if thr else thread_counts[0]
            best = t.fastest / len(rotation)
            last[key] = (T, best)
            arrays = sessions[key][1] if key in sessions else None
            nbytes = distinct * candidate_expert_bytes(cand, shape, arrays)
            kind = arithmetic(cand, bool(rates["cpu_bf16"]))
            peak = rates["peaks"][n].get(kind) or rates["peaks"][n]["fp32"]
            row = dict(block=name, tokens=T, candidate=cand, threads=n, us=best * 1e6,
                       median_us=t.median / len(rotation) * 1e6, bytes=nbytes, flops=flops,
                       read_share=nbytes / rates["read"][n] / best, compute_share=flops / peak / best,
                       arithmetic=kind, other_load_cores=load.cores,
                       **{f"err_{m}": v for m, v in errs.get(cand, {}).items()})
            rows.append(row)
        log(format_rows([r for r in rows if r["block"] == name and r["tokens"] == T]))
    for ffn in ffns.values():
        ffn.close()
    del sessions, ffns, eager
    gc.collect()
    return rows


def _case_errors(first: dict, inp: dict, experts: dict) -> dict:
    """candidate -> errors of its first ERROR_ROWS rows against the float64 reference on its own
    dequantized weights (one reference per weight set)."""
    n = min(ERROR_ROWS, inp["x"].shape[0])
    x, idx, rw = inp["x"][:n], inp["expert_idx"][:n], inp["routing_weights"][:n]
    refs: dict[str, np.ndarray] = {}
    out = {}
    for cand, y in first.items():
        key = REFERENCE_WEIGHTS[cand]
        if key not in experts:
            continue
        if key not in refs:
            refs[key] = reference_ffn(x, idx, rw, experts[key])
        out[cand] = errors(y[:n], refs[key])
    return out


# ---- report --------------------------------------------------------------------------------------

def _fmt_us(us: float) -> str:
    return f"{us:,.0f}" if us >= 100 else f"{us:,.1f}"


def format_rows(rows: list[dict]) -> str:
    """A fixed-width table of run_block's rows."""
    head = (f"{'block':14s} {'T':>5s} {'thr':>3s} {'candidate':18s} {'us/call':>11s} {'MiB read':>9s} "
            f"{'read sh':>7s} {'comp sh':>7s} {'rms err':>8s} {'max err':>8s}")
    lines = [head, "-" * len(head)]
    for r in rows:
        if "us" not in r:
            lines.append(f"{r['block']:14s} {r['tokens']:5d} {r['threads']:3d} {r['candidate']:18s} "
                         f"skipped: {r['skipped']}")
            continue
        lines.append(f"{r['block']:14s} {r['tokens']:5d} {r['threads']:3d} {r['candidate']:18s} "
                     f"{_fmt_us(r['us']):>11s} {r['bytes'] / 2**20:9.1f} {r['read_share']:7.2f} "
                     f"{r['compute_share']:7.2f} {r.get('err_rms', float('nan')):8.1e} "
                     f"{r.get('err_max', float('nan')):8.1e}")
    return "\n".join(lines)


def _index(rows: list[dict]) -> dict:
    """(block, T, threads, candidate) -> row, of the rows that were timed."""
    return {(r["block"], r["tokens"], r["threads"], r["candidate"]): r for r in rows if "us" in r}


def pairing_ratios(rows: list[dict]) -> list[dict]:
    """Per (block, T, threads, pairing group, library candidate, peer): ratio = peer ÷ library time."""
    idx = _index(rows)
    out = []
    for (block, T, n, cand), r in sorted(idx.items(), key=lambda kv: kv[0][:3]):
        for group, own, peers in PAIRINGS:
            if cand not in own:
                continue
            for peer in peers:
                p = idx.get((block, T, n, peer))
                if p is not None:
                    out.append(dict(block=block, tokens=T, threads=n, group=group, project=cand, peer=peer,
                                    ratio=p["us"] / r["us"]))
    return out


def thread_scaling(rows: list[dict]) -> list[dict]:
    """Per (block, T, candidate, N > 1 threads): N-thread time ÷ 1-thread time."""
    idx = _index(rows)
    out = []
    for (block, T, n, cand), r in idx.items():
        one = idx.get((block, T, 1, cand))
        if n > 1 and one is not None:
            out.append(dict(block=block, tokens=T, threads=n, candidate=cand, ratio=r["us"] / one["us"],
                            other_load_cores=r.get("other_load_cores")))
    return sorted(out, key=lambda s: (s["block"], s["candidate"] not in PROJECT, s["candidate"], s["tokens"]))


def _table(header: list[str], body: list[list[str]]) -> str:
    return "\n".join(["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
                     + ["| " + " | ".join(b) + " |" for b in body])


def pairing_table(rows: list[dict], threads: int) -> str:
    """Per block and T at ``threads``: each group's library times and each peer's time with its
    ratio to the library candidates of its group (peer ÷ library; > 1: the library is faster)."""
    idx = _index(rows)
    cases = sorted({(r["block"], r["tokens"]) for r in rows if r["threads"] == threads},
                   key=lambda c: (list(dict.fromkeys(r["block"] for r in rows)).index(c[0]), c[1]))
    header = ["block", "T"]
    cols = []
    for _group, own, peers in PAIRINGS:
        for c in own + peers:
            if any(key[3] == c for key in idx):
                header.append(LABELS[c])
                cols.append((c, own))
    body = []
    for block, T in cases:
        line = [block, str(T)]
        for c, own in cols:
            r = idx.get((block, T, threads, c))
            if r is None:
                line.append("")
                continue
            text = _fmt_us(r["us"])
            if c not in own:
                ratios = [r["us"] / idx[(block, T, threads, o)]["us"] for o in own if (block, T, threads, o) in idx]
                text += " (" + " / ".join(f"{x:.2f}" for x in ratios) + ")"
            line.append(text)
        body.append(line)
    return _table(header, body)


def detail_table(rows: list[dict]) -> str:
    """Every row: time, bytes read, shares of the read bound and compute peak, errors, other load."""
    header = ["block", "T", "thr", "candidate", "µs", "MiB read", "read share", "arithmetic", "compute share",
              "rms err", "max err", "other load"]
    body = []
    for r in rows:
        if "us" not in r:
            body.append([r["block"], str(r["tokens"]), str(r["threads"]), LABELS.get(r["candidate"], r["candidate"]),
                         "skipped: " + r["skipped"]] + [""] * 7)
            continue
        load = r.get("other_load_cores")
        body.append([r["block"], str(r["tokens"]), str(r["threads"]), LABELS.get(r["candidate"], r["candidate"]),
                     _fmt_us(r["us"]), f"{r['bytes'] / 2**20:.1f}", f"{r['read_share']:.2f}", r["arithmetic"],
                     f"{r['compute_share']:.2f}", f"{r['err_rms']:.2e}" if "err_rms" in r else "",
                     f"{r['err_max']:.2e}" if "err_max" in r else "", "?" if load is None else f"{load:.2f}"])
    return _table(header, body)


def scaling_table(rows: list[dict], min_tokens: int = 16) -> str:
    """N-thread ÷ 1-thread time per candidate and T ≥ ``min_tokens`` (target ≤ 0.55 at 2 threads)."""
    body = [[s["block"], LABELS.get(s["candidate"], s["candidate"]), str(s["tokens"]), str(s["threads"]),
             f"{s['ratio']:.2f}", "?" if s["other_load_cores"] is None else f"{s['other_load_cores']:.2f}"]
            for s in thread_scaling(rows) if s["tokens"] >= min_tokens]
    return _table(["block", "candidate", "T", "N", "N thr ÷ 1 thr", "other load"], body)


def markdown(results: dict) -> str:
    """The report: how it was measured, the pairings, thread scaling and every row."""
    run, rates, rows = results["run"], results["rates"], results["rows"]
    ggml = results["ggml"]
    rate_lines = [f"{n} thread(s): read {rates['read'][str(n)] / 1e9:.1f} GB/s; peaks "
                  + ", ".join(f"{k} {v / 1e9:.0f} G/s" for k, v in rates["peaks"][str(n)].items() if v)
                  for n in run["threads"]]
    parts = [
        "# Peer benchmark: routed experts", "",
        f"`{run['command']}`, {run['started']} ({run['seconds']:.0f} s); machine: {results['machine']['cpu']} "
        f"({results['machine']['cores']} cores, {results['machine']['isa']}); load average at start / end "
        f"{run['load_start']} / {run['load_end']} (the machine is shared: only ratios within one run mean "
        "anything). ggml: " + (f"{ggml['version']} from {ggml['folder']} ({ggml['features']})" if ggml["available"]
                               else f"not available ({ggml['reason']})") + ".", "",
        "Times: the fastest of the interleaved repetitions, per call (per input where calls rotate). Read share: "
        "the weight bytes the call reads (distinct selected experts, the candidate's own format) ÷ the measured "
        "read bandwidth (`model.read_rate`: streaming sums over 4× the last-level cache, the case's threads) ÷ "
        "time. Compute share: 2·T·k'·3·H·I operations ÷ the peak of the candidate's arithmetic, measured by "
        "`compute_probe` (independent FMA / integer-dot chains in the widest vectors, one per thread) ÷ time. "
        "Errors: against a float64 reference on the candidate's own dequantized weights, first "
        f"{ERROR_ROWS} tokens.", "", *(f"- {line}" for line in rate_lines), ""]
    for n in run["threads"]:
        parts += [f"## Equal bits, {n} thread(s)", "", "µs per call; peers: (peer ÷ library candidate of the "
                  "group: 4-bit W4A16 / W4A8, 8-bit W8A16 / W8A8, float float32; > 1: the library is faster).", "",
                  pairing_table(rows, n), ""]
    if len(run["threads"]) > 1:
        parts += ["## Thread scaling (T ≥ 16)", "", "N-thread time ÷ 1-thread time, same interleaved samples "
                  "(target ≤ 0.55 at 2 threads); other load: cores other processes kept busy during the case.", "",
                  scaling_table(rows), ""]
    parts += ["## Every case", "", detail_table(rows), ""]
    return "\n".join(parts)


# ---- command line --------------------------------------------------------------------------------

def machine_rates(thread_counts: list[int]) -> dict:
    """Read bandwidth and compute peaks per thread count (see the module docstring)."""
    from . import compute_probe
    from .machine import _cpuinfo

    nbytes = max(model_suite.DRAM_PROBE_MIN_BYTES, 4 * (model_suite.last_level_cache_bytes() or 0))
    flags = set(_cpuinfo().get("flags", "").split())
    return {"read": {n: model_suite.read_rate(nbytes, n) for n in thread_counts},
            "peaks": {n: compute_probe.peaks(n) for n in thread_counts},
            "cpu_bf16": "avx512_bf16" in flags}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", default=",".join(model_suite.BLOCKS))
    p.add_argument("--tokens", default="1,16,256,1024")
    p.add_argument("--threads", default="1,2", help="thread counts, timed interleaved (first: the baseline)")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--size", default="full", choices=("tiny", "full"), help="tiny: a smoke run")
    p.add_argument("--candidates", default=",".join(CANDIDATES), help=f"subset of {','.join(CANDIDATES)}")
    p.add_argument("--ggml-lib", metavar="DIR", help="folder of llama.cpp's libggml*.so (else "
                   f"${ggml_bridge.GGML_LIB_DIR_ENV}, else the llama_cpp package's)")
    p.add_argument("--max-call-s", type=float, default=MAX_CALL_S, metavar="S",
                   help="leave out a runner from the token count on where its call is predicted to take longer")
    p.add_argument("--out", metavar="DIR", default="benchmark-results", help="writes peer_experts.{json,md} there")
    argv = sys.argv[1:] if argv is None else argv
    args = p.parse_args(argv)
    from .machine import a8_dot_path, isa_path

    candidates = tuple(c.strip() for c in args.candidates.split(",") if c.strip())
    unknown = sorted(set(candidates) - set(CANDIDATES))
    if unknown:
        p.error(f"--candidates: unknown {unknown} (known: {', '.join(CANDIDATES)})")
    try:
        thread_counts = [int(n) for n in args.threads.split(",")]
        tokens = [int(t) for t in args.tokens.split(",")]
    except ValueError:
        p.error(f"--threads and --tokens take comma-separated integers, got '{args.threads}' / '{args.tokens}'")
    ggml_info: dict[str, Any] = {"available": False, "reason": "no ggml candidate selected"}
    g = None
    if any(c in GGML for c in candidates):
        try:
            g = ggml_bridge.Ggml(args.ggml_lib)
            ggml_info = {"available": True, "version": g.version, "folder": str(g.folder),
                         "features": g.cpu_features(), "repack": g.has_buffer_type(ggml_bridge.REPACK_BUFFER)}
            if g.version != ggml_bridge.CHECKED_VERSION:
                print(f"note: ggml {g.version}; the bridge was checked against {ggml_bridge.CHECKED_VERSION}")
        except ggml_bridge.GgmlUnavailable as e:
            ggml_info["reason"] = str(e)
            print(f"ggml candidates skipped: {e}", file=sys.stderr)
    started, load_start = time.time(), [round(v, 2) for v in os.getloadavg()]
    rates = machine_rates(thread_counts)
    print(f"kernel path {isa_path()}, int8-activation dot path {a8_dot_path()}, threads {thread_counts}; "
          + "; ".join(f"{n} thr: read {rates['read'][n] / 1e9:.1f} GB/s, fp32 peak "
                      f"{rates['peaks'][n]['fp32'] / 1e9:.0f} GFLOP/s, int8 peak {rates['peaks'][n]['int8'] / 1e9:.0f} "
                      "GOP/s" for n in thread_counts if rates["peaks"][n]["fp32"]), flush=True)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.blocks.split(","):
            rows += run_block(name, tokens, thread_counts, args.repeats, rates, g, tmp, args.size, candidates,
                              log=lambda s: print(s, flush=True), max_call_s=args.max_call_s)
    from .machine import _cpuinfo

    cpu = _cpuinfo()
    results = {
        "run": {"command": " ".join(["python -m ascend_moe_onnx.benchmarks.peer_experts", *map(shlex.quote, argv)]),
                "started": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(started)),
                "seconds": time.time() - started, "load_start": load_start,
                "load_end": [round(v, 2) for v in os.getloadavg()], "threads": thread_counts, "tokens": tokens,
                "repeats": args.repeats, "size": args.size, "max_call_s": args.max_call_s},
        "machine": {"cpu": cpu.get("model name", platform.processor()), "cores": os.cpu_count(),
                    "isa": f"kernel path {isa_path()}, int8-activation dots {a8_dot_path()}",
                    "flags": " ".join(f for f in cpu.get("flags", "").split()
                                      if f.startswith(("avx", "fma", "amx")))},
        "ggml": ggml_info,
        "rates": {"read": {str(n): v for n, v in rates["read"].items()},
                  "peaks": {str(n): v for n, v in rates["peaks"].items()}, "cpu_bf16": rates["cpu_bf16"]},
        "rows": rows, "pairings": pairing_ratios(rows), "thread_scaling": thread_scaling(rows),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "peer_experts.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "peer_experts.md").write_text(markdown(results) + "\n")
    print(f"\nwrote {out / 'peer_experts.md'} and {out / 'peer_experts.json'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
