"""What the numbers were measured on: CPU, cores, library versions, the kernels' ISA path."""

from __future__ import annotations

import os
import platform
import time


def _cpuinfo() -> dict[str, str]:
    info: dict[str, str] = {}
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            for line in f:
                if ":" in line:
                    key, value = (p.strip() for p in line.split(":", 1))
                    info.setdefault(key, value)
    except OSError:
        pass
    return info


def isa_paths() -> list[str]:
    """The instruction-set builds of the gating kernel this CPU runs, lowest first: "baseline"
    (SSE2 on x86-64; the only one elsewhere), "avx2" (AVX2 + FMA), "avx512" (F, BW, DQ, VL)."""
    if platform.machine() not in ("x86_64", "AMD64"):
        return ["baseline"]
    flags = set(_cpuinfo().get("flags", "").split())
    paths = ["baseline"]
    if {"avx2", "fma"} <= flags:
        paths.append("avx2")
        if {"avx512f", "avx512bw", "avx512dq", "avx512vl"} <= flags:
            paths.append("avx512")
    return paths


def isa_path() -> str:
    """The instruction-set build of the gating kernel the library picks on this machine.

    Inferred the way the library decides (it exports no query): the best of isa_paths();
    ASCEND_MOE_CPU_ISA = baseline | avx2 lowers the choice. (The AVX-512 build selects with the
    AVX2 build's code on AMD CPUs unless ASCEND_MOE_CPU_SELECT = wide; docs/kernel.md.)
    """
    paths = isa_paths()
    wanted = os.environ.get("ASCEND_MOE_CPU_ISA")
    if wanted in paths[:-1]:
        return f"{wanted} (forced by ASCEND_MOE_CPU_ISA)"
    return paths[-1]


def bf16_dot_path() -> str:
    """How MoeRoutedExperts multiplies bfloat16 weights here, inferred as the library decides:
    vdpbf16ps (with the AVX-512 path and AVX-512 BF16), else the widening tiles;
    ASCEND_MOE_CPU_BF16_DOT names another (tests, benchmarks)."""
    flags = set(_cpuinfo().get("flags", "").split()) if platform.machine() in ("x86_64", "AMD64") else set()
    isa = isa_path().split(" ")[0]
    runs = {"widen"} | ({"emulated-bf16"} if isa != "baseline" else set())
    if isa == "avx512" and "avx512_bf16" in flags:
        runs.add("avx512bf16")
    wanted = os.environ.get("ASCEND_MOE_CPU_BF16_DOT")
    if wanted in runs:
        return f"{wanted} (forced by ASCEND_MOE_CPU_BF16_DOT)"
    return "avx512bf16" if "avx512bf16" in runs else "widen"


def a8_dot_path() -> str:
    """The integer dot products MoeRoutedExperts' int8-activation kernel takes here, inferred as the
    library decides: AVX-512 VNNI (with the AVX-512 path), else AVX-VNNI, else AVX2 vpmaddubsw, else
    scalar; ASCEND_MOE_CPU_A8_DOT names another (tests, benchmarks)."""
    flags = set(_cpuinfo().get("flags", "").split()) if platform.machine() in ("x86_64", "AMD64") else set()
    isa = isa_path().split(" ")[0]
    runs = {"scalar"}
    if isa != "baseline":
        runs |= {"maddubs", "emulated-vnni"} | ({"avxvnni"} if "avx_vnni" in flags else set())
    if isa == "avx512" and "avx512_vnni" in flags:
        runs.add("avx512vnni")
    wanted = os.environ.get("ASCEND_MOE_CPU_A8_DOT")
    if wanted in runs:
        return f"{wanted} (forced by ASCEND_MOE_CPU_A8_DOT)"
    return next(p for p in ("avx512vnni", "avxvnni", "maddubs", "scalar") if p in runs)


def machine_info() -> dict:
    """CPU model, core count, load, library versions and the ISA path, as a JSON-ready dict."""
    import numpy
    import onnxruntime
    import torch

    from ascend_moe_onnx import ort_custom_ops

    cpu = _cpuinfo()
    affinity: int | None
    try:
        affinity = len(os.sched_getaffinity(0))
    except AttributeError:
        affinity = os.cpu_count()
    return {
        "cpu_model": cpu.get("model name", platform.processor() or "unknown"),
        "cores": os.cpu_count(),
        "usable_cores": affinity,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "onnxruntime": onnxruntime.__version__,
        "torch": torch.__version__,
        "numpy": numpy.__version__,
        "isa_path": isa_path(),
        "library": ort_custom_ops.get_library_path(),
    }


def _busy_seconds() -> float | None:
    """CPU seconds spent busy by all processes since boot (/proc/stat; steal counts as busy)."""
    try:
        with open("/proc/stat", encoding="utf-8") as f:
            fields = [int(v) for v in f.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


class OtherLoad:
    """Context manager measuring how many cores other processes (and the hypervisor, as steal
    time) kept busy while it was open: ``cores`` afterwards, or None where /proc/stat is missing.

    The machines are shared: a 2-thread measurement taken while another process holds one of
    the two cores mostly measures the scheduler, and this says when that happened.
    """

    def __enter__(self):
        t = os.times()
        self._start = (_busy_seconds(), t.user + t.system, time.perf_counter())
        self.cores = None
        return self

    def __exit__(self, *exc):
        busy0, own0, wall0 = self._start
        busy1, t = _busy_seconds(), os.times()
        wall = time.perf_counter() - wall0
        if busy0 is not None and busy1 is not None and wall > 0:
            self.cores = max(0.0, ((busy1 - busy0) - (t.user + t.system - own0)) / wall)
        return False
