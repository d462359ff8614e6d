"""MoeInitRoutingV3 / MoeTokenPermute: the node in ONNX Runtime with the library against the physical
limit, a plain copy of the same output bytes, and against torch's ``argsort(stable=True)`` +
``index_select``, all in one process, interleaved.

``python -m ascend_moe_onnx.benchmarks.init_routing [--tokens 4096 --hidden 7168 --k 8 --experts 256
--threads 1,2]`` prints, per thread count, the median time of each candidate and the ratios:

- ``ort-init-routing``: a MoeInitRoutingV3 node (dropless, no quantisation, counts) with every output
  bound to a preallocated array (IO binding);
- ``ort-token-permute``: a MoeTokenPermute node, likewise;
- ``torch-argsort``: ``torch.argsort(ids, stable=True)`` then ``index_select(out=)`` of the rows;
- ``copy``: a contiguous copy of the output's bytes (``np.copyto``, split over the threads).

Every candidate writes the same output buffer, so each finds it as warm as the others. The copy
reads and writes N*K rows; the routing nodes read N rows (each K times) and write N*K rows, so a
ratio above 1 is possible.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ThreadPoolExecutor

import ml_dtypes
import numpy as np
import torch
from onnx import TensorProto, helper

from . import common, timing

DOMAIN = "ascend.moe"


def _model(op_type: str, inputs: list, outputs: list, **attrs) -> bytes:
    node = helper.make_node(op_type, [i.name for i in inputs], [o.name for o in outputs], domain=DOMAIN, **attrs)
    graph = helper.make_graph([node], op_type, inputs, outputs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(DOMAIN, 1)],
                              ir_version=10)
    return model.SerializeToString()


def _copy(src: np.ndarray, dst: np.ndarray, threads: int, pool):
    if threads <= 1:
        return lambda: np.copyto(dst, src)
    parts = np.array_split(np.arange(src.shape[0]), threads)

    def run():
        list(pool.map(lambda p: np.copyto(dst[p[0]:p[-1] + 1], src[p[0]:p[-1] + 1]), parts))
    return run


def candidates(tokens: int, hidden: int, k: int, experts: int, threads: int, pool) -> dict:
    """The timed callables of one case (outputs preallocated; the nodes' results checked once)."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((tokens, hidden), dtype=np.float32).astype(ml_dtypes.bfloat16)
    ids = np.argsort(rng.random((tokens, experts)), axis=1)[:, :k].astype(np.int32)  # k distinct experts
    pairs = tokens * k
    out = np.empty((pairs, hidden), ml_dtypes.bfloat16)
    src = np.ones_like(out)
    bf16, i32, i64, f32 = TensorProto.BFLOAT16, TensorProto.INT32, TensorProto.INT64, TensorProto.FLOAT
    vi = helper.make_tensor_value_info
    init = _model("MoeInitRoutingV3", [vi("x", bf16, [tokens, hidden]), vi("expert_idx", i32, [tokens, k])],
                  [vi("expanded_x", bf16, [pairs, hidden]), vi("expanded_row_idx", i32, [pairs]),
                   vi("expert_tokens_count_or_cumsum", i64, [experts]), vi("expanded_scale", f32, [pairs])],
                  expert_num=experts, expert_tokens_num_type=1, active_num=pairs)
    permute = _model("MoeTokenPermute", [vi("tokens", bf16, [tokens, hidden]), vi("indices", i32, [tokens, k])],
                     [vi("permuted_tokens", bf16, [pairs, hidden]), vi("sorted_indices", i32, [pairs])])
    init_run = common.bound_runner(
        common.session(init, threads, library=True), {"x": x, "expert_idx": ids},
        {"expanded_x": out, "expanded_row_idx": np.empty(pairs, np.int32),
         "expert_tokens_count_or_cumsum": np.empty(experts, np.int64), "expanded_scale": np.empty(pairs, np.float32)})
    permute_run = common.bound_runner(
        common.session(permute, threads, library=True), {"tokens": x, "indices": ids},
        {"permuted_tokens": out, "sorted_indices": np.empty(pairs, np.int32)})
    xt, idt, outt = common.to_torch(x), torch.from_numpy(ids.reshape(-1)), common.to_torch(out)

    def torch_argsort():
        with common.torch_threads(threads):
            order = torch.argsort(idt, stable=True)
            torch.index_select(xt, 0, order // k, out=outt)

    order = np.argsort(ids.reshape(-1), kind="stable")
    for run in (init_run, permute_run, torch_argsort):  # every candidate computes the same rows
        out[:] = 0
        run()
        assert np.array_equal(out.view(np.uint16), x[order // k].view(np.uint16))
    return {"ort-init-routing": init_run, "ort-token-permute": permute_run, "torch-argsort": torch_argsort,
            "copy": _copy(src, out, threads, pool)}


def main(argv: list[str] | None = None) -> int:
    """Run the cases and print one table per thread count."""
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--experts", type=int, default=256)
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=7)
    args = p.parse_args(argv)
    gib = args.tokens * args.k * args.hidden * 2 / 2**30
    print(f"{args.tokens} tokens x {args.hidden} bfloat16, k = {args.k}, {args.experts} experts: "
          f"{gib:.3f} GiB written per call")
    with ThreadPoolExecutor(max(int(t) for t in args.threads.split(","))) as pool:
        for threads in (int(t) for t in args.threads.split(",")):
            c = candidates(args.tokens, args.hidden, args.k, args.experts, threads, pool)
            t = timing.measure(c, repeats=args.repeats, min_sample_s=0.05, warmup_s=timing.warmup_for(threads))
            print(f"threads {threads}:")
            for name, tm in t.items():
                print(f"  {name:18s} {tm.median * 1e3:9.2f} ms  {gib / tm.median:6.2f} GiB/s written  "
                      f"spread {tm.spread:.2f}")
            best = {n: min(tm.samples) for n, tm in t.items()}  # least disturbed by other processes
            for name in ("ort-init-routing", "ort-token-permute", "torch-argsort"):
                print(f"  {name} / copy bandwidth: {timing.ratio(t['copy'], t[name]):.2f} (medians), "
                      f"{best['copy'] / best[name]:.2f} (best samples)")
            for name in ("ort-init-routing", "ort-token-permute"):
                print(f"  {name} speed-up over torch-argsort: {timing.ratio(t['torch-argsort'], t[name]):.2f}x")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
