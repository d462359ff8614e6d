"""The one harness for the CPU kernels' instruction-set paths: which paths this CPU can run, the
environment that forces one (ASCEND_MOE_CPU_ISA, read once per process by the library), and
``call_on_isa``, which runs a test module's function in a fresh process on a forced path and
returns its result. An ISA path is then a test parameter like any other."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

_CHILD = """
import importlib, pickle, sys
sys.path.insert(0, {root!r})
module, function = {target!r}.split(":")
with open({args!r}, "rb") as f:
    args = pickle.load(f)
result = getattr(importlib.import_module(module), function)(*args)
with open({result!r}, "wb") as f:
    pickle.dump(result, f)
"""


def cpu_flags() -> set[str]:
    """The CPU's feature flags from /proc/cpuinfo (x86-64 Linux; elsewhere none)."""
    try:
        return set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split())
    except (OSError, IndexError):
        return set()


def cpu_isa_paths() -> list[str]:
    """The ISA paths of the kernels this CPU can run (x86-64 Linux; elsewhere the baseline only)."""
    flags = cpu_flags()
    paths = ["baseline"]
    if {"avx2", "fma"} <= flags:
        paths.append("avx2")
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
        paths += ["avx512", "avx512-wide"]
    return paths


def isa_env(path: str) -> dict:
    """Environment that forces a path of cpu_isa_paths(): the AVX-512 build selects with the AVX2
    build's code ("avx512", the default on AMD CPUs) or its own ("avx512-wide")."""
    if path.startswith("avx512"):
        return dict(ASCEND_MOE_CPU_ISA="avx512",
                    ASCEND_MOE_CPU_SELECT="wide" if path == "avx512-wide" else "narrow")
    return dict(ASCEND_MOE_CPU_ISA=path)


def call_on_isa(isa: str, target: str, *args, timeout: int = 300):
    """``module:function(*args)`` run in a fresh Python process with the kernels forced to ISA path
    ``isa`` and this session's library; returns what it returns (arguments and result pickled).
    A failure in the child (an assertion included) fails the caller with the child's traceback."""
    from ascend_moe_onnx import ort_custom_ops

    env = dict(os.environ, **isa_env(isa), ASCEND_MOE_ORT_LIBRARY=ort_custom_ops.get_library_path())
    with tempfile.TemporaryDirectory() as tmp:
        args_path, result_path = os.path.join(tmp, "args.pkl"), os.path.join(tmp, "result.pkl")
        with open(args_path, "wb") as f:
            pickle.dump(args, f)
        script = _CHILD.format(root=str(ROOT), target=target, args=args_path, result=result_path)
        proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                              timeout=timeout, cwd=ROOT)
        assert proc.returncode == 0, f"{target} on {isa}: exit {proc.returncode}\n{proc.stderr[-3000:]}"
        with open(result_path, "rb") as f:
            return pickle.load(f)
