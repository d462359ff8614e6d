"""MoeTokenUnpermute / MoeFinalizeRoutingV2 (the weighted gather that ends an MoE layer) in ONNX Runtime
with the library, against torch doing the same with index_select + a weighted sum, and against the
physical limit: a contiguous copy moving as many bytes in the same process.

Candidates (outputs preallocated and reused):
- ``ort-unpermute``: the MoeTokenUnpermute node (probs float32, as vllm-ascend passes top-k weights);
- ``ort-finalize``: the MoeFinalizeRoutingV2 node, drop_pad_mode 2, scales float32, no residual;
- ``ort-finalize+x1``: the same with a residual row x1 (one more row read per token);
- ``torch-index_select+bmm``: ``index_select(out=)`` of the N*K rows, then ``bmm(w[:, None], rows)``
  into the output (bfloat16 bmm accumulates in float32);
- ``torch-index_select+mul+sum``: the same gather, then ``(rows * w[..., None]).sum(1)``, as
  Megatron's unpermute writes it;
- ``copy``: ``np.copyto`` of a buffer of (read + written bytes of the op) / 2 bytes, split over the
  case's threads: the same traffic as the op, at the machine's copy speed.

"fraction of copy" = copy time / op time (the op's read + written bytes per second over the copy's).
Run: ``python -m ascend_moe_onnx.benchmarks.finalize [--tokens 4096] [--hidden 7168] [--k 8]``.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import ml_dtypes
import numpy as np
import torch
from onnx import TensorProto, helper

from . import common, timing
from .rerouting import _split_copy

_ONNX = {"bfloat16": (ml_dtypes.bfloat16, TensorProto.BFLOAT16), "float16": (np.float16, TensorProto.FLOAT16),
         "float32": (np.float32, TensorProto.FLOAT)}


def _node_model(op: str, names: list[str], types: dict, attrs: dict) -> bytes:
    inputs = [helper.make_tensor_value_info(n, types[n], None) for n in names if n]
    out_type = types[names[0]]
    node = helper.make_node(op, names, ["y"], domain="ascend.moe", **attrs)
    graph = helper.make_graph([node], op, inputs, [helper.make_tensor_value_info("y", out_type, None)])
    m = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 20),
                                                                helper.make_opsetid("ascend.moe", 1)])
    return m.SerializeToString()


ALIGN = 64  # bytes: ONNX Runtime's allocator aligns its buffers so; NumPy's large arrays sit 16 past a page


def aligned_zeros(shape: tuple, dtype, align: int = ALIGN) -> np.ndarray:
    """Zeros of ``shape`` whose data starts on an ``align``-byte boundary (as ORT's own outputs)."""
    itemsize = np.dtype(dtype).itemsize
    n = int(np.prod(shape))
    raw = np.zeros(n * itemsize + align, np.uint8)
    start = -raw.ctypes.data % align
    return raw[start:start + n * itemsize].view(dtype).reshape(shape)


def run_case(tokens: int, hidden: int, k: int, dtype: str, threads: int, repeats: int = 5,
             min_sample_s: float = 0.05, seed: int = 0, align: int = ALIGN) -> dict:
    """Time every candidate on one shape; returns times, bandwidths and ratios. The output (bound
    to the nodes) starts on an ``align``-byte boundary (1: wherever NumPy puts it)."""
    np_type, elem = _ONNX[dtype]
    rs = np.random.RandomState(seed)
    rows = rs.standard_normal((tokens * k, hidden)).astype(np.float32).astype(np_type)
    idx = rs.permutation(tokens * k).astype(np.int32)
    w = rs.rand(tokens, k).astype(np.float32)
    x1 = rs.standard_normal((tokens, hidden)).astype(np.float32).astype(np_type)
    out = aligned_zeros((tokens, hidden), np_type, align)
    f32, i32 = TensorProto.FLOAT, TensorProto.INT32
    unpermute = common.session(_node_model("MoeTokenUnpermute", ["permuted_tokens", "sorted_indices", "probs"],
                                           {"permuted_tokens": elem, "sorted_indices": i32, "probs": f32}, {}),
                               threads, library=True)
    finalize_types = {"expanded_x": elem, "expanded_row_idx": i32, "x1": elem, "scales": f32}
    finalize = common.session(_node_model("MoeFinalizeRoutingV2", ["expanded_x", "expanded_row_idx", "", "", "",
                                                                   "scales"], finalize_types, {"drop_pad_mode": 2}),
                              threads, library=True)
    finalize_x1 = common.session(_node_model("MoeFinalizeRoutingV2", ["expanded_x", "expanded_row_idx", "x1", "", "",
                                                                      "scales"], finalize_types, {"drop_pad_mode": 2}),
                                 threads, library=True)
    y = {"y": out}
    candidates: dict[str, Callable[[], object]] = {
        "ort-unpermute": common.bound_runner(unpermute, {"permuted_tokens": rows, "sorted_indices": idx,
                                                         "probs": w}, y),
        "ort-finalize": common.bound_runner(finalize, {"expanded_x": rows, "expanded_row_idx": idx, "scales": w}, y),
        "ort-finalize+x1": common.bound_runner(finalize_x1, {"expanded_x": rows, "expanded_row_idx": idx, "x1": x1,
                                                             "scales": w}, y),
    }
    rows_t, out_t = common.to_torch(rows), common.to_torch(out)
    idx_t = torch.from_numpy(idx.astype(np.int64))
    w_t = torch.from_numpy(w).to(rows_t.dtype)
    gathered = torch.empty_like(rows_t)

    def index_select_bmm():
        torch.index_select(rows_t, 0, idx_t, out=gathered)
        torch.bmm(w_t[:, None, :], gathered.view(tokens, k, hidden), out=out_t.view(tokens, 1, hidden))

    def index_select_mul_sum():
        torch.index_select(rows_t, 0, idx_t, out=gathered)
        torch.sum(gathered.view(tokens, k, hidden) * w_t[:, :, None], dim=1, out=out_t)

    candidates["torch-index_select+bmm"] = index_select_bmm
    candidates["torch-index_select+mul+sum"] = index_select_mul_sum
    moved = rows.nbytes + out.nbytes + idx.nbytes + w.nbytes  # read + written by the op (no x1)
    src = np.ones(moved // 2, np.uint8)
    dst = aligned_zeros(src.shape, np.uint8, align)
    candidates["copy"] = _split_copy(dst, src, threads)
    with common.torch_threads(threads):
        t = timing.measure(candidates, repeats, min_sample_s, timing.warmup_for(threads))
    med = {n: v.median for n, v in t.items()}
    moved_by = {n: moved + (x1.nbytes if n == "ort-finalize+x1" else 0) for n in med}
    moved_by["copy"] = 2 * src.nbytes
    return {"tokens": tokens, "hidden": hidden, "k": k, "dtype": dtype, "threads": threads, "align": align,
            "time_s": med,
            "gb_per_s": {n: moved_by[n] / med[n] / 1e9 for n in med},
            "fraction_of_copy": {n: (moved_by[n] / med[n]) / (moved_by["copy"] / med["copy"]) for n in med
                                 if n != "copy"}}


def report(row: dict) -> str:
    """A Markdown table of one case."""
    lines = [f"{row['tokens']} tokens x {row['hidden']} {row['dtype']}, k = {row['k']}, {row['threads']} thread(s), "
             f"output aligned to {row['align']} bytes",
             "", "| candidate | ms | GB/s (read + written) | fraction of copy |", "|---|---:|---:|---:|"]
    for n, s in row["time_s"].items():
        frac = row["fraction_of_copy"].get(n)
        lines.append(f"| {n} | {s * 1e3:.1f} | {row['gb_per_s'][n]:.1f} | {'' if frac is None else f'{frac:.2f}'} |")
    return "\n".join(lines)


def main(argv=None) -> None:
    """Command line: one or more thread counts on one shape."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokens", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=7168)
    p.add_argument("--k", type=int, default=8)
    p.add_argument("--dtype", default="bfloat16", choices=sorted(_ONNX))
    p.add_argument("--threads", default="1,2")
    p.add_argument("--repeats", type=int, default=5)
    p.add_argument("--align", type=int, default=ALIGN,
                   help=f"output alignment in bytes (default {ALIGN}, as ORT's allocator; 1: NumPy's)")
    a = p.parse_args(argv)
    for threads in (int(t) for t in a.threads.split(",")):
        print(report(run_case(a.tokens, a.hidden, a.k, a.dtype, threads, a.repeats, align=a.align)), "\n",
              flush=True)


if __name__ == "__main__":
    main()
