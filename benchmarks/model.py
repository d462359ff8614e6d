"""Model level: one exported MoE block per expert formulation against ONNX Runtime's own MoE op and
plain torch, same weights, same process, and against the routed-rows lower bound.

Candidates (``CANDIDATES``):
- ``ort``: the block exported with the default formulation (MoeGatingTopKHash node -> pseudo-logits
  -> ``com.microsoft.MoE``), custom-op library loaded;
- ``onnx``: the portable formulation (standard ops: rows sorted by expert, a Loop over the active experts);
- ``padded``: the earlier zero-padded ``[E, C, H]`` formulation (skipped above ``PADDED_MAX_TOKENS``:
  its buffers grow with E·C);
- ``ort-moe``: ONNX Runtime's MoE op routing by itself (router MatMul -> MoE with softmax top-k and
  ``normalize_routing_weights``), for the blocks whose router it can express (Qwen3 / Mixtral);
- ``torch``: the block's plain-torch reference (``forward_native``: Hugging Face's loop over experts).

Lower bound (``bound``): the routed rows' work at the machine's measured rates, whichever is larger:
FLOPs (router + T·k routed rows + shared expert) at the measured float32 MatMul rate, or the bytes
of the weights the call must read (router, the distinct selected experts, shared expert) at the
measured read bandwidth: of a probe of the same size when they fit the last-level cache (the
samples call a block again and again on the same input, so they find them there), else of DRAM
(``lower_bound``). ``share``: bound / candidate time; ``share_dram``: against the DRAM-rate bound. Times are the fastest sample
(``best_s``; medians in ``time_s``): on a shared machine a 2 ms call is often descheduled for tens
of ms, which moves medians by whole factors but not the fastest sample. ``peak_mib``: the growth of the
process's peak resident memory during one call (ORT sessions without the memory arena, so each
call's buffers are really allocated and released).
"""

from __future__ import annotations

import gc
from dataclasses import dataclass

import numpy as np
import onnx
import torch
from onnx import TensorProto, helper, numpy_helper

from . import common, timing

FUSED = "ort"  # the default formulation: every ratio is relative to it
BASELINES = {
    "onnx": "portable formulation (standard ops only)",
    "padded": "earlier formulation ([E, C, H] zero-padded buckets)",
    "ort-moe": "ONNX Runtime's MoE op routing by itself (softmax top-k; Qwen3-like only)",
    "torch": "plain torch reference (Hugging Face loop over experts)",
}
CANDIDATES = (FUSED, *BASELINES)
PADDED_MAX_TOKENS = 256
SHARE_TARGETS = {1: 0.8, 16: 0.6}  # tokens -> the default formulation's share of the bound (issue 9)
TOLERANCE = 2e-5  # float32 max rel error against the torch reference (cli.verify.TOLERANCES)

# name -> (preset, full-size changes). Full hidden size and expert count; expert width cut so that
# five copies of the weights (torch + four sessions) fit a shared 24 GiB machine.
BLOCKS = {
    "qwen3-30b-a3b": ("qwen3-moe", dict(hidden=2048, experts=128, top_k=8, intermediate=128)),
    "deepseek-v3": ("deepseek-v3", dict(intermediate=16)),
}


@dataclass
class ModelPlan:
    """What the model-level suite measures."""

    blocks: tuple = tuple(BLOCKS)
    size: str = "full"  # "tiny": the presets' tiny configs (smoke)
    intermediate: int | None = None  # expert width of every block (None: BLOCKS' choice)
    tokens: tuple = (1, 16, 256, 2048)
    threads: tuple = (1,)
    min_repeats: int = 15  # at least this many samples: the fastest one is reported


def build_block(name: str, size: str, intermediate: int | None = None, seed: int = 0):
    """A float32 block of ``BLOCKS[name]`` with seeded random weights."""
    from ascend_moe_onnx.models import presets
    from ascend_moe_onnx.models.layers import init_random

    preset, changes = BLOCKS[name]
    cfg = presets.config(preset, size)
    if size == "full":
        cfg = cfg.replace(**changes)
    if intermediate:
        cfg = cfg.replace(intermediate=intermediate)
    block = presets.preset(preset)["cls"](cfg, torch.float32).eval().requires_grad_(False)
    init_random(block, seed)
    block.preset, block.size, block.dtype_name, block.note = preset, size, "float32", ""
    return block


def ort_moe_model(block) -> bytes | None:
    """Router MatMul + ``com.microsoft.MoE`` routing by itself (softmax top-k, renormalised when the
    block renormalises), or None when the block's router is not a plain softmax top-k."""
    c = block.cfg
    if c.norm_type != 0 or c.bias or c.shared or c.hash or c.image_tokens or c.routed_scaling_factor != 1.0 \
            or (c.group_count > 1 and c.k_group < c.group_count):
        return None
    ex = block.experts
    fc1 = torch.stack((ex.gate_proj, ex.up_proj), 2).reshape(c.experts, 2 * c.intermediate, c.hidden)
    inits = [numpy_helper.from_array(block.gate.weight.float().T.contiguous().numpy(), "router"),
             numpy_helper.from_array(fc1.float().numpy(), "fc1"),
             numpy_helper.from_array(ex.down_proj.float().numpy(), "fc2")]
    nodes = [helper.make_node("MatMul", ["hidden_states", "router"], ["logits"]),
             helper.make_node("MoE", ["hidden_states", "logits", "fc1", "", "fc2"], ["output"], domain="com.microsoft",
                              k=c.top_k, activation_type="swiglu", swiglu_fusion=1, activation_alpha=1.0,
                              activation_beta=0.0, normalize_routing_weights=c.renorm)]
    graph = helper.make_graph(nodes, "ort_moe", [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                                                               ["tokens", c.hidden])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["tokens", c.hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)])
    return model.SerializeToString()


# ---- machine rates and the bound -----------------------------------------------------------------

DRAM_PROBE_MIN_BYTES = 128 * 2**20  # the DRAM probe reads at least this, and 4x the last-level cache


def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache (Linux sysfs; None where unknown)."""
    import glob

    sizes = []
    for path in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*/size"):
        try:
            with open(path, encoding="ascii") as f:
                text = f.read().strip()
        except OSError:
            continue
        scale = {"K": 2**10, "M": 2**20, "G": 2**30}.get(text[-1:].upper(), 1)
        digits = text.rstrip("KMGkmg")
        if digits.isdigit():
            sizes.append(int(digits) * scale)
    return max(sizes) if sizes else None


def read_rate(nbytes: int, threads: int, calls: int = 20) -> float:
    """Read bandwidth (B/s) of a float32 sum over ``nbytes``, summed again and again like the
    benchmark's samples call a block again and again on the same input: the best of ``calls``
    (short calls, so that some run undisturbed on a shared machine). A buffer that fits the
    caches is then read from them."""
    import time

    with common.torch_threads(threads):
        buf = torch.ones(max(nbytes // 4, 2**18))
        buf.sum()
        best = float("inf")
        for _ in range(calls):
            t0 = time.perf_counter()
            buf.sum()
            best = min(best, time.perf_counter() - t0)
    return buf.numel() * 4 / best


def machine_rates(threads: int) -> dict:
    """Measured float32 MatMul rate (FLOP/s, 512x1024 @ 1024x1024, best of 20 calls) with
    ``threads`` torch threads, the last-level cache size and the DRAM read bandwidth (``read_rate``
    over 4x that cache, at least DRAM_PROBE_MIN_BYTES). Working sets that fit the cache get their
    own probe (``lower_bound``)."""
    import time

    with common.torch_threads(threads):
        a, b = torch.randn(512, 1024), torch.randn(1024, 1024)
        best_mm = float("inf")
        for _ in range(20):
            t0 = time.perf_counter()
            torch.mm(a, b)
            best_mm = min(best_mm, time.perf_counter() - t0)
    llc = last_level_cache_bytes()
    dram = read_rate(max(DRAM_PROBE_MIN_BYTES, 4 * (llc or 0)), threads)
    return {"matmul_flops": 2 * 512 * 1024 * 1024 / best_mm, "read_bytes": dram, "llc_bytes": llc,
            "threads": threads}


def lower_bound(block, x: torch.Tensor, rates: dict) -> dict:
    """The routed-rows lower bound of one call on ``x``: FLOPs, bytes and seconds.

    The benchmark calls a block again and again on the same input (``timing.measure``), so the
    weights one call reads are its working set: when they fit the last-level cache they are read
    at the rate of a probe of that size, read again and again the same way (``read_rate``; the
    cache's rate, partly), else at the DRAM rate. ``seconds_dram``: the bound at the DRAM rate
    whatever the size (what a model whose other layers evict the cache between calls would get)."""
    c = block.cfg
    with torch.no_grad():
        _, idx = block.route_native(block.router_logits_native(x), {"hidden_states": x})
    T, k = idx.shape
    distinct = int(torch.unique(idx).numel())
    per_expert = 3 * c.hidden * c.intermediate
    shared = 3 * c.hidden * c.shared * c.intermediate
    flops = 2 * (T * k * per_expert + T * shared + T * c.hidden * c.experts)
    nbytes = 4 * (distinct * per_expert + shared + c.hidden * c.experts)
    llc = rates.get("llc_bytes")
    cached = llc is not None and nbytes <= llc
    read = read_rate(nbytes, rates.get("threads", 1)) if cached else rates["read_bytes"]
    compute_s = flops / rates["matmul_flops"]
    return {"flops": flops, "bytes": nbytes, "seconds": max(compute_s, nbytes / read),
            "seconds_dram": max(compute_s, nbytes / rates["read_bytes"]), "read_probe": "cache" if cached else "dram",
            "read_bytes": read, "distinct_experts": distinct}


# ---- peak memory ---------------------------------------------------------------------------------

def _status_kib(field: str) -> int | None:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def _return_freed_memory() -> None:
    """Make glibc map every allocation of 64 KiB or more on its own and unmap it when freed
    (mallopt M_MMAP_THRESHOLD: a fixed threshold also stops it from keeping freed blocks), so
    that the resident memory before a call does not already hold its buffers."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt(-3, 1 << 16)  # M_MMAP_THRESHOLD
        libc.malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_growth_mib(fn) -> float | None:
    """How far one call of ``fn`` raises the process's peak resident memory above the memory
    resident before it (MiB; Linux only: the peak is reset through /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w", encoding="ascii") as f:
            f.write("5")
    except OSError:
        return None
    gc.collect()
    before = _status_kib("VmRSS")
    fn()
    peak = _status_kib("VmHWM")
    return None if before is None or peak is None else max(0.0, (peak - before) / 1024)


def _session(data: bytes, threads: int, arena: bool):
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    so.enable_cpu_mem_arena = arena
    so.add_session_config_entry("session.force_spinning_stop", "1")
    ort_custom_ops.register(so)
    return ort.InferenceSession(data, so, providers=common.PROVIDERS)


# ---- the suite -----------------------------------------------------------------------------------

def _models(block, tokens) -> dict:
    from ascend_moe_onnx.models import runtime

    out = {f: runtime.export_block(block, experts=f) for f in ("ort", "onnx", "padded")}
    moe = ort_moe_model(block)
    if moe is not None:
        out["ort-moe"] = moe
    return out


def _agreement(got: np.ndarray, ref: np.ndarray) -> float:
    """Fraction of rows within TOLERANCE (relative to the reference's largest value)."""
    if ref.size == 0:
        return 1.0
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.mean(np.abs(got - ref).max(axis=1) / scale <= TOLERANCE))


def run(plan: ModelPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Per block: export every formulation once, measure peak memory, then time every (threads,
    tokens); one result dict per case."""
    results = []
    for name in plan.blocks:
        block = build_block(name, plan.size, plan.intermediate)
        cfg = block.cfg
        models = _models(block, plan.tokens)
        inputs = {T: block.example_inputs(T, seed=7)[0] for T in plan.tokens}
        peaks = _peaks(block, models, inputs, log)
        for threads in plan.threads:
            rates = machine_rates(threads)
            sessions = {n: _session(d, threads, arena=True) for n, d in models.items()}
            for T in plan.tokens:
                x = inputs[T]
                feeds = {"hidden_states": x.numpy()}
                fns = {n: common.bound_runner(s, feeds) for n, s in sessions.items()
                       if n != "padded" or T <= PADDED_MAX_TOKENS}

                def torch_ref(x=x):
                    with torch.no_grad():
                        return block.forward_native(x)

                with common.torch_threads(threads):
                    ref = torch_ref()[0].numpy()
                    agree = {}
                    for n, fn in fns.items():
                        fn()
                        agree[n] = _agreement(common.bound_output(fn, 0), ref)
                    fns["torch"] = torch_ref
                    t, load, attempts = timing.measure_quietly(fns, max(repeats, plan.min_repeats), min_sample_s, threads)
                # probes after every case, the best kept: on a shared machine a neighbour's
                # memory traffic lowers a probe as much as a candidate, and the bound is the
                # fastest the machine goes
                rates = {key: max(v, rates[key]) if key in ("matmul_flops", "read_bytes") else v
                         for key, v in machine_rates(threads).items()}
                bound = lower_bound(block, x, rates)
                time_s = {n: v.median for n, v in t.items()}
                best_s = {n: min(v.samples) for n, v in t.items()}
                row = {
                    "suite": "model", "size": plan.size, "block": name, "preset": block.preset, "hidden": cfg.hidden,
                    "experts": cfg.experts, "k": cfg.top_k, "intermediate": cfg.intermediate,
                    "shared": cfg.shared, "dtype": "float32", "threads": threads, "tokens": T,
                    "time_s": time_s, "best_s": best_s,
                    "spread": {n: round(v.spread, 4) for n, v in t.items()},
                    "samples_s": {n: v.samples for n, v in t.items()},
                    "speedup": {n: (best_s[n] / best_s[FUSED] if n in t else None) for n in BASELINES},
                    "bound_s": bound["seconds"], "bound": bound, "rates": rates,
                    "share": {n: bound["seconds"] / s for n, s in best_s.items()},
                    "share_dram": {n: bound["seconds_dram"] / s for n, s in best_s.items()},
                    "peak_mib": peaks.get(T, {}),
                    "agreement": agree, "other_load_cores": load, "attempts": attempts,
                }
                results.append(row)
                log(f"model {name} I={cfg.intermediate} t={threads} T={T:<5d} bound {bound['seconds'] * 1e3:8.2f} ms "
                    f"({bound['read_probe']})  "
                    + " ".join(f"{n}={s * 1e3:.2f}ms({row['share'][n] * 100:.0f}%)" for n, s in best_s.items()))
            del sessions
            gc.collect()
        del block, models
        gc.collect()
    return results


def _peaks(block, models: dict, inputs: dict, log) -> dict:
    """tokens -> candidate -> peak memory growth of one call (MiB), one arena-less session at a time."""
    _return_freed_memory()
    peaks: dict = {T: {} for T in inputs}
    for n, data in models.items():
        sess = _session(data, 1, arena=False)
        for T, x in inputs.items():
            if n == "padded" and T > PADDED_MAX_TOKENS:
                continue
            fn = common.bound_runner(sess, {"hidden_states": x.numpy()})
            fn()  # first call: lazy initialisation is not the call's working memory
            peaks[T][n] = peak_growth_mib(fn)
        del sess
        gc.collect()
    with common.torch_threads(1), torch.no_grad():
        for T, x in inputs.items():
            block.forward_native(x)
            peaks[T]["torch"] = peak_growth_mib(lambda x=x: block.forward_native(x))
    return peaks


def table(rows: list[dict]) -> str:
    """Markdown table: per case, each candidate's fastest-sample time, its share of the bound and
    peak memory; the default (ort) and onnx formulations relative to the best of ort-moe and torch."""
    head = ["block", "H/E/k/I", "thr", "tokens", "bound ms"] + [f"{n} ms (share, MiB)" for n in CANDIDATES] \
        + ["ort vs best(ort-moe, torch)", "onnx vs best", "onnx vs ort", "ort share of DRAM-rate bound"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["block"], f"{r['hidden']}/{r['experts']}/{r['k']}/{r['intermediate']}", str(r["threads"]),
                 str(r["tokens"]), f"{r['bound_s'] * 1e3:.2f} ({r['bound'].get('read_probe', 'dram')})"]
        for n in CANDIDATES:
            if n in r["best_s"]:
                peak = r["peak_mib"].get(n)
                cells.append(f"{r['best_s'][n] * 1e3:.2f} ({r['share'][n] * 100:.0f}%, "
                             f"{'-' if peak is None else f'{peak:.0f}'})")
            else:
                cells.append("n/a")
        best = min(r["best_s"][n] for n in ("ort-moe", "torch") if n in r["best_s"])
        cells += [f"{r['best_s']['ort'] / best:.2f}x", f"{r['best_s']['onnx'] / best:.2f}x",
                  f"{r['best_s']['onnx'] / r['best_s']['ort']:.2f}x",
                  f"{r['share_dram']['ort'] * 100:.0f}%" if "share_dram" in r else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> list[tuple[str, str, bool]]:
    """Issue 9's targets on the full-size rows: (target, measured, met)."""
    out = []
    for r in rows:
        if r.get("size") != "full":
            continue
        case = f"model {r['block']} {r['tokens']} tok, {r['threads']} thr"
        best = {n: r["best_s"][n] for n in ("ort-moe", "torch") if n in r["best_s"]}
        fastest = min(best, key=best.get)
        rel = r["best_s"][FUSED] / best[fastest]
        out.append((f"{case}: {FUSED} within 1.1x of the best of ort-moe and torch",
                    f"{rel:.2f}x ({fastest})", rel <= 1.1))
        if "onnx" in r["best_s"]:
            rel = r["best_s"]["onnx"] / r["best_s"][FUSED]
            out.append((f"{case}: onnx within 2x of {FUSED}", f"{rel:.2f}x", rel <= 2))
        if r["tokens"] in SHARE_TARGETS:
            want, got = SHARE_TARGETS[r["tokens"]], r["share"][FUSED]
            out.append((f"{case}: {FUSED} >= {want * 100:.0f}% of the routed-rows bound",
                        f"{got * 100:.0f}% ({r['bound'].get('read_probe', 'dram')} probe; "
                        f"{r['share_dram'][FUSED] * 100:.0f}% of the DRAM-rate bound)", got >= want))
    return out
