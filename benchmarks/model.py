"""Model level: the DeepSeek-V3 MoE block exported with the fused MoeGatingTopKHash node against the
same block, same weights, exported from its plain-torch reference routing (the dynamo exporter
decomposes it into standard ops), both in ONNX Runtime.

Candidates:
- ``ort-fused``: the fused export, library loaded (the node runs the C++ kernel);
- ``ort-function``: the fused export without the library (ORT inlines the node's function body);
- ``ort-decomposed``: the export of the block whose routing is ``route_native`` (no custom op).

The block keeps DeepSeek-V3's router (hidden 7168, 256 experts, top-8, 8 groups keep 4) and expert
layout; the expert width is cut (``intermediate``) so that the random weights stay small and the
export quick. Routing cost does not depend on the width; at the published width (2048) the experts
take a larger share of the block and the end-to-end gain of the fused router is smaller.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import numpy as np
import torch

from . import common, timing

FUSED = "ort-fused"
BASELINES = {
    "ort-function": "fused export without the library (function body)",
    "ort-decomposed": "export of the plain-torch routing (standard ops)",
}
CANDIDATES = (FUSED, *BASELINES)


@dataclass
class ModelPlan:
    """What the model-level suite measures."""

    preset: str = "deepseek-v3"
    size: str = "full"
    intermediate: int | None = 16  # expert width (see the module docstring); None: the preset's
    tokens: tuple = (1, 16, 256)
    threads: tuple = (1, 2)


def _decomposed(block):
    """A shallow copy of ``block`` (same parameter tensors) that routes with its plain-torch
    reference routing instead of the custom op; expert indices as int32 like the op's."""
    ref = copy.copy(block)

    def route(logits, inputs):
        w, idx = block.route_native(logits, inputs)
        return w, idx.to(torch.int32)

    ref.route = route  # instance attribute: shadows RoutedMoE.route for forward()
    return ref


def run(plan: ModelPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Export both blocks once, then time every (threads, tokens); one result dict per case."""
    from ascend_moe_onnx.models import presets
    from ascend_moe_onnx.models import runtime as verify

    block = presets.build(plan.preset, plan.size, intermediate=plan.intermediate)
    fused = verify.export_block(block)
    decomposed = verify.export_block(_decomposed(block))
    cfg = block.cfg
    results = []
    for threads in plan.threads:
        sessions = {FUSED: common.session(fused, threads, library=True),
                    "ort-function": common.session(fused, threads, library=False),
                    "ort-decomposed": common.session(decomposed, threads, library=False)}
        for tokens in plan.tokens:
            (x,) = block.example_inputs(tokens, seed=7)
            feeds = {"hidden_states": verify.to_numpy(x)}
            fns = {n: common.bound_runner(s, feeds) for n, s in sessions.items()}
            agree = {}
            fns[FUSED]()
            ref = common.bound_output(fns[FUSED], 1)
            for n in BASELINES:
                fns[n]()
                agree[n] = float(np.mean(np.all(np.sort(ref, 1) == np.sort(common.bound_output(fns[n], 1), 1), 1)))
            t, load, attempts = timing.measure_quietly(fns, repeats, min_sample_s, threads)
            row = {
                "suite": "model", "preset": plan.preset, "hidden": cfg.hidden, "experts": cfg.experts,
                "k": cfg.top_k, "intermediate": cfg.intermediate, "dtype": block.dtype_name,
                "threads": threads, "tokens": tokens,
                "time_s": {n: v.median for n, v in t.items()},
                "spread": {n: round(v.spread, 4) for n, v in t.items()},
                "samples_s": {n: v.samples for n, v in t.items()},
                "speedup": {n: timing.ratio(t[n], t[FUSED]) for n in BASELINES},
                "agreement": agree, "other_load_cores": load, "attempts": attempts,
            }
            results.append(row)
            log(f"model {plan.preset} I={cfg.intermediate} t={threads} T={tokens:<5d} fused "
                f"{row['time_s'][FUSED] * 1e3:8.2f} ms  "
                + " ".join(f"{n}={r:.2f}x" for n, r in row["speedup"].items()))
    return results
