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
    """One rank's exit status and output."""

    rank: int
    returncode: int | None  # None: killed at the deadline
    stdout: str
    stderr: str


def run_ranks(ranks: int, args: list[str], deadline_s: float = 120.0, threads: int = 1,
              env: dict | None = None) -> list[RankRun]:
    """Run the launcher on ``ranks`` local processes; ranks still alive after ``deadline_s`` are
    killed (returncode None)."""
    port = free_port()
    procs = []
    for r in range(ranks):
        e = dict(os.environ, **(env or {}))
        e.update(RANK=str(r), WORLD_SIZE=str(ranks), LOCAL_RANK=str(r), LOCAL_WORLD_SIZE=str(ranks),
                 MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), OMP_NUM_THREADS=str(threads),
                 TORCH_DEVICE_BACKEND_AUTOLOAD="0")
        cmd = [sys.executable, "-m", "ascend_moe_onnx.ep", *args, "--threads", str(threads)]
        procs.append(subprocess.Popen(cmd, env=e, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    end = time.monotonic() + deadline_s
    out = []
    for r, p in enumerate(procs):
        try:
            so, se = p.communicate(timeout=max(0.1, end - time.monotonic()))
            out.append(RankRun(r, p.returncode, so, se))
        except subprocess.TimeoutExpired:
            p.kill()
            so, se = p.communicate()
            out.append(RankRun(r, None, so, se))
    return out
