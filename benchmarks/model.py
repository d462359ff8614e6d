"""Model level: one exported MoE block per expert formulation against ONNX Runtime's own MoE op and
plain torch, same weights, same process, and against the routed-rows lower bound.

Candidates (``CANDIDATES``):
- ``ort``: the block exported with the default formulation (MoeGatingTopKHash node -> an ``If`` on
  the routed rows: the library's MoeRoutedExperts, or pseudo-logits -> ``com.microsoft.MoE`` past
  ``exporters.experts_graph.OWN_KERNEL_MAX_ROWS``), custom-op library loaded;
- ``onnx``: the portable formulation (standard ops: rows sorted by expert, one If per expert);
- ``padded``: the earlier zero-padded ``[E, C, H]`` formulation (skipped above ``PADDED_MAX_TOKENS``:
  its buffers grow with E·C);
- ``ort-moe``: ONNX Runtime's MoE op routing by itself (router MatMul -> MoE with softmax top-k and
  ``normalize_routing_weights``), for the blocks whose router it can express (Qwen3 / Mixtral);
- ``torch``: the block's plain-torch reference (``forward_native``: Hugging Face's loop over experts).

Sizes (``BLOCKS``): full hidden size and expert count; the Qwen3-like block at its real expert width
(768: 2.4 GB of float32 expert weights), the DeepSeek-V3-like one cut to 64 (1.4 GB) so that every
copy fits a shared machine. The weights exist once in torch; the sessions read the same memory
(``SessionOptions.add_initializer``), so each session holds only what ORT derives from them.

Inputs (``ROTATION``): up to ``ROTATE_MAX_TOKENS`` tokens, successive calls rotate through several
inputs that route to different experts, as successive tokens (and layers) of a model do, so each
call reads its experts' weights from DRAM as in decode, not from the cache the previous identical
call filled. Every candidate gets the same rotation; a timed call is one pass over it, and times
are reported per input (pass / rotation length).

Lower bound (``bound``): the routed rows' work at the machine's measured rates, whichever is larger:
FLOPs (router + T·k routed rows + shared expert) at the measured float32 MatMul rate, or the bytes
of the weights the call must read (router, the distinct selected experts, shared expert) at the
measured read bandwidth, averaged over the rotation: at the DRAM rate when the rotation's working
set (the union of its calls' weights) exceeds the last-level cache, else at the rate of a cached
probe of that size (tiny blocks only) (``lower_bound``). ``share``: bound / candidate time;
``share_dram``: against the DRAM-rate bound. Times are the fastest sample
(``best_s``; medians in ``time_s``): on a shared machine a 2 ms call is often descheduled for tens
of ms, which moves medians by whole factors but not the fastest sample. ``peak_mib``: the growth of the
process's peak resident memory during one call (ORT sessions without the memory arena, so each
call's buffers are really allocated and released); ``process_peak_mib``: the process's peak
resident memory after the block (weights, sessions and all).
"""

from __future__ import annotations

import gc
import os
import tempfile
from dataclasses import dataclass

import ml_dtypes
import numpy as np
import onnx
import torch
from onnx import TensorProto, helper

from ascend_moe_onnx import ort_custom_ops

from . import common, read_probe, timing

FUSED = "ort"  # the default formulation: every ratio is relative to it
BASELINES = {
    "onnx": "portable formulation (standard ops only)",
    "padded": "earlier formulation ([E, C, H] zero-padded buckets)",
    "ort-moe": "ONNX Runtime's MoE op routing by itself (softmax top-k; Qwen3-like only)",
    "torch": "plain torch reference (Hugging Face loop over experts)",
}
CANDIDATES = (FUSED, *BASELINES)
PADDED_MAX_TOKENS = 256
# the padded formulation is not built for blocks with more expert weight than this: one more
# ORT-derived copy of the weights (and the folding's transient copies) would not fit the machine
PADDED_MAX_WEIGHT_BYTES = 2 * 2**30
ROTATION = 8  # inputs rotated through at small token counts (different experts per call)
ROTATE_MAX_TOKENS = 16  # from 256 tokens on every expert is selected by every call anyway
SLOW_CALL_S = 0.5  # cases whose calls take longer are timed with ModelPlan.slow_repeats samples
# ORT >= 1.27 does not constant-fold a node whose output exceeds 1 GiB unless told so (the
# benchmark exports with external data and shares the stacked weights, so layouts are derived)
FOLDING_LIMIT_KEY = ort_custom_ops.CONSTANT_FOLDING_LIMIT_KEY
FOLDING_LIMIT_BYTES = ort_custom_ops.CONSTANT_FOLDING_LIMIT_BYTES
SHARE_TARGETS = {1: 0.8, 16: 0.6}  # tokens -> the default formulation's share of the bound
TOLERANCE = 2e-5  # float32 max rel error against the torch reference (cli.verify.TOLERANCES)

# name -> (preset, full-size changes). Full hidden size and expert count; Qwen3-30B-A3B's real
# expert width (768); DeepSeek-V3's cut to 64 so that torch's weights and the sessions' derived
# layouts stay under ~9 GB together (peak, session creation included).
BLOCKS = {
    "qwen3-30b-a3b": ("qwen3-moe", dict(hidden=2048, experts=128, top_k=8, intermediate=768)),
    "deepseek-v3": ("deepseek-v3", dict(intermediate=64)),
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
    slow_repeats: int = 5  # samples of cases whose calls take over SLOW_CALL_S (seconds each)
    rotation: int = ROTATION


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


def ort_moe_model(block, path: str) -> dict | None:
    """Router MatMul + ``com.microsoft.MoE`` routing by itself (softmax top-k, renormalised when the
    block renormalises), written to ``path``; None when the block's router is not a plain softmax
    top-k. Returns the weights its session must be given (``shared_session``): the file's weights
    are placeholders (a sparse file), so that no second copy of them is written or serialised."""
    c = block.cfg
    if c.norm_type != 0 or c.bias or c.shared or c.hash or c.image_tokens or c.routed_scaling_factor != 1.0 \
            or (c.group_count > 1 and c.k_group < c.group_count):
        return None
    ex = block.experts
    fc1 = torch.stack((ex.gate_proj, ex.up_proj), 2).reshape(c.experts, 2 * c.intermediate, c.hidden)
    weights = {"router": block.gate.weight.float().T.contiguous().numpy(), "fc1": fc1.float().numpy(),
               "fc2": ex.down_proj.float().contiguous().numpy()}
    nodes = [helper.make_node("MatMul", ["hidden_states", "router"], ["logits"]),
             helper.make_node("MoE", ["hidden_states", "logits", "fc1", "", "fc2"], ["output"], domain="com.microsoft",
                              k=c.top_k, activation_type="swiglu", swiglu_fusion=1, activation_alpha=1.0,
                              activation_beta=0.0, normalize_routing_weights=c.renorm)]
    data_name, offset, inits = os.path.basename(path) + ".data", 0, []
    for name, w in weights.items():
        t = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=w.shape)
        t.data_location = TensorProto.EXTERNAL
        for key, value in (("location", data_name), ("offset", str(offset)), ("length", str(w.nbytes))):
            t.external_data.add(key=key, value=value)
        inits.append(t)
        offset += w.nbytes
    graph = helper.make_graph(nodes, "ort_moe", [helper.make_tensor_value_info("hidden_states", TensorProto.FLOAT,
                                                                               ["tokens", c.hidden])],
                              [helper.make_tensor_value_info("output", TensorProto.FLOAT, ["tokens", c.hidden])], inits)
    opsets = [helper.make_opsetid("", 20), helper.make_opsetid("com.microsoft", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    onnx.save(model, path)
    with open(os.path.join(os.path.dirname(path), data_name), "wb") as f:
        f.truncate(offset)  # sparse: ONNX Runtime checks the file, the session reads `weights`
    return weights


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
    """Read bandwidth (B/s) over ``nbytes``, read again and again like the benchmark's samples call
    a block again and again on the same input: the fastest of a torch float32 sum (one stream) and
    the native probe's sums as 1, 4 and 8 streams side by side (``read_probe``), each the best of
    ``calls`` (short calls, so that some run undisturbed on a shared machine). A buffer that fits
    the caches is then read from them."""
    import time

    with common.torch_threads(threads):
        buf = torch.ones(max(nbytes // 4, 2**18))
        buf.sum()
        best = float("inf")
        for _ in range(calls):
            t0 = time.perf_counter()
            buf.sum()
            best = min(best, time.perf_counter() - t0)
    native = read_probe.read_rates(buf.numpy(), calls)
    return max([buf.numel() * 4 / best, *native.values()])


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


def lower_bound(block, xs: list, rates: dict) -> dict:
    """The routed-rows lower bound of one call, averaged over the inputs ``xs`` the samples rotate
    through: FLOPs, bytes and seconds.

    The weights a call reads are read at the DRAM rate when the rotation's working set (the union
    of its calls' weights) exceeds the last-level cache, else at the rate of a probe of that size,
    read again and again the same way (``read_rate``; the cache's rate, partly): the samples call
    the block on the rotation again and again. ``seconds_dram``: the bound at the DRAM rate
    whatever the size (what a model whose other layers evict the cache between calls would get)."""
    c = block.cfg
    per_expert = 3 * c.hidden * c.intermediate
    fixed = 3 * c.hidden * c.shared * c.intermediate + c.hidden * c.experts  # shared expert + router
    calls, union = [], set()
    with torch.no_grad():
        for x in xs:
            _, idx = block.route_native(block.router_logits_native(x), {"hidden_states": x})
            T, k = idx.shape
            chosen = set(torch.unique(idx).tolist())
            union |= chosen
            calls.append((T * k, T, len(chosen)))
    working_set = 4 * (len(union) * per_expert + fixed)
    llc = rates.get("llc_bytes")
    cached = llc is not None and working_set <= llc
    read = read_rate(working_set, rates.get("threads", 1)) if cached else rates["read_bytes"]
    flops = [2 * (rows * per_expert + T * fixed) for rows, T, _ in calls]  # fixed: one row's worth
    nbytes = [4 * (distinct * per_expert + fixed) for _, _, distinct in calls]
    compute = [f / rates["matmul_flops"] for f in flops]

    def mean(v):
        return sum(v) / len(v)

    return {"flops": mean(flops), "bytes": mean(nbytes), "working_set_bytes": working_set,
            "seconds": mean([max(t, b / read) for t, b in zip(compute, nbytes)]),
            "seconds_dram": mean([max(t, b / rates["read_bytes"]) for t, b in zip(compute, nbytes)]),
            "read_probe": "cache" if cached else "dram", "read_bytes": read,
            "distinct_experts": mean([d for _, _, d in calls]), "rotation": len(xs)}


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


def _keep_freed_memory() -> None:
    """Undo ``_return_freed_memory`` as far as glibc allows: blocks up to 32 MiB from the heap and
    kept when freed (the largest threshold glibc's own adjustment reaches)."""
    import ctypes
    import ctypes.util

    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c"))
        libc.mallopt(-3, 32 << 20)  # M_MMAP_THRESHOLD
        libc.mallopt(-1, 64 << 20)  # M_TRIM_THRESHOLD
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


def shared_session(path: str, shared: dict, threads: int, arena: bool = True, profile_prefix: str | None = None):
    """An ORT session on the model at ``path`` whose initializers named in ``shared`` (name -> float32
    array) are those arrays' memory, not copies (``add_initializer``; the arrays must outlive the
    session). ``arena=False``: without the memory arena, so that each call's buffers are really
    allocated and released (``peak_growth_mib``; slow: fresh pages for every large buffer, 4x the
    time of the onnx formulation at one token). Constant folding unlimited (FOLDING_LIMIT_KEY).
    ``profile_prefix``: ORT's profiler on, its file named from this prefix (``end_profiling``)."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    so.log_severity_level = 3
    so.enable_cpu_mem_arena = arena
    if profile_prefix is not None:
        so.enable_profiling, so.profile_file_prefix = True, profile_prefix
    so.add_session_config_entry("session.force_spinning_stop", "1")
    so.add_session_config_entry(FOLDING_LIMIT_KEY, str(FOLDING_LIMIT_BYTES))
    ort_custom_ops.register(so)
    keep = []
    for name, array in shared.items():
        if array.dtype == ml_dtypes.bfloat16:  # ONNX's bfloat16, the same memory
            value = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(array.view(np.uint16), onnx.TensorProto.BFLOAT16)
        else:
            value = ort.OrtValue.ortvalue_from_numpy(array)
        keep.append(value)
        so.add_initializer(name, value)
    sess = ort.InferenceSession(path, so, providers=common.PROVIDERS)
    sess.shared_values = keep
    return sess


def _block_arrays(block) -> dict:
    """The block's float32 parameters and buffers as NumPy views (name -> array, no copy)."""
    out = {}
    for name, t in (*block.named_parameters(), *block.named_buffers()):
        if t.dtype == torch.float32 and t.is_contiguous():
            out[name] = t.detach().numpy()
    return out


def _shared_for(path: str, arrays: dict) -> dict:
    """The entries of ``arrays`` that are external initializers of the model at ``path`` with the
    same shape: the exporter names initializers after the parameters they hold."""
    proto = onnx.load(path, load_external_data=False)
    return {i.name: arrays[i.name] for i in proto.graph.initializer
            if i.name in arrays and tuple(i.dims) == arrays[i.name].shape}


def expert_weight_bytes(block) -> int:
    c = block.cfg
    return 4 * 3 * c.experts * c.hidden * c.intermediate


def _sessions(block, workdir: str, threads: int, arena: bool, models: dict, log, only=None):
    """name -> session of every ORT candidate (or of ``only``), the weights shared with ``block``.
    The formulations are exported once into ``workdir`` (``models``: name -> (path, shared weights),
    filled on the first call) with their weights in a file (the Qwen3-like block is past protobuf's
    2 GiB), which the sessions do not read for the shared weights. ORT's MoE op routing by itself
    comes last: its interleaved fc1 is the one copy made here, made after the folding of the others
    has released its transient copies."""
    from ascend_moe_onnx.models import runtime

    if not models:
        arrays = _block_arrays(block)
        formulations = ["ort", "onnx"]
        if expert_weight_bytes(block) <= PADDED_MAX_WEIGHT_BYTES:
            formulations.append("padded")
        else:
            log(f"model: padded formulation not built ({expert_weight_bytes(block) / 2**30:.1f} GiB of expert "
                f"weights > {PADDED_MAX_WEIGHT_BYTES / 2**30:.0f} GiB)")
        for f in formulations:
            path = os.path.join(workdir, f"{f}.onnx")
            runtime.export_block(block, path=path, external_data=True, experts=f)
            models[f] = (path, _shared_for(path, arrays))
        models["ort-moe"] = None  # made after the others' sessions
    out = {}
    for n in list(models):
        if only is not None and n != only:
            continue
        if n == "ort-moe" and models[n] is None:
            path = os.path.join(workdir, "ort-moe.onnx")
            weights = ort_moe_model(block, path)
            if weights is None:
                del models[n]
                continue
            models[n] = (path, weights)
        model_path, shared = models[n]
        out[n] = shared_session(model_path, shared, threads, arena)
        gc.collect()
        log(f"model: {n} session{'' if arena else ' (no arena)'} open: resident "
            f"{(_status_kib('VmRSS') or 0) / 2**20:.2f} GiB, peak so far {(_status_kib('VmHWM') or 0) / 2**20:.2f} GiB")
    return out


def _rotation(fns: list):
    """One callable that calls each of ``fns`` once, in order: one pass over a case's rotation, so
    that every sample covers every input of it (the bound is their average; a sample of single
    calls would keep the cheapest input's time)."""
    def run():
        for fn in fns:
            fn()

    return run


# ---- the suite -----------------------------------------------------------------------------------

def _agreement(got: np.ndarray, ref: np.ndarray) -> float:
    """Fraction of rows within TOLERANCE (relative to the reference's largest value)."""
    if ref.size == 0:
        return 1.0
    scale = max(float(np.abs(ref).max()), 1e-30)
    return float(np.mean(np.abs(got - ref).max(axis=1) / scale <= TOLERANCE))


def _inputs(block, T: int, rotation: int) -> list:
    """The inputs a case rotates through: ``rotation`` different ones up to ROTATE_MAX_TOKENS
    tokens (different experts per call, as in decode), else one."""
    n = rotation if T <= ROTATE_MAX_TOKENS else 1
    return [block.example_inputs(T, seed=7 + i)[0] for i in range(n)]


def run(plan: ModelPlan, repeats: int, min_sample_s: float, log=print) -> list[dict]:
    """Per block: export every formulation once, open the sessions (weights shared with torch), then
    per (threads, tokens) check every candidate against torch, measure peak memory and time them
    interleaved on the same rotation of inputs; one result dict per case."""
    import time

    results = []
    for name in plan.blocks:
        block = build_block(name, plan.size, plan.intermediate)
        cfg = block.cfg
        inputs = {T: _inputs(block, T, plan.rotation) for T in plan.tokens}
        with tempfile.TemporaryDirectory(prefix="moe-bench-") as workdir:
            models: dict = {}
            for threads in plan.threads:
                rates = machine_rates(threads)
                sessions = _sessions(block, workdir, threads, True, models, log)
                rows = []
                for T in plan.tokens:
                    xs = inputs[T]
                    runners = {n: [common.bound_runner(s, {"hidden_states": x.numpy()}) for x in xs]
                               for n, s in sessions.items() if n != "padded" or T <= PADDED_MAX_TOKENS}

                    def torch_call(x, block=block):  # bound now: the loop deletes it later
                        with torch.no_grad():
                            return block.forward_native(x)

                    with common.torch_threads(threads):
                        refs, slowest = [], 0.0
                        for x in xs:
                            t0 = time.perf_counter()
                            refs.append(torch_call(x)[0].numpy())
                            slowest = max(slowest, time.perf_counter() - t0)
                        agree = {}
                        r: common.BoundRun | None
                        rs: list[common.BoundRun] | None
                        for n, rs in runners.items():
                            agree[n] = 1.0
                            for r, ref in zip(rs, refs):
                                t0 = time.perf_counter()
                                r()
                                slowest = max(slowest, time.perf_counter() - t0)
                                agree[n] = min(agree[n], _agreement(common.bound_output(r, 0), ref))
                        r = rs = None  # a runner holds its session: none may outlive the timing
                        fns = {n: _rotation(rs) for n, rs in runners.items()}
                        fns["torch"] = _rotation([lambda x=x: torch_call(x) for x in xs])
                        n_rep = plan.slow_repeats if slowest > SLOW_CALL_S else max(repeats, plan.min_repeats)
                        t, load, attempts = timing.measure_quietly(fns, n_rep, min_sample_s, threads)
                        for v in t.values():  # per call: a rotation is len(xs) calls
                            v.samples = [x / len(xs) for x in v.samples]
                    # probes after every case, the best kept: on a shared machine a neighbour's
                    # memory traffic lowers a probe as much as a candidate, and the bound is the
                    # fastest the machine goes
                    rates = {key: max(v, rates[key]) if key in ("matmul_flops", "read_bytes") else v
                             for key, v in machine_rates(threads).items()}
                    bound = lower_bound(block, xs, rates)
                    time_s = {n: v.median for n, v in t.items()}
                    best_s = {n: min(v.samples) for n, v in t.items()}
                    row = {
                        "suite": "model", "size": plan.size, "block": name, "preset": block.preset,
                        "hidden": cfg.hidden, "experts": cfg.experts, "k": cfg.top_k, "intermediate": cfg.intermediate,
                        "shared": cfg.shared, "dtype": "float32", "threads": threads, "tokens": T,
                        "rotation": len(xs), "repeats": n_rep,
                        "time_s": time_s, "best_s": best_s,
                        "spread": {n: round(v.spread, 4) for n, v in t.items()},
                        "samples_s": {n: v.samples for n, v in t.items()},
                        "speedup": {n: (best_s[n] / best_s[FUSED] if n in t else None) for n in BASELINES},
                        "bound_s": bound["seconds"], "bound": bound, "rates": rates,
                        "share": {n: bound["seconds"] / s for n, s in best_s.items()},
                        "share_dram": {n: bound["seconds_dram"] / s for n, s in best_s.items()},
                        "agreement": agree, "other_load_cores": load, "attempts": attempts,
                    }
                    rows.append(row)
                    log(f"model {name} I={cfg.intermediate} t={threads} T={T:<5d} bound "
                        f"{bound['seconds'] * 1e3:8.2f} ms ({bound['read_probe']})  "
                        + " ".join(f"{n}={s * 1e3:.2f}ms({row['share'][n] * 100:.0f}%)" for n, s in best_s.items()))
                    del runners, fns
                del sessions
                gc.collect()
                peak_kib = _status_kib("VmHWM") or 0
                peaks, peak_before = _peaks(block, workdir, models, inputs, log)
                process_peak = max(peak_kib, peak_before) / 1024
                for row in rows:
                    row["peak_mib"] = peaks[row["tokens"]]
                    row["process_peak_mib"] = process_peak
                results += rows
                log(f"model {name}: process peak resident memory {process_peak / 1024:.2f} GiB")
            del models  # holds views of the block's weights and ORT's MoE op's fc1
        del block, inputs
        gc.collect()
    return results


def _peaks(block, workdir: str, models: dict, inputs: dict, log) -> tuple[dict, int]:
    """tokens -> candidate -> peak memory growth of one call on the case's first input (MiB), one
    arena-less session at a time; and the process's peak resident memory (KiB) seen before each
    reset of it. glibc is told to return freed memory for the measurement, then to keep blocks
    below 32 MiB again (the timing of the next block runs as before)."""
    _return_freed_memory()
    peaks: dict = {T: {} for T in inputs}
    seen = 0
    if models.get("ort-moe") is not None:  # its fc1 again made last, after the others' folding
        models["ort-moe"] = None
        gc.collect()
    for n in list(models):
        sess = _sessions(block, workdir, 1, False, models, log, only=n)[n]
        fn: common.BoundRun | None = None
        for T, xs in inputs.items():
            if n == "padded" and T > PADDED_MAX_TOKENS:
                continue
            fn = common.bound_runner(sess, {"hidden_states": xs[0].numpy()})
            fn()  # first call: lazy initialisation is not the call's working memory
            seen = max(seen, _status_kib("VmHWM") or 0)
            peaks[T][n] = peak_growth_mib(fn)
        fn = None  # its binding holds the session
        del sess
        if n == "ort-moe":
            models[n] = None
        gc.collect()
    with common.torch_threads(1), torch.no_grad():
        for T, xs in inputs.items():
            block.forward_native(xs[0])
            seen = max(seen, _status_kib("VmHWM") or 0)
            peaks[T]["torch"] = peak_growth_mib(lambda x=xs[0]: block.forward_native(x))
    seen = max(seen, _status_kib("VmHWM") or 0)
    _keep_freed_memory()
    return peaks, seen


def table(rows: list[dict]) -> str:
    """Markdown table: per case, each candidate's fastest-sample time, its share of the bound and
    peak memory growth of one call; the default (ort) and onnx formulations relative to the best of
    ort-moe and torch; the process's peak resident memory over the block."""
    head = ["block", "H/E/k/I", "thr", "tokens", "bound ms"] + [f"{n} ms (share, MiB)" for n in CANDIDATES] \
        + ["ort vs best(ort-moe, torch)", "onnx vs best", "onnx vs ort", "ort share of DRAM-rate bound",
           "process peak GiB"]
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
                  f"{r['share_dram']['ort'] * 100:.0f}%" if "share_dram" in r else "-",
                  f"{r['process_peak_mib'] / 1024:.1f}" if r.get("process_peak_mib") else "-"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def targets(rows: list[dict]) -> list[tuple[str, str, bool]]:
    """The model-level targets on the full-size rows: (target, measured, met)."""
    out = []
    for r in rows:
        if r.get("size") != "full":
            continue
        case = f"model {r['block']} {r['tokens']} tok, {r['threads']} thr"
        best = {n: r["best_s"][n] for n in ("ort-moe", "torch") if n in r["best_s"]}
        fastest = min(best, key=best.__getitem__)
        rel = r["best_s"][FUSED] / best[fastest]
        out.append((f"{case}: {FUSED} within 1.1x of the best of ort-moe and torch",
                    f"{rel:.2f}x ({fastest})", rel <= 1.1))
        if "onnx" in r["best_s"]:  # within 2x of the best baseline, and of ort itself (the stricter reading)
            rel = r["best_s"]["onnx"] / best[fastest]
            out.append((f"{case}: onnx within 2x of the best of ort-moe and torch", f"{rel:.2f}x ({fastest})",
                        rel <= 2))
            rel = r["best_s"]["onnx"] / r["best_s"][FUSED]
            out.append((f"{case}: onnx within 2x of {FUSED}", f"{rel:.2f}x", rel <= 2))
        if r["tokens"] in SHARE_TARGETS:
            want, got = SHARE_TARGETS[r["tokens"]], r["share"][FUSED]
            out.append((f"{case}: {FUSED} >= {want * 100:.0f}% of the routed-rows bound",
                        f"{got * 100:.0f}% ({r['bound'].get('read_probe', 'dram')} probe; "
                        f"{r['share_dram'][FUSED] * 100:.0f}% of the DRAM-rate bound)", got >= want))
    return out
