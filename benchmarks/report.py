"""Reports: the targets of the performance issue, Markdown tables, JSON, and the throughput plot."""

from __future__ import annotations

import json
from pathlib import Path

from . import ascend_layer, gating, gating_isa, model, rerouting

# (name, check) pairs; a check takes the results dict and returns (measured text, met) or None
# when the run did not measure what it needs.
GATING_TARGET_PRESET, GATING_TARGET_TOKENS, GATING_SMALL_TOKENS = "DeepSeek-V3", 4096, 16
REROUTING_TARGET = dict(tokens=16384, hidden=7168)
REROUTING_IN_CACHE = dict(tokens=1024, hidden=2048)  # target: >= 90% of a plain copy


def _gating_rows(results: dict, **match) -> list[dict]:
    return [r for r in results.get("gating", []) if all(r[k] == v for k, v in match.items())]


def targets(results: dict) -> list[dict]:
    """Each speed target (docs/benchmarks.md) with what this run measured and whether it is met."""
    out = []

    def add(name, rows, measured, met):
        if rows:
            out.append({"target": name, "measured": measured, "met": bool(met)})

    for threads in sorted({r["threads"] for r in results.get("gating", [])}):
        big = _gating_rows(results, preset=GATING_TARGET_PRESET, dtype="float32",
                           tokens=GATING_TARGET_TOKENS, threads=threads)
        for r in big:
            onnx = min(r["speedup"]["ort-function"], r["speedup"]["ort-exported"])
            add(f"gating DeepSeek-V3 f32 {GATING_TARGET_TOKENS} tok, {threads} thr: >= 10x standard-ONNX graph in ORT",
                big, f"{onnx:.1f}x (function body {r['speedup']['ort-function']:.1f}x, "
                     f"exported reference {r['speedup']['ort-exported']:.1f}x)", onnx >= 10)
            add(f"gating DeepSeek-V3 f32 {GATING_TARGET_TOKENS} tok, {threads} thr: >= 15x torch eager",
                big, f"{r['speedup']['torch-eager']:.1f}x", r["speedup"]["torch-eager"] >= 15)
        small = _gating_rows(results, preset=GATING_TARGET_PRESET, dtype="float32",
                             tokens=GATING_SMALL_TOKENS, threads=threads)
        for r in small:
            worst = min(r["speedup"]["ort-function"], r["speedup"]["ort-exported"], r["speedup"]["torch-eager"])
            add(f"gating DeepSeek-V3 f32 {GATING_SMALL_TOKENS} tok, {threads} thr: "
                "ahead of standard ONNX and torch eager",
                small, f"slowest baseline {worst:.1f}x slower", worst > 1)
    for r in results.get("gating_scaling", []):
        if (r["preset"], r["dtype"], r["tokens"]) == (GATING_TARGET_PRESET, "float32", GATING_TARGET_TOKENS):
            add(f"gating DeepSeek-V3 f32 {GATING_TARGET_TOKENS} tok: 2 threads >= 1.6x 1 thread", [r],
                f"{r['speedup']:.2f}x (best samples {r.get('best_speedup', float('nan')):.2f}x; other processes "
                f"used {_load(r)} cores)", r["speedup"] >= 1.6)
    rr = [r for r in results.get("rerouting", [])
          if r["tokens"] == REROUTING_TARGET["tokens"] and r["hidden"] == REROUTING_TARGET["hidden"]]
    for dtype in sorted({r["dtype"] for r in rr}):
        for threads in sorted({r["threads"] for r in rr}):
            rows = [r for r in rr if r["dtype"] == dtype and r["threads"] == threads]
            if not rows:
                continue
            worst = min(rows, key=lambda r: r["fraction_of_copy"])
            frac = worst["fraction_of_copy"]
            add(f"re-routing {dtype} 16384x7168, {threads} thr: >= 70% of copy bandwidth (worst case)",
                rows, f"{frac * 100:.0f}% (best {max(r['fraction_of_copy'] for r in rows) * 100:.0f}%; other "
                      f"processes used {_load(worst)} cores in the worst case)", frac >= 0.7)
            sp = min(r["speedup"]["torch-index_select"] for r in rows)
            add(f"re-routing {dtype} 16384x7168, {threads} thr: faster than torch index_select (worst case)",
                rows, f"{sp:.2f}x", sp > 1)
    small = [r for r in results.get("rerouting", [])
             if r["tokens"] == REROUTING_IN_CACHE["tokens"] and r["hidden"] == REROUTING_IN_CACHE["hidden"]]
    for dtype in sorted({r["dtype"] for r in small}):
        for threads in sorted({r["threads"] for r in small}):
            rows = [r for r in small if r["dtype"] == dtype and r["threads"] == threads]
            if not rows:
                continue
            worst = min(rows, key=lambda r: r["fraction_of_copy"])
            node = min(r.get("fraction_of_node_copy", float("nan")) for r in rows)
            add(f"re-routing {dtype} 1024x2048 (in cache), {threads} thr: >= 90% of plain copy (worst case)",
                rows, f"{worst['fraction_of_copy'] * 100:.0f}% of the fastest copy; {node * 100:.0f}% of the node's "
                      f"own one-block copy (same call path: without ORT's per-call cost); other processes used "
                      f"{_load(worst)} cores", worst["fraction_of_copy"] >= 0.9)
    for name, measured, met in model.targets(results.get("model", [])) + \
            ascend_layer.targets(results.get("ascend_layer", [])):
        out.append({"target": name, "measured": measured, "met": bool(met)})
    return out


# ---- Markdown ----------------------------------------------------------------------------------

def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f}" if seconds < 0.01 else f"{seconds * 1e6:,.0f}"


def _load(row: dict) -> str:
    """Cores other processes kept busy during the case (see machine.OtherLoad)."""
    load = row.get("other_load_cores")
    return "?" if load is None else f"{load:.2f}"


def _table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def gating_table(rows: list[dict]) -> str:
    """Fused time and speed-up over each baseline, one line per case."""
    header = ["preset", "dtype", "thr", "tokens", "fused µs", "ORT floor µs"] + \
        [f"vs {n}" for n in gating.BASELINES] + ["agree", "other load"]
    body = []
    for r in rows:
        agree = min(r["agreement"].values()) if r.get("agreement") else 1.0
        floor = r["time_s"].get(gating.FLOOR)
        body.append([r["preset"], r["dtype"], str(r["threads"]), str(r["tokens"]), _us(r["time_s"][gating.FUSED]),
                     "" if floor is None else _us(floor)]
                    + [f"{r['speedup'][n]:.1f}x" for n in gating.BASELINES] + [f"{agree * 100:.0f}%", _load(r)])
    return _table(header, body)


def scaling_table(rows: list[dict]) -> str:
    """Fused node at 1 vs N threads (interleaved in one measurement)."""
    header = ["preset", "dtype", "tokens", "1 thr µs", "N thr µs", "N", "speed-up", "best samples", "other load"]
    body = [[r["preset"], r["dtype"], str(r["tokens"]), _us(r["time_s"]["1"]), _us(r["time_s"][str(r["threads"])]),
             str(r["threads"]), f"{r['speedup']:.2f}x", f"{r['best_speedup']:.2f}x", _load(r)] for r in rows]
    return _table(header, body)


def rerouting_table(rows: list[dict]) -> str:
    """Bandwidth, fraction of the copy limit and speed-ups, one line per case."""
    header = ["dtype", "N", "E", "tokens", "hidden", "counts", "thr", "op GB/s", "copy GB/s", "% of copy",
              "% of node copy"] + \
        [f"vs {n}" for n in rerouting.BASELINES] + ["other load"]
    body = []
    for r in rows:
        body.append([r["dtype"], str(r["ranks"]), str(r["experts"]), str(r["tokens"]), str(r["hidden"]),
                     r["counts"], str(r["threads"]), f"{r['gb_per_s'][rerouting.FUSED]:.1f}",
                     f"{r['gb_per_s'][r['copy_limit']]:.1f}", f"{r['fraction_of_copy'] * 100:.0f}%",
                     f"{r.get('fraction_of_node_copy', float('nan')) * 100:.0f}%"]
                    + [f"{r['speedup'][n]:.2f}x" for n in rerouting.BASELINES] + [_load(r)])
    return _table(header, body)


def model_table(rows: list[dict]) -> str:
    """Per case: each candidate's time, share of the routed-rows bound and peak memory (model.table)."""
    return model.table(rows)


def markdown(results: dict) -> str:
    """The whole report as Markdown."""
    m, run = results["machine"], results["run"]
    parts = [f"# Benchmark results ({run['mode']})", "",
             f"`{run['command']}`: {run['seconds']:.0f} s, {run['repeats']} interleaved repetitions per case, "
             f"median per-call times; every ratio is baseline time / fused time on the same inputs in the "
             f"same process (> 1: the fused op is faster).", "",
             _table(["machine", ""], [[k, str(v)] for k, v in m.items()] +
                    [["load average (start / end)", f"{run['load_start']} / {run['load_end']}"]]), ""]
    if results.get("targets"):
        parts += ["## Targets", "", _table(["target", "measured", "status"],
                                          [[t["target"], t["measured"], "met" if t["met"] else "**missed**"]
                                           for t in results["targets"]]), ""]
    if results.get("gating"):
        baselines = "; ".join(f"`{k}` = {v}" for k, v in gating.BASELINES.items())
        parts += ["## MoeGatingTopKHash", "", "Baselines: " + baselines
                  + ". `ORT floor`: a one-node graph (Shape) on the same input, what any ORT call costs. "
                  "`agree`: rows whose expert set equals the fused node's, worst baseline (bfloat16 ties "
                  "may be broken differently by `torch.topk`).", "", gating_table(results["gating"]), ""]
    if results.get("gating_scaling"):
        parts += ["### Thread scaling of the fused node", "", scaling_table(results["gating_scaling"]), ""]
    if results.get("gating_isa"):
        parts += ["### Per instruction-set path of the kernel", "", "The fused node, one thread, each path "
                  "forced in a child process (benchmarks/gating_isa.py); fastest call; floor: the "
                  "kernel's estimate (docs/kernel.md).", "", gating_isa.table(results["gating_isa"]), ""]
    if results.get("rerouting"):
        parts += ["## MoeReRouting", "", "GB/s: token (+ scale) bytes moved per second; copy: the fastest plain "
                  "copy of the same bytes; node copy: the node itself on the one-block layout, through the "
                  "same ORT call (see benchmarks/rerouting.py).", "", rerouting_table(results["rerouting"]), ""]
    if results.get("model"):
        parts += ["## Model level", "", "Baselines: " + "; ".join(f"`{k}` = {v}" for k, v in model.BASELINES.items())
                  + ".", "", model_table(results["model"]), ""]
    if results.get("ascend_layer"):
        parts += ["## Ascend code: the recipes' DeepSeek-V3 layer", "", "cann-recipes-infer's layer exported from "
                  "its torch_npu calls against the project's block with the same weights (benchmarks/ascend_layer.py); "
                  "fastest samples, interleaved.", "", ascend_layer.table(results["ascend_layer"]), ""]
    return "\n".join(parts)


# ---- plot --------------------------------------------------------------------------------------

def plot(results: dict, path: Path) -> bool:
    """Throughput (tokens/s) against token count for each gating preset; False without matplotlib."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    rows = results.get("gating", [])
    presets = list(dict.fromkeys(r["preset"] for r in rows))
    if not presets:
        return False
    dtype = "float32" if any(r["dtype"] == "float32" for r in rows) else rows[0]["dtype"]
    cols = min(2, len(presets))
    nrows = (len(presets) + cols - 1) // cols
    fig, axes = plt.subplots(nrows, cols, figsize=(6.5 * cols, 4.2 * nrows), squeeze=False)
    styles = {1: "-", 2: "--"}
    colors = dict(zip(gating.CANDIDATES, ["C3", "C0", "C1", "C2", "C7"]))
    for ax, preset in zip(axes.flat, presets):
        for threads in sorted({r["threads"] for r in rows}):
            sel = sorted((r for r in rows if r["preset"] == preset and r["dtype"] == dtype and r["threads"] == threads),
                         key=lambda r: r["tokens"])
            if not sel:
                continue
            for cand in gating.CANDIDATES:
                ax.plot([r["tokens"] for r in sel], [r["tokens_per_s"][cand] for r in sel],
                        styles.get(threads, ":"), color=colors[cand], marker="o", markersize=3,
                        label=f"{cand}, {threads} thr")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(f"{preset} ({dtype} logits)")
        ax.set_xlabel("tokens per call")
        ax.set_ylabel("tokens / s")
        ax.grid(True, which="both", alpha=0.3)
    for ax in list(axes.flat)[len(presets):]:
        ax.axis("off")
    axes.flat[0].legend(fontsize=7)
    fig.suptitle("MoeGatingTopKHash throughput: fused node (ORT + library) vs baselines")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write(results: dict, out_dir: Path, stem: str, with_plot: bool = True) -> dict:
    """Write ``stem``.json, ``stem``.md and ``stem``_gating.png into ``out_dir``; returns the paths."""
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {"json": out_dir / f"{stem}.json", "markdown": out_dir / f"{stem}.md"}
    paths["json"].write_text(json.dumps(results, indent=1) + "\n")
    paths["markdown"].write_text(markdown(results) + "\n")
    if with_plot and results.get("gating"):
        png = out_dir / f"{stem}_gating.png"
        if plot(results, png):
            paths["plot"] = png
    return paths
