"""The CPU kernels under AddressSanitizer + UndefinedBehaviorSanitizer on the inputs that once hit
undefined behaviour or overflowed a buffer: tests/native/gating_sanitize.cc
built with g++, run on every ISA path of the CPU."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.cpu_isa import isa_env
from tests.ops.moe_gating_top_k_hash.test_gating_kernel import ISA_PATHS

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def sanitized_driver(tmp_path_factory) -> Path:
    if shutil.which("g++") is None:
        pytest.skip("g++ not found")
    if not (ROOT / "ops_src/cpu").is_dir():
        pytest.skip("needs the source tree's ops_src/ (tests run from an installed wheel)")
    exe = tmp_path_factory.mktemp("sanitize") / "gating_sanitize"
    sources = [str(ROOT / "tests/native/gating_sanitize.cc")] + sorted(
        str(p) for p in (ROOT / "ops_src/cpu").rglob("*.cc"))
    cmd = ["g++", "-std=c++17", "-O1", "-g", "-fsanitize=address,undefined",
           "-fno-sanitize-recover=all", "-I", str(ROOT), *sources, "-o", str(exe)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if proc.returncode != 0 and "sanitize" in proc.stderr and "cannot find" in proc.stderr:
        pytest.skip("sanitizer runtime not installed")
    assert proc.returncode == 0, proc.stderr[-3000:]
    return exe


@pytest.mark.parametrize("isa", ISA_PATHS)
def test_no_sanitizer_report(sanitized_driver, isa):
    env = dict(os.environ, **isa_env(isa), UBSAN_OPTIONS="print_stacktrace=1",
               ASAN_OPTIONS="detect_leaks=0")
    env.pop("LD_PRELOAD", None)
    proc = subprocess.run([str(sanitized_driver)], env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0 and proc.stdout.strip() == "ok", proc.stderr[-4000:]
    assert "runtime error" not in proc.stderr, proc.stderr[-4000:]
