"""Quantized GroupedMatmul at decode sizes, one thread, same process: the library's kernel on
float32 weights against the same matmul with int8 weights (W8A16: float32 x, per-channel
antiquant scale and offset), int4 weights (W4A16: int32 words, per-group scales of 128 rows) and
W8A8 (int8 x and weights, per-token and per-channel scales, bfloat16 y).

Each candidate's bound is the weight bytes it must read (the groups with rows, once each, at its
own width: 4, 1 or 1/2 byte per weight) at the read rate ``model.read_rate`` measures in the same
process (the best of torch's and the native probe's streaming sums, ``read_probe``); ``share`` =
bound / median time. ``vs float32`` = the float32 kernel's median time over the candidate's.
Calls rotate through inputs routed to disjoint expert subsets, so every call reads its weights
from DRAM (each subset's weights are larger than the last-level cache where the sizes allow).

Sizes: DeepSeek-V3's expert down projection's transpose (K 7168 -> N 2048, the layout its
gate/up weights have per half) and Qwen3-30B-A3B's gate/up (K 2048 -> N 1536), top-8 routing,
1 / 4 / 16 rows per selected expert (``--rows``). ``--transpose``: the weights stored [E, N, K]
(``transpose_weight`` 1, the layout the exported expert blocks use).

    python -m ascend_moe_onnx.benchmarks.grouped_matmul_quant [--smoke] [--repeats N] [--rows 1,4,16]
        [--transpose]
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np
from onnx import TensorProto, helper

from ascend_moe_onnx.onnx_schemas.grouped_matmul import pack_int4

from . import common, timing
from .model import last_level_cache_bytes, read_rate

TOP_K = 8
GROUP_ROWS = 128  # W4A16 scale groups along K
SCHEMES = ("float32", "w8a16", "w4a16", "w8a8")
BYTES_PER_WEIGHT = {"float32": 4.0, "w8a16": 1.0, "w4a16": 0.5, "w8a8": 1.0}


@dataclass(frozen=True)
class Case:
    """One matmul shape: name, K (in), N (out), experts allocated, rows per selected expert, and
    whether the weights are stored [E, N, K]."""

    name: str
    K: int
    N: int
    experts: int
    rows: int
    transpose: bool = False


def cases(smoke: bool, rows: tuple[int, ...], transpose: bool = False) -> list[Case]:
    """The benchmark's cases (``smoke``: tiny)."""
    if smoke:
        return [Case("tiny", 256, 64, 16, 1, transpose)]
    shapes = [("DeepSeek-V3 7168->2048", 7168, 2048, 16), ("Qwen3-30B-A3B gate/up", 2048, 1536, 32)]
    return [Case(n, k, m, e, r, transpose) for n, k, m, e in shapes for r in rows]


def _model(case: Case, scheme: str) -> bytes:
    """A one-node model: weights and scales as graph inputs (fed once, reused)."""
    T = TensorProto
    x_type = T.INT8 if scheme == "w8a8" else T.FLOAT
    inputs: list[tuple[str, int, list[str | int]]] = [("x", x_type, ["M", case.K])]
    w = {"float32": T.FLOAT, "w8a16": T.INT8, "w4a16": T.INT32, "w8a8": T.INT8}[scheme]
    packed = 8 if scheme == "w4a16" else 1  # int4: 8 per int32 word along the last axis
    dims: list[str | int] = ["E", case.N, case.K // packed] if case.transpose else ["E", case.K, case.N // packed]
    inputs += [("weight", w, dims), ("group_list", T.INT64, ["E"])]
    names = ["x", "weight", "group_list"]
    attrs: dict[str, Any] = {"group_list_type": 1, "transpose_weight": int(case.transpose)}
    if scheme in ("w8a16", "w4a16"):
        names += ["", "", "", "antiquant_scale", "antiquant_offset"]
        g: list[str | int] = ["E", "N"] if scheme == "w8a16" else ["E", case.K // GROUP_ROWS, case.N]
        inputs += [("antiquant_scale", T.FLOAT, g), ("antiquant_offset", T.FLOAT, g)]
    if scheme == "w8a8":
        names += ["", "scale", "", "", "", "per_token_scale"]
        inputs += [("scale", T.FLOAT, ["E", case.N]), ("per_token_scale", T.FLOAT, ["M"])]
        attrs["output_dtype"] = T.BFLOAT16
    y_type = T.BFLOAT16 if scheme == "w8a8" else T.FLOAT
    node = helper.make_node("GroupedMatmul", names, ["y"], domain="ascend.moe", **attrs)
    graph = helper.make_graph([node], "gmm", [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs],
                              [helper.make_tensor_value_info("y", y_type, ["M", case.N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)],
                              ir_version=10)
    return model.SerializeToString()


def _weights(case: Case, scheme: str, rng) -> dict:
    E, K, N = case.experts, case.K, case.N
    wshape = (E, N, K) if case.transpose else (E, K, N)
    if scheme == "float32":
        return {"weight": rng.standard_normal(wshape, dtype=np.float32) / float(np.sqrt(K))}
    if scheme == "w8a8":
        return {"weight": rng.integers(-128, 128, wshape, dtype=np.int8),
                "scale": np.full((E, N), 1e-3, np.float32)}
    shape: tuple[int, ...]
    if scheme == "w8a16":
        shape, w = (E, N), rng.integers(-128, 128, wshape, dtype=np.int8)
    else:
        shape, w = (E, K // GROUP_ROWS, N), pack_int4(rng.integers(-8, 8, wshape, dtype=np.int8))
    return {"weight": w, "antiquant_scale": np.full(shape, 1e-2, np.float32),
            "antiquant_offset": np.full(shape, 0.5, np.float32)}


def _candidate(case: Case, scheme: str, rng):
    """A call rotating through disjoint expert subsets."""
    sess = common.session(_model(case, scheme), threads=1, library=True)
    fixed = _weights(case, scheme, rng)
    calls = []
    for s in range(max(1, case.experts // TOP_K)):
        counts = np.zeros(case.experts, np.int64)
        counts[s * TOP_K:(s + 1) * TOP_K] = case.rows
        M = int(counts.sum())
        feeds = dict(fixed, group_list=counts)
        if scheme == "w8a8":
            feeds.update(x=rng.integers(-128, 128, (M, case.K), dtype=np.int8),
                         per_token_scale=np.full(M, 1e-2, np.float32))
        else:
            feeds["x"] = rng.standard_normal((M, case.K), dtype=np.float32)
        calls.append(common.bound_runner(sess, feeds))
    state = {"i": 0}

    def call():
        calls[state["i"] % len(calls)]()
        state["i"] += 1

    return call


def run_case(case: Case, repeats: int, min_sample_s: float, probe_bytes: int, best_rate: list) -> dict:
    """Time the four schemes on one case (interleaved samples); ``best_rate`` keeps the best read rate."""
    rng = np.random.default_rng(0)
    candidates = {s: _candidate(case, s, rng) for s in SCHEMES}
    with common.torch_threads(1):
        timings = timing.measure(candidates, repeats=repeats, min_sample_s=min_sample_s)
        best_rate[0] = max(best_rate[0], read_rate(probe_bytes, 1))
    return {"case": case, **{s: t.median for s, t in timings.items()}}


def report(rows: list[dict], rate: float) -> str:
    """The Markdown table (shares against the best read rate of the run)."""
    lines = [f"One thread, best read probe {rate / 1e9:.1f} GB/s. Each cell: ms, share of its own read bound, "
             "speed-up over float32.", "",
             "| matmul | rows/expert | " + " | ".join(SCHEMES) + " |", "|---|---|" + "---|" * len(SCHEMES)]
    for r in rows:
        c = r["case"]
        cells = []
        for s in SCHEMES:
            bound = TOP_K * c.K * c.N * BYTES_PER_WEIGHT[s] / rate
            cells.append(f"{r[s] * 1e3:.2f} ({bound / r[s]:.0%}, {r['float32'] / r[s]:.2f}x)")
        name = c.name + (" [E, N, K]" if c.transpose else "")
        lines.append(f"| {name} | {c.rows} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run the cases and print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness, the numbers mean nothing")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-sample-s", type=float, default=0.05)
    p.add_argument("--rows", default="1,4,16", help="rows per selected expert, comma-separated")
    p.add_argument("--transpose", action="store_true", help="weights stored [E, N, K] (transpose_weight 1)")
    args = p.parse_args(argv)
    llc = last_level_cache_bytes() or 32 * 2**20
    probe_bytes = 2**22 if args.smoke else max(256 * 2**20, 4 * llc)
    best_rate = [read_rate(probe_bytes, 1)]
    rows = []
    for case in cases(args.smoke, tuple(int(r) for r in args.rows.split(",")), args.transpose):
        r = run_case(case, args.repeats, args.min_sample_s, probe_bytes, best_rate)
        rows.append(r)
        print(f"{case}: " + ", ".join(f"{s} {r[s] * 1e3:.2f} ms" for s in SCHEMES), flush=True)
    print(report(rows, best_rate[0]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
