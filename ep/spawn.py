"""Start N local ranks of the launcher without torchrun (tests and the benchmark).

Each rank is ``python -m ascend_moe_onnx.ep ARGS`` with the environment torchrun would give it
(RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR=127.0.0.1, a free MASTER_PORT).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from dataclasses import dataclass


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class RankRun:
    """One rank's exit status, output and run time."""

    rank: int
    returncode: int | None  # None: killed (deadline, or not waited for)
    stdout: str
    stderr: str
    seconds: float


def run_ranks(ranks: int, args: list[str], deadline_s: float = 120.0, threads: int = 1,
              env: dict | None = None, wait_for: list[int] | None = None) -> list[RankRun]:
    """Run the launcher on ``ranks`` local processes. Once the ranks in ``wait_for`` (default: all)
    have exited, or after ``deadline_s``, the others are killed (returncode None)."""
    import contextlib
    import tempfile

    port = free_port()
    procs, files = [], []
    with contextlib.ExitStack() as opened:
        start = time.monotonic()
        for r in range(ranks):
            e = dict(os.environ, **(env or {}))
            e.update(RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(ranks),
                     MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads),
                     TORCH_DEVICE_BACKEND_AUTOLOAD="0")
            cmd = [sys.executable, "-m", "ascend_moe_onnx.ep", *args, "--threads", str(threads)]
            # Files, not pipes: a rank must never block on a full pipe nobody reads.
            so, se = (opened.enter_context(tempfile.TemporaryFile("w+")) for _ in range(2))
            files.append((so, se))
            procs.append(subprocess.Popen(cmd, env=e, stdout=so, stderr=se, text=True))
        waited = set(range(ranks) if wait_for is None else wait_for)
        ended: dict[int, float] = {}
        while time.monotonic() - start < deadline_s:
            for r, p in enumerate(procs):
                if r not in ended and p.poll() is not None:
                    ended[r] = time.monotonic() - start
            if waited <= set(ended):
                break
            time.sleep(0.05)
        out = []
        for r, p in enumerate(procs):
            if p.poll() is None:
                p.kill()
                p.wait()
                code = None
            else:
                code = p.returncode
            so, se = files[r]
            so.seek(0), se.seek(0)
            out.append(RankRun(r, code, so.read(), se.read(), ended.get(r, time.monotonic() - start)))
    return out
