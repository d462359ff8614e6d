"""MoeReRouting: the node in ONNX Runtime with the library against gathering the same rows with
torch and NumPy, and against the physical limit, a plain contiguous copy of the same bytes.

Candidates (every output preallocated and reused unless said otherwise):
- ``ort-fused``: the MoeReRouting node, outputs bound to preallocated arrays (IO binding);
- ``torch-index_select``: ``torch.index_select(tokens, 0, g, out=...)`` (+ the scale rows);
- ``numpy-take``: ``np.take(tokens, g, axis=0, out=...)`` (+ the scale rows);
- ``numpy-fancy``: ``tokens[g]`` (+ ``scales[g]``), allocating, as most code writes it;
- ``copy-numpy`` / ``copy-threads`` / ``copy-torch`` / ``copy-kernel``: a contiguous copy of the
  whole token (and scale) buffer: ``np.copyto`` on one thread (glibc memcpy), the same split over
  the case's thread count (NumPy releases the GIL), ``Tensor.copy_``, and the node itself on the
  identity layout (one rank, one expert: one block, so its copy routine without the permutation;
  glibc's memcpy is far from the machine's bandwidth at some sizes). The fastest of them is "copy"
  in the reports: the limit of moving these bytes on this machine with that many threads.

The baselines get the gather index ``g`` precomputed from the counts; the node computes it itself.
Bandwidth is payload bytes (token + scale rows) per second; each byte is read once and written once.

Every timed candidate writes the same output buffer, so that each finds it as warm as the others:
at 1024 x 2048 bfloat16 (4 MiB) a node writing an output of its own, while the three copies
shared another, measured 48-55% of copy instead of 77-86% (a loaded 2-core Zen 3; its output
left the cache between its calls). The node's result is checked once, in a buffer of its own.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import torch
from onnx import TensorProto, helper

from . import common, timing

FUSED = "ort-fused"
BASELINES = {
    "torch-index_select": "torch.index_select(out=)",
    "numpy-take": "np.take(out=)",
    "numpy-fancy": "NumPy fancy indexing (allocating)",
}
COPIES = ("copy-numpy", "copy-threads", "copy-torch", "copy-kernel")
CANDIDATES = (FUSED, *BASELINES, *COPIES)
_TYPES = {"int8": (np.int8, TensorProto.INT8), "bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16)}


@dataclass
class ReRoutingPlan:
    """What the re-routing suite measures (the cartesian product of the fields)."""

    ranks: tuple = (4, 16)
    experts: tuple = (8, 16)
    tokens: tuple = (1024, 16384)
    hidden: tuple = (2048, 2880, 7168)
    dtypes: tuple = ("int8", "bfloat16")  # int8 comes with float32 per-token scales
    counts: tuple = ("uniform", "skewed")
    threads: tuple = (1, 2)
    shapes: tuple | None = None  # explicit (ranks, experts, tokens, hidden) tuples instead of the product

    def shape_list(self) -> list[tuple]:
        """(ranks, experts, tokens, hidden) of every case, grouped by (hidden, tokens)."""
        if self.shapes is not None:
            return sorted(self.shapes, key=lambda s: (s[3], s[2]))
        return [(n, e, a, h) for h in self.hidden for a in self.tokens for n in self.ranks for e in self.experts]


def make_counts(ranks: int, experts: int, tokens: int, kind: str, seed: int = 0) -> np.ndarray:
    """int64 counts [ranks, experts] summing to ``tokens``.

    uniform: every (rank, expert) block equally likely; skewed: a Zipf-like load over experts
    with a quarter of the experts empty on every rank, and unequal ranks (some blocks empty).
    """
    rs = np.random.RandomState(seed)
    if kind == "uniform":
        p = np.full(ranks * experts, 1.0 / (ranks * experts))
    elif kind == "skewed":
        e = 1.0 / np.arange(1, experts + 1) ** 1.5
        e[rs.permutation(experts)[: max(1, experts // 4)]] = 0.0  # empty experts
        r = 1.0 / np.arange(1, ranks + 1)
        p = np.outer(r, e).reshape(-1)
        p /= p.sum()
    else:
        raise ValueError(f"unknown counts kind '{kind}' (uniform, skewed)")
    return rs.multinomial(tokens, p).reshape(ranks, experts).astype(np.int64)


def model(dtype: str, hidden: int, ranks: int, experts: int) -> bytes:
    """One MoeReRouting node: tokens [A, hidden] (+ float32 scales [A] for int8), counts [N, E]."""
    t = _TYPES[dtype][1]
    scales = dtype == "int8"
    inputs = [helper.make_tensor_value_info("tokens", t, ["A", hidden]),
              helper.make_tensor_value_info("counts", TensorProto.INT64, [ranks, experts])]
    if scales:
        inputs.append(helper.make_tensor_value_info("scales", TensorProto.FLOAT, ["A"]))
    outputs = [helper.make_tensor_value_info("permute_tokens", t, ["A", hidden]),
               helper.make_tensor_value_info("permute_scales", TensorProto.FLOAT, None),
               helper.make_tensor_value_info("permute_idx", TensorProto.INT32, ["A"]),
               helper.make_tensor_value_info("expert_token_num", TensorProto.INT64, [experts])]
    node = helper.make_node("MoeReRouting", [i.name for i in inputs], [o.name for o in outputs],
                            domain="ascend.moe")
    graph = helper.make_graph([node], "re_routing", inputs, outputs)
    m = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)])
    return m.SerializeToString()


class _Case:
    """Buffers of one shape: inputs, the node's outputs, one output shared by the baselines."""

    def __init__(self, dtype: str, tokens: int, hidden: int, seed: int = 0):
        rs = np.random.RandomState(seed)
        bits = rs.randint(-128, 128, size=(tokens, hidden), dtype=np.int8) if dtype == "int8" else \
            rs.randint(0, 1 << 16, size=(tokens, hidden), dtype=np.uint16).view(ml_dtypes.bfloat16)
        self.tokens = bits
        self.scales = rs.rand(tokens).astype(np.float32) if dtype == "int8" else None
        self.out_tokens = np.zeros_like(bits)  # the node's output when its result is checked
        self.out_scales = None if self.scales is None else np.zeros_like(self.scales)
        self.out_idx = np.zeros(tokens, np.int32)
        self.base_tokens = np.zeros_like(bits)  # every timed candidate's output (one at a time)
        self.base_scales = None if self.scales is None else np.zeros_like(self.scales)

    @property
    def payload(self) -> int:
        """Bytes moved per call: token rows plus scale rows."""
        return self.tokens.nbytes + (0 if self.scales is None else self.scales.nbytes)


_POOLS: dict[int, ThreadPoolExecutor] = {}


def _split_copy(dst: np.ndarray, src: np.ndarray, threads: int):
    """A callable copying flat byte array ``src`` into ``dst`` in ``threads`` concurrent slices."""
    if threads <= 1:
        return lambda: np.copyto(dst, src)
    pool = _POOLS.setdefault(threads, ThreadPoolExecutor(threads))
    bounds = np.linspace(0, src.size, threads + 1).astype(np.int64) // 64 * 64  # whole cache lines
    bounds[-1] = src.size
    parts = [(dst[a:b], src[a:b]) for a, b in zip(bounds[:-1], bounds[1:])]

    def copy():
        for f in [pool.submit(np.copyto, d, s) for d, s in parts]:
            f.result()
    return copy


def _candidates(case: _Case, sess, counts: np.ndarray, threads: int, identity) -> dict:
    from ascend_moe_onnx.onnx_schemas.moe_re_routing import gather_index

    g_np = gather_index(counts)
    g = torch.from_numpy(g_np)
    feeds = {"tokens": case.tokens, "counts": counts}
    outs = {"permute_tokens": case.base_tokens, "permute_idx": case.out_idx,
            "expert_token_num": np.zeros(counts.shape[1], np.int64)}
    check = {**outs, "permute_tokens": case.out_tokens}
    if case.scales is not None:
        feeds["scales"] = case.scales
        outs["permute_scales"] = case.base_scales
        check["permute_scales"] = case.out_scales
    tok_t, out_t = common.to_torch(case.tokens), common.to_torch(case.base_tokens)
    tok_raw = case.tokens.view(np.uint16) if case.tokens.dtype == ml_dtypes.bfloat16 else case.tokens
    base_raw = case.base_tokens.view(tok_raw.dtype)
    sc, sc_out = case.scales, case.base_scales
    sc_t = None if sc is None else torch.from_numpy(sc)
    sc_out_t = None if sc is None else torch.from_numpy(sc_out)

    def index_select():
        torch.index_select(tok_t, 0, g, out=out_t)
        if sc_t is not None:
            torch.index_select(sc_t, 0, g, out=sc_out_t)

    def take():
        np.take(tok_raw, g_np, axis=0, out=base_raw)
        if sc is not None:
            np.take(sc, g_np, axis=0, out=sc_out)

    def fancy():
        r = tok_raw[g_np]
        return r if sc is None else (r, sc[g_np])

    flat_src, flat_dst = tok_raw.reshape(-1).view(np.uint8), base_raw.reshape(-1).view(np.uint8)
    threaded = _split_copy(flat_dst, flat_src, threads)

    def copy_numpy():
        np.copyto(flat_dst, flat_src)
        if sc is not None:
            np.copyto(sc_out, sc)

    def copy_threads():
        threaded()
        if sc is not None:
            np.copyto(sc_out, sc)

    def copy_torch():
        out_t.copy_(tok_t)
        if sc_t is not None:
            sc_out_t.copy_(sc_t)

    one = np.array([[case.tokens.shape[0]]], np.int64)
    id_outs = {"permute_tokens": case.base_tokens, "permute_idx": case.out_idx,
               "expert_token_num": np.zeros(1, np.int64)}
    if case.scales is not None:
        id_outs["permute_scales"] = case.base_scales
    fns = {FUSED: common.bound_runner(sess, feeds, outs), "torch-index_select": index_select,
           "numpy-take": take, "numpy-fancy": fancy, "copy-numpy": copy_numpy,
           "copy-threads": copy_threads, "copy-torch": copy_torch,
           "copy-kernel": common.bound_runner(identity, {**feeds, "counts": one}, id_outs), "_g": g_np,
           "_check": common.bound_runner(sess, feeds, check)}
    if threads <= 1:
        del fns["copy-threads"]  # the same as copy-numpy
    return fns


def run(plan: ReRoutingPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Measure every case of ``plan``; one result dict per case."""
    results = []
    shapes = plan.shape_list()
    for dtype in plan.dtypes:
        case = None
        for ranks, experts, tokens, hidden in shapes:
            if case is None or case.tokens.shape != (tokens, hidden):  # buffers shared by shapes
                case = None  # free the previous buffers (up to ~1 GiB) before allocating new ones
                case = _Case(dtype, tokens, hidden)
                identity_model = model(dtype, hidden, 1, 1)
            data = model(dtype, hidden, ranks, experts)
            for threads in plan.threads:
                sess = common.session(data, threads, library=True)
                identity = common.session(identity_model, threads, library=True)
                for kind in plan.counts:
                    counts = make_counts(ranks, experts, tokens, kind)
                    row = _measure(case, sess, identity, counts, threads, repeats, min_sample_s)
                    row.update(dtype=dtype, ranks=ranks, experts=experts, tokens=tokens, hidden=hidden,
                               counts=kind, threads=threads)
                    results.append(row)
                    log(_describe(row))
    return results


def _measure(case: _Case, sess, identity, counts, threads, repeats, min_sample_s) -> dict:
    fns = _candidates(case, sess, counts, threads, identity)
    g = fns.pop("_g")
    with common.torch_threads(threads):
        fns.pop("_check")()  # the node's result, in case.out_tokens (the timed calls share a buffer)
        if not np.array_equal(case.out_tokens.view(np.uint8), case.tokens[g].view(np.uint8)):
            raise AssertionError(f"MoeReRouting output differs from tokens[g] ({case.tokens.shape})")
        t, load, attempts = timing.measure_quietly(fns, repeats, min_sample_s, threads)
    row = _row(case, counts, t)
    row.update(other_load_cores=load, attempts=attempts)
    return row


def _row(case: _Case, counts: np.ndarray, t: dict) -> dict:
    copy = min((n for n in COPIES if n in t), key=lambda n: t[n].median)
    fused = t[FUSED]
    return {
        "suite": "rerouting", "payload_bytes": case.payload,
        "empty_blocks": int((counts == 0).sum()), "empty_experts": int((counts.sum(0) == 0).sum()),
        "time_s": {n: v.median for n, v in t.items()},
        "spread": {n: round(v.spread, 4) for n, v in t.items()},
        "samples_s": {n: v.samples for n, v in t.items()},
        "calls_per_sample": {n: v.calls_per_sample for n, v in t.items()},
        "gb_per_s": {n: case.payload / v.median / 1e9 for n, v in t.items()},
        "copy_limit": copy,
        "fraction_of_copy": t[copy].median / fused.median,
        # against the node's own copy of one block: the same ORT call path, so ORT's per-call cost
        # (a few microseconds, ~10% at 1024 x 2048) is in both; what the permutation costs
        "fraction_of_node_copy": t["copy-kernel"].median / fused.median,
        "speedup": {n: timing.ratio(t[n], fused) for n in BASELINES},
    }


def _describe(row: dict) -> str:
    ratios = " ".join(f"{n}={r:.2f}x" for n, r in row["speedup"].items())
    load = row["other_load_cores"]
    return (f"rerouting {row['dtype']:8s} N={row['ranks']:<2d} E={row['experts']:<2d} "
            f"A={row['tokens']:<5d} H={row['hidden']:<4d} {row['counts']:7s} t={row['threads']} "
            f"{row['gb_per_s'][FUSED]:6.2f} GB/s = {row['fraction_of_copy'] * 100:5.1f}% of copy "
            f"({row['fraction_of_node_copy'] * 100:5.1f}% of the node's copy)  {ratios}"
            f"  (other processes {'?' if load is None else f'{load:.2f} cores'})")
