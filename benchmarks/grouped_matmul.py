"""GroupedMatmul at decode sizes, one thread: the library's CPU kernel (ONNX Runtime) and a torch
baseline (torch.matmul per group over its rows), against the machine's read bound measured in the
same process.

At decode a call multiplies a few rows per expert by each selected expert's weight matrix, so it
is bound by reading those matrices: the read bound is the weight bytes a call must read (the
groups with rows, once each) at the read rate of ``model.read_rate`` (the best of torch's and the
native probe's streaming sums, ``read_probe``). With more rows per expert the products take
longer than the reads on one core (16 rows of bfloat16 weights: 16 FLOP per byte read), so the
bound is the larger of the read time and the FLOPs at the machine's float32 matmul rate
(``model.machine_rates``: torch.mm, best of 20); both probed after every case, the best kept.
``share`` = bound / candidate time (medians of interleaved samples). On a shared machine a
process waits for a core a good part of its wall time; ``cpu share`` leaves that wait out: the
same bound from probes timed in thread CPU time (``cpu_rates``), over the candidate's fastest call
in thread CPU time (one thread: ORT and torch run on the calling thread). Calls rotate through
inputs routed to disjoint expert subsets, each call's weights larger than the last-level cache,
so every call reads its weights from DRAM.

Sizes: the expert matmuls of DeepSeek-V3 (hidden 7168, expert width 2048: gate/up [7168 -> 4096],
down [2048 -> 7168]) and Qwen3-30B-A3B (hidden 2048, width 768: [2048 -> 1536], [768 -> 2048]),
top-8 routing, 1 / 4 / 16 rows per selected expert (1 / 4 / 16 decode tokens when every token's 8
experts are the same 8; real batches spread rows over more experts, which reads more weights at
fewer rows each). Fewer experts are allocated than the models have (the weights must fit the
machine), enough that each call's are read from DRAM.

    python -m ascend_moe_onnx.benchmarks.grouped_matmul [--quick | --smoke] [--rows 4,16] [--repeats N]
"""

from __future__ import annotations

import argparse
import ctypes
import sys
import time
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import torch
from onnx import TensorProto, helper

from . import common, read_probe, timing
from .model import last_level_cache_bytes, machine_rates, read_rate

ONNX_TYPES = {"float32": TensorProto.FLOAT, "bfloat16": TensorProto.BFLOAT16, "float16": TensorProto.FLOAT16}
NP_TYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16, "float16": np.float16}
TOP_K = 8


@dataclass(frozen=True)
class Case:
    """One matmul shape: name, K (in), N (out), experts allocated, rows per selected expert, dtype,
    transpose_weight."""

    name: str
    K: int
    N: int
    experts: int
    rows: int
    dtype: str = "bfloat16"
    transpose: int = 0


def cases(quick: bool, smoke: bool = False) -> list[Case]:
    """The benchmark's cases (``quick``: one size per model, one row count; ``smoke``: tiny)."""
    if smoke:
        return [Case("tiny", 64, 48, 16, 2), Case("tiny", 40, 24, 16, 1, "float32", 1)]
    shapes = [("DeepSeek-V3 gate/up", 7168, 4096, 8), ("DeepSeek-V3 down", 2048, 7168, 8),
              ("Qwen3-30B-A3B gate/up", 2048, 1536, 32), ("Qwen3-30B-A3B down", 768, 2048, 32)]
    if quick:
        return [Case("DeepSeek-V3 gate/up", 7168, 4096, 8, 1), Case("Qwen3-30B-A3B gate/up", 2048, 1536, 32, 1),
                Case("Qwen3-30B-A3B gate/up", 2048, 1536, 32, 1, "float32")]
    out = [Case(n, k, m, e, rows) for n, k, m, e in shapes for rows in (1, 4, 16)]
    out += [Case(n, k, m, e, 1, "float32") for n, k, m, e in shapes[::2]]
    out += [Case(n, k, m, e, 1, "bfloat16", 1) for n, k, m, e in shapes[::2]]
    return out


def _model(case: Case) -> bytes:
    t = ONNX_TYPES[case.dtype]
    w_dims: list[str | int] = ["E", case.N, case.K] if case.transpose else ["E", case.K, case.N]
    node = helper.make_node("GroupedMatmul", ["x", "weight", "group_list"], ["y"], domain="ascend.moe",
                            group_list_type=1, transpose_weight=case.transpose)
    graph = helper.make_graph([node], "gmm", [helper.make_tensor_value_info("x", t, ["M", case.K]),
                                              helper.make_tensor_value_info("weight", t, w_dims),
                                              helper.make_tensor_value_info("group_list", TensorProto.INT64, ["E"])],
                              [helper.make_tensor_value_info("y", t, ["M", case.N])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)],
                              ir_version=10)
    return model.SerializeToString()


def _inputs(case: Case, rng) -> tuple[np.ndarray, list[tuple[np.ndarray, np.ndarray]]]:
    """The weights and, per rotation step, (x, counts): TOP_K experts of a disjoint subset each."""
    shape = (case.experts, case.N, case.K) if case.transpose else (case.experts, case.K, case.N)
    w = (rng.standard_normal(shape, dtype=np.float32) / np.sqrt(case.K)).astype(NP_TYPES[case.dtype])
    steps = []
    for s in range(max(1, case.experts // TOP_K)):
        counts = np.zeros(case.experts, np.int64)
        counts[s * TOP_K:(s + 1) * TOP_K] = case.rows
        x = rng.standard_normal((int(counts.sum()), case.K), dtype=np.float32).astype(NP_TYPES[case.dtype])
        steps.append((x, counts))
    return w, steps


def _rotating(fns):
    state = {"i": 0}

    def call():
        fns[state["i"] % len(fns)]()
        state["i"] += 1

    return call


def _torch_candidate(case: Case, w: np.ndarray, steps):
    """torch.matmul per group over its rows (the plain way to write the op), one thread."""
    wt = common.to_torch(w)
    if case.transpose:
        wt = wt.transpose(1, 2)  # a view, as the Ascend call sites hold their weights
    calls = []
    for x, counts in steps:
        xt, ends = common.to_torch(x), np.cumsum(counts)

        def call(xt=xt, counts=counts, ends=ends):
            y = torch.empty(xt.shape[0], case.N, dtype=xt.dtype)
            for e in np.flatnonzero(counts):
                start = ends[e] - counts[e]
                torch.matmul(xt[start:ends[e]], wt[e], out=y[start:ends[e]])
            return y

        calls.append(call)
    return _rotating(calls)


def cpu_rates(nbytes: int, calls: int = 10) -> tuple[float, float]:
    """(read B/s, float32 matmul FLOP/s) of one thread, timed in thread CPU time, best of ``calls``:
    the native probe's sums (``read_probe``, each stream count) over ``nbytes``, and torch.mm
    (512x1024 @ 1024x1024). Read rate 0 where the native probe is absent."""
    read = 0.0
    lib = read_probe._library()
    if lib is not None:
        buf = np.ones(max(nbytes // 4, read_probe.BLOCK_FLOATS), np.float32)
        block = read_probe.BLOCK_FLOATS
        sink = ctypes.c_float(0)
        for streams in read_probe.STREAMS:
            fn = getattr(lib, f"ascend_moe_read_seconds_{streams}")
            read_bytes = buf.size // block * (block // streams // 64 * 64) * streams * 4
            for _ in range(calls):
                t0 = time.thread_time()
                fn(buf.ctypes.data, buf.size, block, 1, ctypes.byref(sink))
                read = max(read, read_bytes / max(time.thread_time() - t0, 1e-9))
    with common.torch_threads(1):
        a, b = torch.randn(512, 1024), torch.randn(1024, 1024)
        best = min(_cpu_best(lambda: torch.mm(a, b), 2 * calls), float("inf"))
    return read, 2 * 512 * 1024 * 1024 / best


def _cpu_best(fn, calls: int) -> float:
    """The fastest of ``calls`` calls in thread CPU time (seconds)."""
    import time

    best = float("inf")
    for _ in range(calls):
        t0 = time.thread_time()
        fn()
        best = min(best, time.thread_time() - t0)
    return best


def run_case(case: Case, repeats: int, min_sample_s: float, probe_bytes: int, best_rate: list,
             best_cpu: list) -> dict:
    """Time both candidates on one case; returns the result row. ``best_rate`` ([read B/s, matmul
    FLOP/s], wall time) and ``best_cpu`` (the same in thread CPU time) keep the best probes so far."""
    rng = np.random.default_rng(0)
    w, steps = _inputs(case, rng)
    sess = common.session(_model(case), threads=1, library=True)
    kernel = _rotating([common.bound_runner(sess, {"x": x, "weight": w, "group_list": c}) for x, c in steps])
    with common.torch_threads(1):
        candidates = {"kernel": kernel, "torch": _torch_candidate(case, w, steps)}
        timings = timing.measure(candidates, repeats=repeats, min_sample_s=min_sample_s)
        cpu = {n: _cpu_best(fn, 2 * len(steps)) for n, fn in candidates.items()}
        best_rate[:] = [max(best_rate[0], read_rate(probe_bytes, 1)),
                        max(best_rate[1], machine_rates(1)["matmul_flops"])]
        best_cpu[:] = [max(a, b) for a, b in zip(best_cpu, cpu_rates(probe_bytes, 3))]
    read = TOP_K * case.K * case.N * np.dtype(NP_TYPES[case.dtype]).itemsize
    return {"case": case, "read_bytes": read, "flops": 2 * TOP_K * case.rows * case.K * case.N,
            **{f"{n}_s": t.median for n, t in timings.items()},
            **{f"{n}_cpu_s": t for n, t in cpu.items()},
            **{f"{n}_spread": t.spread for n, t in timings.items()}}


def bound_seconds(row: dict, read_rate_bps: float, flops: float) -> tuple[float, str]:
    """The case's bound and what binds it: its weight reads at the read rate, or its products at
    the matmul rate, whichever takes longer."""
    read_s, compute_s = row["read_bytes"] / read_rate_bps, row["flops"] / flops
    return (read_s, "read") if read_s >= compute_s else (compute_s, "FLOPs")


def report(rows: list[dict], best_rate: float, flops: float, best_cpu: list) -> str:
    """The Markdown table of the results (shares against the final, best rates)."""
    lines = [f"One thread, best probes: read {best_rate / 1e9:.1f} GB/s, float32 matmul {flops / 1e9:.0f} GFLOP/s "
             f"(wall time); read {best_cpu[0] / 1e9:.1f} GB/s, matmul {best_cpu[1] / 1e9:.0f} GFLOP/s "
             "(thread CPU time).", "",
             "| matmul | dtype | rows/expert | MiB read | bound ms | kernel ms | share | cpu share | torch ms | share "
             "| cpu share | kernel vs torch |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        c = r["case"]
        bound, what = bound_seconds(r, best_rate, flops)
        cpu_bound, _ = bound_seconds(r, best_cpu[0], best_cpu[1])
        lines.append(f"| {c.name}{' (weight [E, N, K])' if c.transpose else ''} | {c.dtype} | {c.rows} | "
                     f"{r['read_bytes'] / 2**20:.0f} | {bound * 1e3:.2f} ({what}) | {r['kernel_s'] * 1e3:.2f} | "
                     f"{bound / r['kernel_s']:.0%} | {cpu_bound / r['kernel_cpu_s']:.0%} | {r['torch_s'] * 1e3:.2f} | "
                     f"{bound / r['torch_s']:.0%} | {cpu_bound / r['torch_cpu_s']:.0%} | "
                     f"{r['torch_s'] / r['kernel_s']:.2f}x |")
    return "\n".join(lines)


def main(argv=None) -> int:
    """Run the cases and print the table."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="one size per model")
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness, the numbers mean nothing")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--min-sample-s", type=float, default=0.05)
    p.add_argument("--rows", metavar="N,N", help="only the cases of these rows per expert (e.g. 4,16)")
    args = p.parse_args(argv)
    wanted = None if args.rows is None else {int(r) for r in args.rows.split(",")}
    llc = last_level_cache_bytes() or 32 * 2**20
    probe_bytes = 2**22 if args.smoke else max(256 * 2**20, 4 * llc)
    best_rate = [read_rate(probe_bytes, 1), machine_rates(1)["matmul_flops"]]
    best_cpu = list(cpu_rates(probe_bytes))
    rows = []
    for case in cases(args.quick, args.smoke):
        if wanted is not None and case.rows not in wanted:
            continue
        r = run_case(case, args.repeats, args.min_sample_s, probe_bytes, best_rate, best_cpu)
        rows.append(r)
        print(f"{case}: kernel {r['kernel_s'] * 1e3:.2f} ms (spread {r['kernel_spread']:.0%}), "
              f"torch {r['torch_s'] * 1e3:.2f} ms, bound {bound_seconds(r, *best_rate)[0] * 1e3:.2f} ms",
              flush=True)
    print(report(rows, best_rate[0], best_rate[1], best_cpu))
    return 0


if __name__ == "__main__":
    sys.exit(main())
