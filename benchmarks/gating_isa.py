"""MoeGatingTopKHash per instruction-set path of the CPU kernel: ns per row of the fused node in
ONNX Runtime (one thread), each path forced in a child process of its own (the library reads
ASCEND_MOE_CPU_ISA / ASCEND_MOE_CPU_SELECT once per process), beside the kernel's estimated
floor where there is one (docs/kernel.md). float32 inputs only (the children bind NumPy arrays directly).

Paths (those the CPU runs): ``baseline`` (SSE2), ``avx2`` (AVX2 + FMA), ``avx512`` (AVX-512, the
selection in the AVX2 build's 256-bit code: the default on AMD CPUs) and ``avx512-wide`` (AVX-512
with its own 512-bit selection: the default elsewhere). The children run one after the other,
in rounds that alternate their order; each path keeps its fastest call (the machine is shared).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

from . import machine

# Estimated floor, ns/row, one thread, float32, 4096 rows (docs/kernel.md's analysis of DeepSeek-V3:
# the sigmoid pass at full vector throughput plus the selection's minimal instruction count).
FLOOR_NS = {"DeepSeek-V3": {"avx2": (150, 160), "avx512": (110, 130), "avx512-wide": (110, 130)}}

_ENV = {
    "baseline": {"ASCEND_MOE_CPU_ISA": "baseline"},
    "avx2": {"ASCEND_MOE_CPU_ISA": "avx2"},
    "avx512": {"ASCEND_MOE_CPU_ISA": "avx512", "ASCEND_MOE_CPU_SELECT": "narrow"},
    "avx512-wide": {"ASCEND_MOE_CPU_ISA": "avx512", "ASCEND_MOE_CPU_SELECT": "wide"},
}

# The child: one session of the fused model on one thread (as common.session, without importing
# torch: a child per path and round), inputs bound once, the fastest of `calls` calls.
_CHILD = """
import json, sys, time
import numpy as np
import onnxruntime as ort
from ascend_moe_onnx import ort_custom_ops
model_path, inputs_path, calls = sys.argv[1], sys.argv[2], int(sys.argv[3])
so = ort.SessionOptions()
so.intra_op_num_threads = 1
so.inter_op_num_threads = 1
so.log_severity_level = 3
ort_custom_ops.register(so)
sess = ort.InferenceSession(model_path, so, providers=["CPUExecutionProvider"])
binding = sess.io_binding()
with np.load(inputs_path) as f:
    values = [ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(f[k])) for k in f.files]
    for k, v in zip(f.files, values):
        binding.bind_ortvalue_input(k, v)
for o in sess.get_outputs():
    binding.bind_output(o.name)
sess.run_with_iobinding(binding)
best = float("inf")
for _ in range(calls):
    t0 = time.perf_counter()
    sess.run_with_iobinding(binding)
    best = min(best, time.perf_counter() - t0)
print(json.dumps({"best_s": best}))
"""


def paths() -> list[str]:
    """The paths of this CPU: machine.isa_paths(), and AVX-512 with both selection widths."""
    available = machine.isa_paths()
    return available + (["avx512-wide"] if "avx512" in available else [])


def measure(model: bytes, feeds: dict[str, np.ndarray], rows: int, calls: int = 20,
            rounds: int = 2) -> dict[str, float]:
    """ns per row of ``model`` on ``feeds`` for every path (the fastest call over all rounds)."""
    best: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as tmp:
        model_path, inputs_path = Path(tmp, "model.onnx"), Path(tmp, "inputs.npz")
        model_path.write_bytes(model)
        np.savez(inputs_path, allow_pickle=False, **feeds)
        for r in range(rounds):
            for path in (paths() if r % 2 == 0 else paths()[::-1]):
                env = {k: v for k, v in os.environ.items() if k not in ("ASCEND_MOE_CPU_ISA", "ASCEND_MOE_CPU_SELECT")}
                proc = subprocess.run([sys.executable, "-c", _CHILD, str(model_path), str(inputs_path), str(calls)],
                                      env={**env, **_ENV[path]}, capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    raise RuntimeError(f"gating path {path}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
                t = json.loads(proc.stdout.strip().splitlines()[-1])["best_s"]
                best[path] = min(best.get(path, float("inf")), t)
    return {p: t / rows * 1e9 for p, t in best.items()}


def row(preset: str, dtype: str, rows: int, ns: dict[str, float]) -> dict:
    """A result row of suite "gating_isa"."""
    floor = FLOOR_NS.get(preset, {}) if dtype == "float32" else {}
    return {"suite": "gating_isa", "preset": preset, "dtype": dtype, "tokens": rows, "threads": 1,
            "ns_per_row": ns, "floor_ns": {p: list(floor[p]) for p in ns if p in floor}}


def describe(r: dict) -> str:
    """One log line: ns/row per path, the floor estimate beside it."""
    parts = []
    for p, v in r["ns_per_row"].items():
        f = r["floor_ns"].get(p)
        parts.append(f"{p} {v:.0f}" + (f" (floor {f[0]}-{f[1]})" if f else ""))
    return f"gating {r['preset']:16s} {r['dtype']:8s} T={r['tokens']:<6d} ns/row, 1 thread: " + ", ".join(parts)


def table(rows: list[dict]) -> str:
    """Markdown: one line per preset, one column per path (floor estimates in parentheses)."""
    all_paths = [p for p in _ENV if any(p in r["ns_per_row"] for r in rows)]
    lines = ["| preset | dtype | tokens | " + " | ".join(f"{p} ns/row" for p in all_paths) + " |",
             "|" + "---|" * (3 + len(all_paths))]
    for r in rows:
        cells = []
        for p in all_paths:
            v, f = r["ns_per_row"].get(p), r["floor_ns"].get(p)
            cells.append("" if v is None else f"{v:.0f}" + (f" (floor {f[0]}–{f[1]})" if f else ""))
        lines.append(f"| {r['preset']} | {r['dtype']} | {r['tokens']} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
