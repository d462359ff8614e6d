"""Benchmark of the expert-parallel layer: ``python -m ascend_moe_onnx.ep.bench``.

For each rank count N (default 1, 2, 4) it exports the layer once, starts N local gloo ranks of
the launcher with ``--bench ITERS`` and collects rank 0's line: tokens/s of the N-rank layer (all
ranks' tokens per wall-clock second, slowest rank) against the single-process exported layer run
by rank 0 in the same process on the same total token count with every core, and the bytes each
all-to-all moves per call (all rows, rows to other ranks, ideal = one row per (token, remote
rank)). Writes ``benchmark-results/ep.{md,json}`` (``--out DIR``). docs/expert-parallel.md
explains the figures.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

RESULTS_DIR = Path("benchmark-results")


def measure(preset: str, ranks: int, tokens: int, iters: int, size: str = "tiny", quant: str = "",
            seed: int = 0, workdir=None) -> dict:
    """One N-rank measurement (rank 0's ``ep-bench`` record)."""
    from ascend_moe_onnx.models import presets

    from . import artefacts
    from .spawn import run_ranks

    block = presets.build(preset, size, "float32", seed=seed)
    with tempfile.TemporaryDirectory(dir=workdir) as d:
        artefacts.export_layer(block, ranks, d, quant, cache_key=(preset, size, seed))
        threads = max(1, (os.cpu_count() or 1) // ranks)
        args = [preset, "--size", size, "--onnx", d, "--tokens", str(tokens), "--bench", str(iters),
                "--seed", str(seed)] + (["--quant", quant] if quant else [])
        runs = run_ranks(ranks, args, deadline_s=600, threads=threads)
    if any(r.returncode != 0 for r in runs):
        raise RuntimeError("ranks failed: " + " | ".join(r.stderr.strip()[-500:] for r in runs if r.returncode))
    line = next(ln for ln in runs[0].stdout.splitlines() if ln.startswith("ep-bench: "))
    record = json.loads(line[len("ep-bench: "):])
    record["check"] = next(ln for ln in runs[0].stdout.splitlines() if ln.startswith("ep: "))
    return record


def _kib(n: int) -> str:
    return f"{n / 1024:.1f}"


def table(records: list[dict]) -> str:
    """Markdown table of the measurements."""
    head = ("ranks", "threads/rank", "tokens (total)", "EP tok/s", "1-process tok/s (all cores)", "ratio",
            "1-process tok/s (1 thread)", "dispatch KiB (remote / ideal)", "combine KiB (remote / ideal)",
            "load avg")
    rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in records:
        rows.append("| " + " | ".join([
            str(r["ranks"]), str(r["threads_per_rank"]), str(r["tokens"]),
            f"{r['ep_tokens_per_s']:.0f}", f"{r['single_tokens_per_s']:.0f}", f"{r['ratio']:.2f}",
            f"{r['single_1thread_tokens_per_s']:.0f}",
            f"{_kib(r['dispatch_bytes'])} ({_kib(r['dispatch_remote_bytes'])} / {_kib(r['dispatch_ideal_bytes'])})",
            f"{_kib(r['combine_bytes'])} ({_kib(r['combine_remote_bytes'])} / {_kib(r['combine_ideal_bytes'])})",
            f"{r['load_avg']:.1f}",
        ]) + " |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its report; returns the exit status."""
    p = argparse.ArgumentParser(prog="python -m ascend_moe_onnx.ep.bench", description=__doc__.split("\n")[0])
    p.add_argument("--preset", default="qwen3-moe")
    p.add_argument("--size", default="tiny", choices=("tiny", "full"))
    p.add_argument("--tokens", type=int, default=256, help="tokens per rank (default 256)")
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--ranks", default="1,2,4", help="rank counts (default 1,2,4)")
    p.add_argument("--quant", choices=("int8",))
    p.add_argument("--smoke", action="store_true", help="8 tokens, 1 iteration, ranks 1,2 (a check, not a measurement)")
    p.add_argument("--out", default=str(RESULTS_DIR), help="directory of ep.md / ep.json")
    args = p.parse_args(argv)
    if args.smoke:
        args.tokens, args.iters, args.ranks = 8, 1, "1,2"
    records = []
    for n in [int(v) for v in args.ranks.split(",")]:
        rec = measure(args.preset, n, args.tokens, args.iters, args.size, args.quant or "")
        records.append(rec)
        print(f"ranks={n}: {rec['ep_tokens_per_s']:.0f} tok/s vs {rec['single_tokens_per_s']:.0f} "
              f"single-process (ratio {rec['ratio']:.2f})", file=sys.stderr, flush=True)
    text = (f"# Expert-parallel layer: {args.preset} {args.size}, {args.tokens} tokens/rank, "
            f"quant {args.quant or 'none'}, {os.cpu_count()} cores\n\n" + table(records) + "\n")
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "ep-smoke" if args.smoke else "ep"
    (out / f"{name}.md").write_text(text)
    (out / f"{name}.json").write_text(json.dumps(records, indent=1) + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
