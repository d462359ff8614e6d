"""Command line of the benchmarks: ``python -m ascend_moe_onnx.benchmarks`` and ``moe-onnx bench``.

Modes: the full sweep (default, ~15 min on 2 cores), ``--quick`` (a representative subset, a
few minutes) and ``--smoke`` (tiny sizes, seconds: checks the harness and its outputs; the
numbers mean nothing). Results go to ``./benchmark-results/<mode>.{md,json}`` (or ``--out DIR``) and
``<mode>_gating.png``.
"""

from __future__ import annotations

import argparse
import os
import shlex
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

# torch_npu, if installed, breaks `import torch` without CANN
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

RESULTS_DIR = Path("benchmark-results")  # relative to the current directory, never inside the package
SUITES = ("gating", "rerouting", "model", "ascend_layer")


def plans(mode: str) -> dict:
    """The plan of every suite for a mode (full, quick, smoke) and the timing settings."""
    from .ascend_layer import LayerPlan
    from .gating import GatingPlan
    from .model import ModelPlan
    from .rerouting import ReRoutingPlan

    if mode == "full":
        return {"gating": GatingPlan(), "rerouting": ReRoutingPlan(), "model": ModelPlan(),
                "ascend_layer": LayerPlan(), "repeats": 7, "min_sample_s": 0.005}
    if mode == "quick":
        return {"gating": GatingPlan(tokens=(1, 16, 4096), dtypes=("float32",)),
                "rerouting": ReRoutingPlan(shapes=((16, 16, 16384, 7168), (4, 8, 1024, 2048))),
                "model": ModelPlan(tokens=(16,), threads=(1,)),
                "ascend_layer": LayerPlan(tokens=(16,), threads=(1,)),
                "repeats": 5, "min_sample_s": 0.004}
    if mode == "smoke":
        # One dtype: every gating case exports its reference router, and exports dominate the run.
        return {"gating": GatingPlan(presets=("DeepSeek-V3", "DeepSeek-V4-hash"), tokens=(1, 8, 300),
                                     dtypes=("float32",), threads=(1, 2), size="tiny",
                                     scaling_min_tokens=300, isa_tokens=300, isa_calls=2, isa_rounds=1),
                "rerouting": ReRoutingPlan(shapes=((2, 3, 40, 24),), threads=(1,)),
                "model": ModelPlan(size="tiny", intermediate=None, tokens=(1, 8), threads=(1,)),
                "ascend_layer": LayerPlan(size="tiny", tokens=(1, 8), threads=(1,), min_repeats=2),
                "repeats": 2, "min_sample_s": 0.0002}
    raise ValueError(f"unknown mode '{mode}' (full, quick, smoke)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark options (shared by ``python -m ascend_moe_onnx.benchmarks`` and ``moe-onnx bench``)."""
    mode = p.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true", help="a representative subset (a few minutes)")
    mode.add_argument("--smoke", action="store_true", help="tiny sizes (seconds): checks the harness only")
    p.add_argument("--suites", default=",".join(SUITES), metavar="S,S",
                   help=f"which suites to run (default: {','.join(SUITES)})")
    p.add_argument("--threads", metavar="N,N", help="intra-op thread counts (default: 1,2)")
    p.add_argument("--repeats", type=int, metavar="N", help="interleaved repetitions per case")
    p.add_argument("--out", metavar="DIR", default=str(RESULTS_DIR), help="output directory")
    p.add_argument("--no-plot", action="store_true", help="skip the PNG plot")


def _load() -> list | None:
    try:
        return [round(v, 2) for v in os.getloadavg()]
    except OSError:
        return None


def _command_line(args) -> str:
    if hasattr(args, "argv"):  # python -m ascend_moe_onnx.benchmarks
        return " ".join(["python -m ascend_moe_onnx.benchmarks", *map(shlex.quote, args.argv)])
    return " ".join(["moe-onnx", *map(shlex.quote, sys.argv[1:])])


def run(args) -> int:
    """Run the selected suites, write the reports; returns the exit code (0, or 2 on bad options)."""
    import dataclasses

    from . import ascend_layer, gating, machine, model, report, rerouting

    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    cfg = plans(mode)
    suites = [s.strip() for s in args.suites.split(",") if s.strip()]
    unknown = set(suites) - set(SUITES)
    if unknown or not suites:
        print(f"benchmarks: unknown suite(s) {sorted(unknown)} (known: {', '.join(SUITES)})", file=sys.stderr)
        return 2
    if args.threads:
        try:
            threads = tuple(int(t) for t in args.threads.split(","))
        except ValueError:
            print(f"benchmarks: --threads must be comma-separated integers, got '{args.threads}'", file=sys.stderr)
            return 2
        for s in SUITES:
            cfg[s] = dataclasses.replace(cfg[s], threads=threads)
    repeats = args.repeats or cfg["repeats"]
    started, load_start = time.time(), _load()
    results: dict[str, Any] = {"machine": machine.machine_info(), "targets": []}
    runners: dict[str, Callable[..., list[dict]]] = {
        "gating": gating.run, "rerouting": rerouting.run, "model": model.run, "ascend_layer": ascend_layer.run}
    for suite in suites:
        print(f"== {suite} ({mode})", flush=True)
        for row in runners[suite](cfg[suite], repeats, cfg["min_sample_s"], log=lambda s: print(s, flush=True)):
            results.setdefault(row["suite"], []).append(row)
    results["run"] = {
        "mode": mode, "command": _command_line(args),
        "suites": suites, "repeats": repeats, "min_sample_s": cfg["min_sample_s"],
        "seconds": time.time() - started, "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(started)),
        "load_start": load_start, "load_end": _load(),
    }
    results["targets"] = report.targets(results)
    paths = report.write(results, Path(args.out), mode, with_plot=not args.no_plot)
    print()
    if results["targets"]:
        for t in results["targets"]:
            print(f"{'met   ' if t['met'] else 'MISSED'} {t['target']}: {t['measured']}")
    print(f"\nwrote {', '.join(str(p) for p in paths.values())} in {results['run']['seconds']:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``python -m ascend_moe_onnx.benchmarks``; returns the exit code."""
    parser = argparse.ArgumentParser(prog="python -m ascend_moe_onnx.benchmarks", description=__doc__.split("\n")[0])
    add_arguments(parser)
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    args.argv = argv
    return run(args)
