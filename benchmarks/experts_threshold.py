"""Where the ``ort`` formulation's ``If`` should switch from MoeRoutedExperts to ONNX Runtime's
MoE op: one block exported twice (every call through MoeRoutedExperts, every call through the MoE
op), both sessions on torch's weights, timed interleaved in one process at each token count.

    python -m ascend_moe_onnx.benchmarks.experts_threshold [--blocks B,B] [--tokens T,T] [--repeats N]

Prints, per block and token count, both times and MoeRoutedExperts / MoE op (< 1: the library's
kernel is faster) and checks that both branches give the same output (max rel difference ≤ 1e-4);
``exporters.experts_graph.OWN_KERNEL_MAX_ROWS`` is set from such a run.
"""

from __future__ import annotations

import argparse
import os
import tempfile

import numpy as np

from ascend_moe_onnx.exporters import experts_graph
from ascend_moe_onnx.models import runtime

from . import common, model, timing


def run(blocks, tokens, repeats: int, size: str = "full", log=print) -> list[dict]:
    """One dict per (block, tokens): the two branches' fastest times and their ratio (``size``:
    "tiny" for a smoke run)."""
    rows = []
    for name in blocks:
        block = model.build_block(name, size)
        arrays = model._block_arrays(block)
        with tempfile.TemporaryDirectory(prefix="moe-threshold-") as workdir:
            sessions = {}
            saved = experts_graph.OWN_KERNEL_MAX_ROWS
            try:
                for branch, limit in (("own", 2**62), ("moe", -1)):
                    experts_graph.OWN_KERNEL_MAX_ROWS = limit
                    path = os.path.join(workdir, f"{branch}.onnx")
                    runtime.export_block(block, path=path, external_data=True, experts="ort")
                    sessions[branch] = model.shared_session(path, model._shared_for(path, arrays), 1)
            finally:
                experts_graph.OWN_KERNEL_MAX_ROWS = saved
            for T in tokens:
                x = block.example_inputs(T, seed=7)[0].numpy()  # >= 64 tokens select (nearly) every expert
                fns = {n: common.bound_runner(s, {"hidden_states": x}) for n, s in sessions.items()}
                t = timing.measure(fns, repeats=repeats, min_sample_s=0.05)
                own, moe = min(t["own"].samples), min(t["moe"].samples)
                outs = [common.bound_output(fns[n], 0) for n in ("own", "moe")]
                diff = float(np.abs(outs[0] - outs[1]).max() / max(float(np.abs(outs[1]).max()), 1e-30))
                if diff > 1e-4:
                    raise AssertionError(f"{name} T={T}: the two branches differ (max rel {diff:.3g})")
                rows.append({"block": name, "tokens": T, "routed_rows": T * block.cfg.top_k, "own_s": own,
                             "moe_s": moe, "ratio": own / moe, "max_rel_diff": diff})
                log(f"threshold {name} T={T:5d} rows={T * block.cfg.top_k:6d}  MoeRoutedExperts {own * 1e3:8.2f} ms"
                    f"  MoE op {moe * 1e3:8.2f} ms  ratio {own / moe:.2f}")
                del fns, t
            del sessions
    return rows


def main(argv=None) -> None:
    """Command line (see the module docstring)."""
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", default=",".join(model.BLOCKS))
    p.add_argument("--tokens", default="64,128,256,512")
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args(argv)
    with common.torch_threads(1):
        run(a.blocks.split(","), [int(t) for t in a.tokens.split(",")], a.repeats)


if __name__ == "__main__":
    main()
