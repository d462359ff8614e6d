"""MoeGatingTopKHash: the fused node in ONNX Runtime with the library against what a user would
otherwise run for the same routing, on the same logits:

- ``ort-function``: the node's pure-ONNX function body (onnx_schemas.functions) inlined by ONNX
  Runtime without the library: the same routing as a graph of standard ONNX ops;
- ``ort-exported``: the dynamo export of the plain-torch reference routing of models/ (what
  ``torch.onnx.export`` makes of the vLLM-style grouped top-k), in ONNX Runtime;
- ``torch-eager``: that plain-torch reference routing in eager torch;
- ``torch-op``: the CPU implementation of the torch custom op (exporters), eager.

Rows of suite "gating_isa" (benchmarks/gating_isa.py): the fused node's ns per row on each
instruction-set path of the kernel, one thread, beside the kernel's estimated floor (docs/kernel.md).

Presets keep the published routing sizes (experts, k, groups, hash table); the router shells have
no experts. Logits are N(0, 1), the selection bias N(0, 0.1^2) rounded to bfloat16 (so float32 and
bfloat16 runs use the same bias), the hash table uniform random expert ids.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from . import common, gating_isa, timing

FUSED = "ort-fused"
FLOOR = "ort-floor"  # not a baseline: one Shape node on the same input, ORT's per-call cost
BASELINES = {
    "ort-function": "ORT, function body (standard ONNX ops)",
    "ort-exported": "ORT, dynamo export of the plain-torch routing",
    "torch-eager": "torch eager, plain-torch routing (vLLM-style)",
    "torch-op": "torch custom op, CPU implementation",
}
CANDIDATES = (FUSED, *BASELINES)

# Benchmark name -> models/ preset (full, i.e. published, routing sizes).
PRESETS = {
    "DeepSeek-V3": "deepseek-v3",
    "Kimi-K2": "kimi-k2",
    "Qwen3-MoE": "qwen3-moe",
    "DeepSeek-V4-hash": "deepseek-v4-hash",
}
EXPORT_TOKENS = 8  # example size of the reference export (>= 2 keeps the token dim dynamic)
_ONNX_TYPES = {"float32": TensorProto.FLOAT, "bfloat16": TensorProto.BFLOAT16}
_NP_TYPES = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
_TORCH_TYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


@dataclass
class GatingPlan:
    """What the gating suite measures."""

    presets: tuple = tuple(PRESETS)
    tokens: tuple = (1, 16, 256, 4096, 16384)
    dtypes: tuple = ("float32", "bfloat16")
    threads: tuple = (1, 2)
    size: str = "full"  # "tiny" routes with the tiny presets (smoke test)
    scaling_min_tokens: int = 256  # thread scaling of the fused node from this many tokens on
    isa_tokens: int = 4096  # ns/row per ISA path (gating_isa) at this many tokens; 0: not measured
    isa_calls: int = 20  # calls per child process and round (the fastest counts)
    isa_rounds: int = 2


class _ReferenceRouter(torch.nn.Module):
    """The block's plain-torch reference routing as a module: (logits[, input_ids]) -> (w, idx)."""

    def __init__(self, block):
        super().__init__()
        self.block = block

    def forward(self, logits, input_ids=None):
        """Reference routing of ``logits`` -> (weights [T, k], expert_idx [T, k])."""
        inputs = {} if input_ids is None else {"input_ids": input_ids}
        return self.block.route_native(logits, inputs)


class Router:
    """One preset's routing: a router-only block (no experts), its inputs and the models to time."""

    def __init__(self, name: str, size: str = "full", seed: int = 0):
        from ascend_moe_onnx.models import presets

        entry = presets.preset(PRESETS.get(name, name))
        cfg = presets.config(PRESETS.get(name, name), size)
        self.name, self.cfg = name, cfg
        # hidden/intermediate 1, no shared expert: the routing sizes without the expert weights
        shell = cfg.replace(hidden=1, intermediate=1, shared=0)
        self.block = entry["cls"](shell, torch.float32).eval().requires_grad_(False)
        g = torch.Generator().manual_seed(seed)
        self.bias = None
        if cfg.bias:
            b = (torch.randn(cfg.experts, generator=g) * 0.1).to(torch.bfloat16).float()
            self.block.gate.e_score_correction_bias.copy_(b)
            self.bias = b
        self.table = None
        if cfg.hash:
            self.table = torch.randint(0, cfg.experts, (cfg.vocab, cfg.top_k), generator=g)
            self.block.gate.tid2eid.copy_(self.table)
        self.attrs = dict(k=cfg.top_k, **self.block.gating_attributes())
        self._g = g

    # ---- inputs ---------------------------------------------------------------------------------
    def inputs(self, tokens: int) -> dict[str, np.ndarray]:
        """float32 logits [tokens, E] (and int64 input_ids for hash presets), seeded."""
        g = torch.Generator().manual_seed(1000 + tokens)
        out = {"x": torch.randn(tokens, self.cfg.experts, generator=g).numpy()}
        if self.cfg.hash:
            out["input_ids"] = torch.randint(0, self.cfg.vocab, (tokens,), generator=g).numpy()
        return out

    # ---- models ---------------------------------------------------------------------------------
    def fused_model(self, dtype: str) -> onnx.ModelProto:
        """One MoeGatingTopKHash node (bias / hash table as initializers) with its function body."""
        from ascend_moe_onnx.onnx_schemas.functions import attach_functions

        E, k = self.cfg.experts, self.cfg.top_k
        t = _ONNX_TYPES[dtype]
        names = ["x", "", "", ""]
        inits, graph_inputs = [], [helper.make_tensor_value_info("x", t, ["tokens", E])]
        if self.bias is not None:
            names[1] = "bias"
            bits = self.bias.numpy().astype(_NP_TYPES[dtype])
            if dtype == "bfloat16":
                inits.append(helper.make_tensor("bias", t, [E], bits.view(np.uint16).tobytes(), raw=True))
            else:
                inits.append(onnx.numpy_helper.from_array(bits, "bias"))
        if self.table is not None:
            names[2:4] = ["input_ids", "tid2eid"]
            graph_inputs.append(helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["tokens"]))
            inits.append(onnx.numpy_helper.from_array(self.table.numpy(), "tid2eid"))
        while names[-1] == "":
            names.pop()
        node = helper.make_node("MoeGatingTopKHash", names, ["y", "expert_idx", "out"],
                                domain="ascend.moe", **self.attrs)
        outputs = [helper.make_tensor_value_info("y", t, ["tokens", k]),
                   helper.make_tensor_value_info("expert_idx", TensorProto.INT32, ["tokens", k]),
                   helper.make_tensor_value_info("out", TensorProto.FLOAT, None)]
        graph = helper.make_graph([node], f"{self.name}_gating", graph_inputs, outputs, inits)
        model = helper.make_model(graph, ir_version=10, opset_imports=[
            helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)])
        return attach_functions(model)

    def floor_model(self, dtype: str) -> onnx.ModelProto:
        """The same graph inputs and one Shape node: what a call costs in ORT doing nothing."""
        graph_inputs = [helper.make_tensor_value_info("x", _ONNX_TYPES[dtype], ["tokens", self.cfg.experts])]
        if self.table is not None:
            graph_inputs.append(helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["tokens"]))
        graph = helper.make_graph([helper.make_node("Shape", ["x"], ["shape"])], "floor", graph_inputs,
                                  [helper.make_tensor_value_info("shape", TensorProto.INT64, [2])])
        return helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20)])

    def exported_reference(self, dtype: str) -> onnx.ModelProto:
        """The plain-torch reference routing exported with the dynamo exporter (standard ops only)."""
        from ascend_moe_onnx import exporters

        router = _ReferenceRouter(self.block).eval()
        example = self.inputs(EXPORT_TOKENS)
        args = [torch.from_numpy(example["x"]).to(_TORCH_TYPES[dtype])]
        names = ["x"]
        if self.cfg.hash:
            args.append(torch.from_numpy(example["input_ids"]))
            names.append("input_ids")
        tokens = torch.export.Dim("tokens")
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=".*axis name.*")  # one Dim on two inputs
            return exporters.export(router, tuple(args), dynamic_shapes=tuple({0: tokens} for _ in args),
                                    input_names=names, output_names=["w", "expert_idx"],
                                    attach_functions=False)

    # ---- torch candidates -----------------------------------------------------------------------
    def torch_eager(self, x: torch.Tensor, ids: torch.Tensor | None):
        """Zero-argument callable: the plain-torch reference routing (returns (w, idx))."""
        named = {} if ids is None else {"input_ids": ids}
        block = self.block

        def run():
            with torch.inference_mode():
                return block.route_native(x, named)
        return run

    def torch_op(self, x: torch.Tensor, ids: torch.Tensor | None):
        """Zero-argument callable: the torch custom op's CPU implementation (returns (y, idx, out))."""
        kw = dict(self.attrs)
        k = kw.pop("k")
        if self.bias is not None:
            kw["bias"] = self.bias.to(x.dtype)
        if ids is not None:
            kw["input_ids"], kw["tid2eid"] = ids, self.table
        op = torch.ops.custom.npu_moe_gating_top_k

        def run():
            with torch.inference_mode():
                return op(x, k, **kw)
        return run


def _same_sets(a: np.ndarray, b: np.ndarray) -> float:
    """Fraction of rows whose expert sets agree (order-free: the exported top-k may reorder ties)."""
    if len(a) == 0:
        return 1.0
    return float(np.mean(np.all(np.sort(a.astype(np.int64), 1) == np.sort(b.astype(np.int64), 1), axis=1)))


def run(plan: GatingPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Measure every (preset, dtype, threads, tokens) of ``plan``; one result dict per case."""
    results = []
    for name in plan.presets:
        router = Router(name, plan.size)
        all_inputs = router.inputs(max(plan.tokens))
        for dtype in plan.dtypes:
            fused = router.fused_model(dtype).SerializeToString()
            exported = router.exported_reference(dtype).SerializeToString()
            floor = router.floor_model(dtype).SerializeToString()
            for threads in plan.threads:
                sessions = {FUSED: common.session(fused, threads, library=True),
                            "ort-function": common.session(fused, threads, library=False),
                            "ort-exported": common.session(exported, threads, library=False),
                            FLOOR: common.session(floor, threads, library=False)}
                with common.torch_threads(threads):
                    for tokens in plan.tokens:
                        x = all_inputs["x"][:tokens].astype(_NP_TYPES[dtype])
                        feeds = {"x": x}
                        ids = None
                        if "input_ids" in all_inputs:
                            feeds["input_ids"] = all_inputs["input_ids"][:tokens]
                            ids = torch.from_numpy(feeds["input_ids"])
                        xt = common.to_torch(x)
                        fns = {n: common.bound_runner(s, feeds) for n, s in sessions.items()}
                        fns["torch-eager"] = router.torch_eager(xt, ids)
                        fns["torch-op"] = router.torch_op(xt, ids)
                        agree = _agreement(fns)
                        t, load, attempts = timing.measure_quietly(
                            {n: fns[n] for n in (*CANDIDATES, FLOOR)}, repeats, min_sample_s, threads)
                        row = _row(name, router, dtype, threads, tokens, t, agree)
                        row.update(other_load_cores=load, attempts=attempts)
                        results.append(row)
                        log(_describe(row))
            results += _scaling(name, router, dtype, fused, all_inputs, plan, repeats, min_sample_s, log)
        if plan.isa_tokens and "float32" in plan.dtypes:
            inputs = router.inputs(plan.isa_tokens)
            ns = gating_isa.measure(router.fused_model("float32").SerializeToString(), inputs,
                                    plan.isa_tokens, plan.isa_calls, plan.isa_rounds)
            results.append(gating_isa.row(name, "float32", plan.isa_tokens, ns))
            log(gating_isa.describe(results[-1]))
    return results


def _scaling(name, router, dtype, fused: bytes, all_inputs, plan: GatingPlan, repeats, min_sample_s, log):
    """The fused node on 1 thread against the most threads of the plan, interleaved in one
    measurement (rows of suite "gating_scaling"), for the token counts that use the thread pool."""
    most = max(plan.threads)
    if most <= 1 or 1 not in plan.threads:
        return []
    sessions = {str(t): common.session(fused, t, library=True) for t in (1, most)}
    rows = []
    for tokens in plan.tokens:
        if tokens < plan.scaling_min_tokens:
            continue
        feeds = {"x": all_inputs["x"][:tokens].astype(_NP_TYPES[dtype])}
        if "input_ids" in all_inputs:
            feeds["input_ids"] = all_inputs["input_ids"][:tokens]
        fns = {t: common.bound_runner(s, feeds) for t, s in sessions.items()}
        # twice the repetitions: only two cheap candidates, and the result is a target
        t, load, attempts = timing.measure_quietly(fns, 2 * repeats, min_sample_s, most)
        row = {"suite": "gating_scaling", "preset": name, "dtype": dtype, "tokens": tokens,
               "threads": most, "other_load_cores": load, "attempts": attempts,
               "best_speedup": min(t["1"].samples) / min(t[str(most)].samples),
               "time_s": {n: v.median for n, v in t.items()},
               "spread": {n: round(v.spread, 4) for n, v in t.items()},
               "samples_s": {n: v.samples for n, v in t.items()},
               "speedup": timing.ratio(t["1"], t[str(most)])}
        rows.append(row)
        log(f"gating {name:16s} {dtype:8s} T={tokens:<6d} {most} threads vs 1: {row['speedup']:.2f}x"
            f" (best samples {row['best_speedup']:.2f}x; other processes {_cores(load)})")
    return rows


def _agreement(fns: dict) -> dict[str, float]:
    """Expert-set agreement of each baseline with the fused node on one call (a sanity check that
    every candidate computes the same routing; bfloat16 ties may be broken differently)."""
    fns[FUSED]()
    ref = common.bound_output(fns[FUSED], 1)
    out = {}
    for n in ("ort-function", "ort-exported"):
        fns[n]()
        out[n] = _same_sets(ref, common.bound_output(fns[n], 1))
    out["torch-eager"] = _same_sets(ref, fns["torch-eager"]()[1].numpy())
    out["torch-op"] = _same_sets(ref, fns["torch-op"]()[1].numpy())
    return out


def _row(name, router, dtype, threads, tokens, t: dict, agree: dict) -> dict:
    fused = t[FUSED]
    return {
        "suite": "gating", "preset": name, "experts": router.cfg.experts, "k": router.cfg.top_k,
        "dtype": dtype, "threads": threads, "tokens": tokens,
        "time_s": {n: v.median for n, v in t.items()},
        "spread": {n: round(v.spread, 4) for n, v in t.items()},
        "samples_s": {n: v.samples for n, v in t.items()},
        "calls_per_sample": {n: v.calls_per_sample for n, v in t.items()},
        "speedup": {n: timing.ratio(t[n], fused) for n in BASELINES},
        "tokens_per_s": {n: tokens / v.median for n, v in t.items()},
        "agreement": agree,
    }


def _cores(load) -> str:
    return "?" if load is None else f"{load:.2f} cores"


def _describe(row: dict) -> str:
    f = row["time_s"][FUSED]
    ratios = " ".join(f"{n}={r:.1f}x" for n, r in row["speedup"].items())
    return (f"gating {row['preset']:16s} {row['dtype']:8s} t={row['threads']} T={row['tokens']:<6d} "
            f"fused {f * 1e6:9.1f} us  {ratios}  (other processes {_cores(row['other_load_cores'])})")
