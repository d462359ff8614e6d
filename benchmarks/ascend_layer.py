"""Ascend code against the project's own block: cann-recipes-infer's DeepSeek-V3 MoE layer as its
sources write it (``tests/ascend_code/recipes_deepseek.py``, torch_npu calls through the stand-in:
gating -> init routing -> grouped matmul -> swiglu -> grouped matmul -> finalize with the shared
expert as ``skip1``), exported with ``exporters.export`` and run in ONNX Runtime with the library,
against the project's DeepSeek-V3 block (``models/`` preset, the ``ort`` formulation that
``moe-onnx export`` writes) holding the same weights, in one process, interleaved.

Candidates:
- ``block``: the project's block (MoeGatingTopKHash -> MoeRoutedExperts with the shared expert folded
  in, or ORT's MoE op past its row threshold);
- ``recipes``: the recipes' layer exported from the Ascend code.

Sizes: ``model.BLOCKS["deepseek-v3"]`` (hidden 7168, 256 experts, top-8 of 8 groups, shared expert,
expert width 64 so that two copies of the weights fit a shared machine); 1, 16 and 256 tokens; the
same rotation of inputs as the model suite (different experts per call up to 16 tokens, so each
call reads its experts from DRAM). Threads: 1 and ORT's default (0: one per core). Times are the
fastest sample (medians in the JSON); ``ratio`` = recipes / block (target: <= 1.2).

``--profile``: one ORT profile per candidate and token count (node times summed per op type), the
tool that says where a slower layer spends its time.

    python -m ascend_moe_onnx.benchmarks.ascend_layer [--smoke] [--tokens 1,16,256] [--threads 1,0] [--profile]
"""

from __future__ import annotations

import argparse
import bisect
import gc
import json
import os
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass

import numpy as np
import torch

from . import common, model, timing

TARGET_RATIO = 1.2  # recipes layer time / project block time
CANDIDATES = ("block", "recipes")


@dataclass
class LayerPlan:
    """What the suite measures."""

    size: str = "full"  # "tiny": the preset's tiny config (smoke)
    intermediate: int | None = None  # expert width (None: model.BLOCKS' choice)
    tokens: tuple = (1, 16, 256)
    threads: tuple = (1, 0)  # 0: ONNX Runtime's default thread count
    min_repeats: int = 15
    rotation: int = model.ROTATION
    profile: bool = False


def recipes_layer(block):
    """The recipes' DeepseekV3MoE (TP path, one device) holding ``block``'s weights in the recipe's
    layouts: router ``[H, E]``, w13 ``[E, H, 2I]`` (gate columns, then up), w2 ``[E, I, H]``, the
    shared expert's ``[H, 2I]`` / ``[I, H]``."""
    try:
        from tests.ascend_code import recipes_deepseek as rd
    except ImportError as e:  # the recipes are test fixtures of the source tree, not in the wheel
        raise RuntimeError("the ascend_layer benchmark needs the source tree's tests/ascend_code "
                           "(run it from a checkout)") from e

    c = block.cfg
    if c.norm_type != 1 or not c.bias or c.group_select_mode != 1 or c.renorm != 0:
        raise ValueError("recipes_layer: the recipes' DeepSeek-V3 gate is sigmoid, biased, top-2-sum groups, "
                         f"renorm 0; block {block.preset!r} routes otherwise")
    cfg = rd.DeepseekMoeConfig(hidden_size=c.hidden, moe_intermediate_size=c.intermediate,
                               n_routed_experts=c.experts, num_experts_per_tok=c.top_k, n_group=c.group_count,
                               topk_group=c.k_group, routed_scaling_factor=c.routed_scaling_factor,
                               n_shared_experts=c.shared)
    layer = rd.DeepseekV3MoE(cfg, torch.float32, path="tp").eval()
    ex, sh = block.experts, block.shared_experts
    with torch.no_grad():
        layer.gate.weight.copy_(block.gate.weight.T)
        layer.gate.e_score_correction_bias.copy_(block.gate.e_score_correction_bias)
        w13 = layer.experts.w13_weight
        w13[:, :, :c.intermediate].copy_(ex.gate_proj.transpose(1, 2))
        w13[:, :, c.intermediate:].copy_(ex.up_proj.transpose(1, 2))
        layer.experts.w2_weight.copy_(ex.down_proj.transpose(1, 2))
        inter = sh.gate_proj.shape[0]
        layer.shared_experts.gate_up_proj.weight[:, :inter].copy_(sh.gate_proj.T)
        layer.shared_experts.gate_up_proj.weight[:, inter:].copy_(sh.up_proj.T)
        layer.shared_experts.down_proj.weight.copy_(sh.down_proj.T)
    return layer


def export_recipes(layer, path: str, tokens: int = 8) -> None:
    """The recipes' layer exported as the Ascend code is (dynamo, dynamic token count), weights
    beside ``path``."""
    from torch.export import Dim

    from ascend_moe_onnx import exporters

    x = torch.randn(tokens, layer.hidden_dim, generator=torch.Generator().manual_seed(1234))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        exporters.export(layer, (x,), path, external_data=True, dynamic_shapes=({0: Dim("tokens", min=2)},),
                         input_names=["hidden_states"], output_names=["output"])


def _arrays(module) -> dict:
    return {n: t.detach().numpy() for n, t in module.named_parameters() if t.is_contiguous()}


def sessions(block, layer, workdir: str, threads: int, profile_prefix: str | None = None) -> dict:
    """name -> ORT session of each candidate, the weights shared with the torch modules (exported
    into ``workdir`` on the first call)."""
    paths = {"block": os.path.join(workdir, "block.onnx"), "recipes": os.path.join(workdir, "recipes.onnx")}
    if not os.path.exists(paths["block"]):
        from ascend_moe_onnx.models import runtime

        runtime.export_block(block, path=paths["block"], external_data=True, experts=model.FUSED)
    if not os.path.exists(paths["recipes"]):
        export_recipes(layer, paths["recipes"])
    out = {}
    for name, module in (("block", block), ("recipes", layer)):
        shared = model._shared_for(paths[name], _arrays(module))
        out[name] = model.shared_session(paths[name], shared, threads, profile_prefix=(
            None if profile_prefix is None else f"{profile_prefix}-{name}"))
        gc.collect()
    return out


def profile_by_op(path: str, skip_runs: int = 1) -> dict:
    """ORT profile file -> op type -> median over the Runs of the op's summed node time (µs) in a
    Run (the first ``skip_runs`` Runs left out: first-call allocations), and the Runs counted."""
    import statistics

    with open(path, encoding="utf-8") as f:
        events = json.load(f)
    runs = sorted((e["ts"], e["ts"] + e["dur"]) for e in events
                  if e.get("cat") == "Session" and e.get("name") == "model_run")[skip_runs:]
    starts = [r[0] for r in runs]
    per_run: list[dict] = [{} for _ in runs]
    for e in events:
        if e.get("cat") != "Node" or not e.get("name", "").endswith("_kernel_time"):
            continue
        i = bisect.bisect_right(starts, e["ts"]) - 1
        if i < 0 or e["ts"] > runs[i][1]:
            continue
        op = e.get("args", {}).get("op_name", "?")
        per_run[i][op] = per_run[i].get(op, 0.0) + e["dur"]
    ops = {op for r in per_run for op in r}
    med = {op: statistics.median(r.get(op, 0.0) for r in per_run) for op in ops} if per_run else {}
    return {"runs": len(runs), "us_per_run": dict(sorted(med.items(), key=lambda kv: -kv[1]))}


def _agreement(got: np.ndarray, ref: np.ndarray) -> float:
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.abs(got - ref).max() / scale)


def run(plan: LayerPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Per thread count and token count: both candidates checked against each other and timed
    interleaved on the same rotation; one result dict per case."""
    block = model.build_block("deepseek-v3", plan.size, plan.intermediate)
    layer = recipes_layer(block)
    cfg = block.cfg
    rows = []
    inputs = {T: model._inputs(block, T, plan.rotation) for T in plan.tokens}
    with tempfile.TemporaryDirectory(prefix="moe-ascend-layer-") as workdir:
        for threads in plan.threads:
            sess = sessions(block, layer, workdir, threads)
            for T in plan.tokens:
                xs = inputs[T]
                runners = {n: [common.bound_runner(s, {"hidden_states": x.numpy()}) for x in xs]
                           for n, s in sess.items()}
                worst = 0.0
                for _x, rb, rr in zip(xs, runners["block"], runners["recipes"]):
                    rb()
                    rr()
                    got_b = rb.binding.get_outputs()[0].numpy()
                    got_r = rr.binding.get_outputs()[0].numpy()
                    worst = max(worst, _agreement(got_r, got_b))
                fns = {n: model._rotation(rs) for n, rs in runners.items()}
                n_rep = max(repeats, plan.min_repeats)
                t, load, attempts = timing.measure_quietly(fns, n_rep, min_sample_s, threads or os.cpu_count() or 1)
                best = {n: min(v.samples) / len(xs) for n, v in t.items()}
                med = {n: v.median / len(xs) for n, v in t.items()}
                row = {"suite": "ascend_layer", "size": plan.size, "hidden": cfg.hidden, "experts": cfg.experts,
                       "k": cfg.top_k, "intermediate": cfg.intermediate, "shared": cfg.shared, "dtype": "float32",
                       "threads": threads, "tokens": T, "rotation": len(xs), "repeats": n_rep,
                       "best_s": best, "time_s": med, "spread": {n: round(v.spread, 4) for n, v in t.items()},
                       "ratio": best["recipes"] / best["block"], "ratio_median": med["recipes"] / med["block"],
                       "max_rel_diff": worst, "other_load_cores": load, "attempts": attempts,
                       "load_avg": [round(v, 2) for v in os.getloadavg()]}
                rows.append(row)
                log(f"ascend_layer t={threads} T={T:<4d} block {best['block'] * 1e3:8.3f} ms  recipes "
                    f"{best['recipes'] * 1e3:8.3f} ms  ratio {row['ratio']:.2f} (medians {row['ratio_median']:.2f})"
                    f"  rel diff {worst:.1e}  load {row['load_avg'][0]}")
                del runners, fns
            del sess
            gc.collect()
            if plan.profile:
                for row in [r for r in rows if r["threads"] == threads]:
                    row["profile"] = _profiles(block, layer, workdir, threads, inputs[row["tokens"]], log)
    return rows


PROFILE_CALLS = 20


def _profiles(block, layer, workdir: str, threads: int, xs: list, log) -> dict:
    """candidate -> op type -> µs per call, from an ORT profile of PROFILE_CALLS passes."""
    out = {}
    prefix = os.path.join(workdir, f"profile-t{threads}-T{xs[0].shape[0]}")
    sess = sessions(block, layer, workdir, threads, profile_prefix=prefix)
    for name, s in sess.items():
        fns = [common.bound_runner(s, {"hidden_states": x.numpy()}) for x in xs]
        for _ in range(PROFILE_CALLS):
            for fn in fns:
                fn()
        del fns
        prof = profile_by_op(s.end_profiling())
        out[name] = prof["us_per_run"]
        top = ", ".join(f"{op} {us:.0f}" for op, us in list(prof["us_per_run"].items())[:8])
        log(f"  profile {name} t={threads} T={xs[0].shape[0]} (µs per call): {top}")
    return out


def table(rows: list[dict]) -> str:
    """Markdown table: per case, each candidate's fastest-sample time and the ratio."""
    lines = ["| H/E/k/I | threads | tokens | block ms | recipes ms | recipes / block (fastest) | (medians) | "
             "max rel diff | load avg |", "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        thr = r["threads"] or "default"
        lines.append(f"| {r['hidden']}/{r['experts']}/{r['k']}/{r['intermediate']} | {thr} | {r['tokens']} | "
                     f"{r['best_s']['block'] * 1e3:.3f} | {r['best_s']['recipes'] * 1e3:.3f} | {r['ratio']:.2f}x | "
                     f"{r['ratio_median']:.2f}x | {r['max_rel_diff']:.1e} | {r['load_avg'][0]:.1f} |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> list[tuple[str, str, bool]]:
    """The target on the full-size rows: the recipes layer within TARGET_RATIO of the block."""
    return [(f"ascend layer {r['tokens']} tok, {r['threads'] or 'default'} thr: recipes within "
             f"{TARGET_RATIO}x of the project's block", f"{r['ratio']:.2f}x", r["ratio"] <= TARGET_RATIO)
            for r in rows if r.get("size") == "full"]


def main(argv=None) -> int:
    """Command line: run the suite, print the table (and the profiles)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--smoke", action="store_true", help="tiny sizes: checks the harness, the numbers mean nothing")
    p.add_argument("--tokens", default="1,16,256")
    p.add_argument("--threads", default="1,0", help="intra-op thread counts (0: ORT's default)")
    p.add_argument("--repeats", type=int, default=15)
    p.add_argument("--min-sample-s", type=float, default=0.005)
    p.add_argument("--profile", action="store_true", help="per-op-type times from ORT's profiler")
    a = p.parse_args(argv)
    plan = LayerPlan(size="tiny" if a.smoke else "full", tokens=tuple(int(t) for t in a.tokens.split(",")),
                     threads=tuple(int(t) for t in a.threads.split(",")), profile=a.profile,
                     min_repeats=2 if a.smoke else 15)
    started = time.time()
    rows = run(plan, a.repeats, a.min_sample_s)
    print(table(rows))
    for name, measured, met in targets(rows):
        print(f"{'met   ' if met else 'MISSED'} {name}: {measured}")
    print(f"{time.time() - started:.0f} s, load average {os.getloadavg()[0]:.1f}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
