"""The launcher behind ``torchrun --nproc-per-node N -m ascend_moe_onnx.ep PRESET ...``.

Every rank builds the preset's layer (random seeded weights or ``--weights``), loads (``--onnx
DIR``, written by ``moe-onnx export --ep-ranks N``) or exports its router and expert graphs, checks
at start-up that all ranks hold graphs of one layer, runs the token batches through the
expert-parallel layer, checks its tokens against the single-process plain-torch layer, and rank 0
prints one summary line. Exit status: 0 all checks passed, 1 a mismatch or any failure, 2 bad
arguments.

Without torchrun's environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) it runs as one rank.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

# torch_npu, if installed without CANN, breaks import torch unless autoload is off
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
FAULTS = ("exit", "hang")
FAULT_STEPS = ("startup", "dispatch")


def build_parser() -> argparse.ArgumentParser:
    """Arguments of the launcher."""
    p = argparse.ArgumentParser(prog="python -m ascend_moe_onnx.ep", description=__doc__.split("\n")[0])
    p.add_argument("preset", help="a routed layer preset (mixtral, qwen3-moe, deepseek-v3, ...)")
    p.add_argument("--size", default="tiny", choices=("tiny", "full"))
    p.add_argument("--tokens", default="16", metavar="T",
                   help="tokens per rank (default 16); also 'T0,T1,...' per rank, and batches "
                        "separated by ';' (e.g. '5,0;0,0')")
    p.add_argument("--weights", metavar="DIR", help="safetensors checkpoint holding the MoE layer")
    p.add_argument("--layer", metavar="N|PREFIX", help="which MoE layer of --weights")
    p.add_argument("--quant", choices=("int8",), help="dispatch int8 tokens with per-token scales")
    p.add_argument("--onnx", metavar="DIR",
                   help="exported layer (moe-onnx export PRESET --ep-ranks N -o DIR); default: export")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights and tokens")
    p.add_argument("--backend", default="gloo", help="torch.distributed backend (gloo; hccl on Ascend)")
    p.add_argument("--provider", default="cpu", choices=("cpu", "cann"),
                   help="ONNX Runtime execution provider of the sessions (cann: device LOCAL_RANK; "
                        "docs/ascend.md)")
    p.add_argument("--timeout", type=float, default=60.0, metavar="S",
                   help="seconds a collective of the layer may wait for the other ranks (default 60)")
    p.add_argument("--startup-timeout", type=float, default=600.0, metavar="S",
                   help="seconds the ranks may wait for each other at start-up (imports, exports; "
                        "default 600) and around the benchmark baseline")
    p.add_argument("--threads", type=int, metavar="N",
                   help="ONNX Runtime intra-op threads per rank (default: cores / ranks on this host, >= 1)")
    p.add_argument("--bench", type=int, default=0, metavar="ITERS",
                   help="also time ITERS calls of the first batch against the single-process "
                        "exported layer on rank 0")
    p.add_argument("--inject-fault", metavar="RANK:KIND@STEP",
                   help=f"testing aid: rank RANK {'/'.join(FAULTS)}s at {'/'.join(FAULT_STEPS)}")
    return p


class UsageError(ValueError):
    """Bad launcher arguments (exit 2)."""


def parse_tokens(text: str, ranks: int) -> list[list[int]]:
    """``--tokens`` -> batches of per-rank token counts."""
    batches = []
    for part in text.split(";"):
        try:
            counts = [int(t) for t in part.split(",")]
        except ValueError:
            raise UsageError(f"--tokens: expected T or T0,...,T{ranks - 1} per batch, got '{text}'") from None
        if len(counts) == 1:
            counts *= ranks
        if len(counts) != ranks or any(c < 0 for c in counts):
            raise UsageError(f"--tokens: batch '{part}' needs 1 or {ranks} non-negative counts")
        batches.append(counts)
    return batches


def parse_fault(text: str | None):
    """``--inject-fault`` -> (rank, kind, step) or None."""
    if not text:
        return None
    try:
        rank_text, rest = text.split(":")
        kind, step = rest.split("@")
        rank = int(rank_text)
    except ValueError:
        raise UsageError(f"--inject-fault: expected RANK:KIND@STEP, got '{text}'") from None
    if kind not in FAULTS or step not in FAULT_STEPS:
        raise UsageError(f"--inject-fault: kind in {FAULTS}, step in {FAULT_STEPS}, got '{text}'")
    return rank, kind, step


def _maybe_fault(fault, rank: int, step: str, hang_s: float) -> None:
    if fault and fault[0] == rank and fault[2] == step:
        print(f"ep: rank {rank}: injected fault '{fault[1]}' at {step}", file=sys.stderr, flush=True)
        if fault[1] == "exit":
            os._exit(17)
        time.sleep(hang_s)  # longer than anyone may wait
        os._exit(18)


def _env_rank() -> tuple[int, int, int]:
    """(rank, world size, ranks on this host) from torchrun's environment; one rank without it."""
    if "RANK" not in os.environ:
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    return rank, world, int(os.environ.get("LOCAL_WORLD_SIZE", world))


def _gather(obj) -> list:
    import torch.distributed as dist

    from .artefacts import EPError

    out = [None] * dist.get_world_size()
    try:
        dist.all_gather_object(out, obj)
    except Exception as e:
        raise EPError(f"rank {dist.get_rank()}: exchange with the other ranks failed: a peer rank "
                      f"died or timed out ({type(e).__name__}: {str(e).strip()[:300]})") from e
    return out


def _load(args, block, rank: int, world: int, threads: int, workdir: str):
    """This rank's sessions and description: from --onnx DIR or a fresh export."""
    from . import artefacts as a

    quant = args.quant or ""
    if args.onnx:
        manifest = a.read_manifest(args.onnx)
        layout = a.Layout(**manifest["layout"])
        if layout.ranks != world:
            raise a.EPError(f"{args.onnx}: exported for {layout.ranks} ranks, launched with {world}")
        if layout.quant != quant:
            raise a.EPError(f"{args.onnx}: exported with quant '{layout.quant or 'none'}', launched "
                            f"with '{quant or 'none'}'")
        where = args.onnx
    else:
        a.check_preset(block, world)
        manifest = a.export_layer(block, world, workdir, quant, only_rank=rank)
        layout, where = a.Layout(**manifest["layout"]), workdir

    router_path, expert_path = Path(where) / a.ROUTER, Path(where) / a.expert_file(rank)
    for path in (router_path, expert_path):
        if not path.is_file():
            raise a.EPError(f"rank {rank}: missing {path}")
    router = session(router_path, args.provider, threads)
    expert = session(expert_path, args.provider, threads)
    desc = a.describe(router, expert, layout, a.sha256_file(router_path))
    return router, expert, layout, desc


def session(path, provider: str, threads: int):
    """An ORT session of one graph with the custom-op library: CPU, or the CANN EP on device
    LOCAL_RANK (an EPError, not a silent CPU run, when CANN cannot run here)."""
    import warnings

    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    from .artefacts import EPError

    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = threads, 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ort_custom_ops.CannFallbackWarning)
        try:
            return ort_custom_ops.inference_session(str(path), provider, so,
                                                    device_id=int(os.environ.get("LOCAL_RANK", 0)))
        except ort_custom_ops.CannFallbackWarning as w:
            raise EPError(f"rank {os.environ.get('RANK', 0)}: {w}") from None


def _max(values) -> float:
    return max([float(v) for v in values] or [0.0])


def main(argv: list[str] | None = None) -> int:
    """Run the launcher; returns the exit status."""
    args = build_parser().parse_args(argv)
    try:
        rank, world, local_world = _env_rank()
        batches = parse_tokens(args.tokens, world)
        fault = parse_fault(args.inject_fault)
        for name in ("timeout", "startup_timeout"):
            if getattr(args, name) <= 0:
                raise UsageError(f"--{name.replace('_', '-')} must be > 0, got {getattr(args, name)}")
        if args.bench < 0:
            raise UsageError(f"--bench must be >= 0, got {args.bench}")
    except UsageError as e:
        print(f"ep: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    threads = args.threads or max(1, (os.cpu_count() or 1) // max(1, local_world))
    try:
        return _run(args, rank, world, threads, batches, fault)
    except Exception as e:  # every failure: one clear line per rank, non-zero exit
        from .artefacts import EPError

        text = str(e) if isinstance(e, EPError) else f"{type(e).__name__}: {e}"
        if not text.startswith("rank "):
            text = f"rank {rank}: {text}"
        print(f"ep: error: {text}", file=sys.stderr, flush=True)
        return EXIT_FAILED


def _run(args, rank: int, world: int, threads: int, batches, fault) -> int:
    import torch
    import torch.distributed as dist

    from ascend_moe_onnx.models import presets

    from . import check
    from .artefacts import EPError
    from .layer import EPLayer, Traffic

    # The torch glue (sort, gathers, the combine) works on small tensors: one thread. Measured on
    # a loaded 2-core machine, 2 OpenMP threads made a 256-token call 30x slower (spin-waits).
    torch.set_num_threads(1)
    # Two timeouts: ranks reach the start-up exchange at very different times (imports, exports),
    # while the layer's collectives must notice a dead or stuck peer quickly.
    device = collective_device(args.backend)  # before the group: HCCL needs torch_npu imported
    dist.init_process_group(args.backend, timeout=timedelta(seconds=args.startup_timeout))
    try:
        # Each rank builds the whole layer (seeded, so identical everywhere): its expert slice for
        # the export and the reference for the check. A rank's failure reaches every rank below.
        error, loaded = None, None
        with tempfile.TemporaryDirectory(prefix=f"ep-rank{rank}-") as workdir:
            try:
                block = presets.build(args.preset, args.size, "float32", weights=args.weights,
                                      layer=args.layer, seed=args.seed)
                loaded = _load(args, block, rank, world, threads, workdir)
            except Exception as e:
                error = str(e) if isinstance(e, EPError) else f"{type(e).__name__}: {e}"
            _maybe_fault(fault, rank, "startup", 2 * args.startup_timeout + 30)
            reports = _gather((error, None if loaded is None else loaded[3]))
        failed = [(r, err) for r, (err, _) in enumerate(reports) if err]
        if failed:
            r, err = failed[0]
            raise EPError(err if err.startswith("rank ") else f"rank {r}: {err}")
        from .artefacts import check_consistent

        check_consistent([d for _, d in reports])
        assert loaded is not None  # no rank failed, so this one loaded its layer
        router, expert, layout, _ = loaded
        if layout.experts != block.cfg.experts or layout.top_k != block.cfg.top_k:
            raise EPError(f"rank {rank}: the exported layer has {layout.experts} experts / top-{layout.top_k}, "
                          f"preset {args.preset} has {block.cfg.experts} / top-{block.cfg.top_k}")
        group = dist.new_group(backend=args.backend, timeout=timedelta(seconds=args.timeout))
        layer = EPLayer(router, expert, layout, rank, group, device)

        stats: dict[str, Any] = dict(tokens=0, abs=0.0, scale=0.0, mismatched=0, received=[], pipe_abs=0.0,
                     bound_use=0.0, int8_abs=0.0, traffic=Traffic())
        first_inputs = None
        for b, counts in enumerate(batches):
            inputs = block.example_inputs(counts[rank], seed=args.seed * 7919 + 1000 * (b + 1) + rank)
            first_inputs = first_inputs if first_inputs is not None else inputs
            _maybe_fault(fault, rank, "dispatch", 2 * args.timeout + 30)
            got = layer(inputs)
            ref, ref_idx = check.reference(block, inputs)
            stats["tokens"] += counts[rank]
            stats["received"].append(got.received)
            stats["traffic"].add(got.traffic)
            stats["mismatched"] += int((got.expert_idx.to(torch.int64) != ref_idx.to(torch.int64)).any(1).sum())
            if counts[rank]:
                err = (got.output - ref).abs()
                stats["scale"] = max(stats["scale"], float(ref.abs().max()))
                if layout.quant == "int8":
                    bound = check.int8_bound(block, inputs)
                    slack = check.FLOAT32_TOL * float(ref.abs().max())
                    stats["int8_abs"] = max(stats["int8_abs"], float(err.max()))
                    stats["bound_use"] = max(stats["bound_use"], float((err / (bound + slack)).max()))
                    pipe = check.reference_dequantised(block, inputs)
                    stats["pipe_abs"] = max(stats["pipe_abs"], float((got.output - pipe).abs().max()))
                else:
                    stats["abs"] = max(stats["abs"], float(err.max()))
        bench = _bench(args, block, layer, first_inputs, batches[0], rank, world, threads) if args.bench else None
        all_stats = _gather(stats)
    finally:
        _shutdown()
    if rank == 0:
        ok, line = summarise(args, world, batches, layout, all_stats)
        print(line, flush=True)
        if bench:
            print(bench, flush=True)
    else:
        ok, _ = summarise(args, world, batches, layout, all_stats)
    return EXIT_OK if ok else EXIT_FAILED


def collective_device(backend: str) -> str:
    """The device whose tensors ``backend``'s collectives take: the host for gloo, this rank's NPU
    for HCCL (torch_npu imported here), its GPU for NCCL."""
    local = int(os.environ.get("LOCAL_RANK", 0))
    if backend == "hccl":
        import torch
        import torch_npu  # noqa: F401  (registers the npu device and the HCCL backend)

        torch.npu.set_device(local)  # type: ignore[attr-defined]  # torch_npu adds torch.npu
        return f"npu:{local}"
    if backend == "nccl":
        import torch

        torch.cuda.set_device(local)
        return f"cuda:{local}"
    return "cpu"


def _shutdown() -> None:
    import torch.distributed as dist

    if dist.is_initialized():
        # A dead peer may make the teardown fail; the run's error is what counts.
        with contextlib.suppress(Exception):
            dist.destroy_process_group()


def summarise(args, world: int, batches, layout, all_stats: list[dict]) -> tuple[bool, str]:
    """(passed, the one summary line) from every rank's figures."""
    from . import check

    scale = _max(s["scale"] for s in all_stats) or 1.0
    mismatched = sum(s["mismatched"] for s in all_stats)
    tokens = sum(s["tokens"] for s in all_stats)
    received = [r for s in all_stats for r in s["received"]]  # one per (rank, batch)
    empty = sum(1 for r in received if r == 0)
    parts = [f"ep: {args.preset} size={args.size} ranks={world} experts={layout.experts} "
             f"local={layout.local_experts} top_k={layout.top_k} quant={layout.quant or 'none'}",
             f"batches={len(batches)} tokens={tokens} received/rank min={min(received)} max={max(received)} "
             f"empty-receivers={empty}",
             f"choices={'identical' if not mismatched else f'{mismatched} tokens differ'}"]
    ok = not mismatched
    if layout.quant == "int8":
        pipe = _max(s["pipe_abs"] for s in all_stats) / scale
        use = _max(s["bound_use"] for s in all_stats)
        err = _max(s["int8_abs"] for s in all_stats) / scale
        ok = ok and pipe <= check.FLOAT32_TOL and use <= 1.0
        parts.append(f"max-rel-err={err:.2e} bound-use={use:.3f} (limit 1) "
                     f"vs-dequantised-ref={pipe:.2e} (limit {check.FLOAT32_TOL:.0e})")
    else:
        rel = _max(s["abs"] for s in all_stats) / scale
        ok = ok and rel <= check.FLOAT32_TOL
        parts.append(f"max-rel-err={rel:.2e} (limit {check.FLOAT32_TOL:.0e})")
    parts.append("OK" if ok else "FAILED")
    return ok, " ".join(parts)


def _bench(args, block, layer, inputs, counts, rank: int, world: int, threads: int) -> str | None:
    """Time the EP layer on the first batch, then (rank 0) the single-process exported layer on all
    ranks' tokens; returns rank 0's report line ('ep-bench: ' + JSON)."""
    import onnxruntime as ort
    import torch
    import torch.distributed as dist

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.models.runtime import export_block, run_ort

    iters = args.bench
    layer(inputs)  # warm-up
    dist.barrier()
    start = time.perf_counter()
    traffic = None
    for _ in range(iters):
        traffic = layer(inputs).traffic
    assert traffic is not None  # iters > 0: main() rejects a negative --bench, 0 skips the benchmark
    elapsed = torch.tensor([time.perf_counter() - start], dtype=torch.float64)
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    ep_rate = sum(counts) * iters / float(elapsed)
    sent = torch.tensor([traffic.dispatch, traffic.dispatch_remote, traffic.dispatch_ideal,
                         traffic.combine, traffic.combine_remote, traffic.combine_ideal], dtype=torch.float64)
    dist.all_reduce(sent)
    line = None
    if rank == 0:
        # Baseline in this process: the whole layer's graph, all cores, on every rank's tokens.
        total = sum(counts)
        all_inputs = block.example_inputs(total, seed=4321)
        data = export_block(block)
        cores = os.cpu_count() or 1
        with torch.no_grad():
            like = block(*all_inputs)
        rates = {}
        for n in sorted({cores, 1}):
            session = ort.InferenceSession(data, ort_custom_ops.session_options(n),
                                           providers=["CPUExecutionProvider"])
            run_ort(session, block, all_inputs, like)  # warm-up
            t0 = time.perf_counter()
            for _ in range(iters):
                run_ort(session, block, all_inputs, like)
            rates[n] = total * iters / (time.perf_counter() - t0)
        single_rate = rates[cores]
        d, dr, di, c, cr, ci = (int(v) for v in sent)
        line = "ep-bench: " + json.dumps(dict(
            preset=args.preset, size=args.size, ranks=world, threads_per_rank=threads, tokens=total,
            tokens_per_rank=counts, quant=args.quant or "none", iters=iters, ep_tokens_per_s=ep_rate,
            single_tokens_per_s=single_rate, single_threads=cores, ratio=ep_rate / single_rate,
            single_1thread_tokens_per_s=rates[1], load_avg=os.getloadavg()[0],
            # bytes per call, summed over the ranks
            dispatch_bytes=d, dispatch_remote_bytes=dr, dispatch_ideal_bytes=di,
            combine_bytes=c, combine_remote_bytes=cr, combine_ideal_bytes=ci))
    dist.barrier()
    return line
