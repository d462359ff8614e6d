"""A pool of worker processes that run fuzz cases: a worker that dies (signal, sanitizer abort)
is counted as a crash and replaced, a case past its time limit as a hang (the worker is killed
and replaced), so one bad case never ends a campaign.

Protocol: length-prefixed pickles over the worker's stdin / a dup of its stdout; the worker's
own stdout and stderr (ORT logs, sanitizer reports) go to a log file whose tail is kept for
crash reports."""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.fuzz.execute import CRASH, HANG

ROOT = Path(__file__).resolve().parents[2]


def write_frame(stream, payload: bytes) -> None:
    stream.write(struct.pack("<Q", len(payload)) + payload)
    stream.flush()


def read_frame(stream) -> bytes | None:
    head = stream.read(8)
    if len(head) < 8:
        return None
    (n,) = struct.unpack("<Q", head)
    data = stream.read(n)
    return data if len(data) == n else None


def _signal_name(code: int) -> str:
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit status {code}"


class _Worker:
    def __init__(self, env: dict):
        self.log = tempfile.TemporaryFile()  # noqa: SIM115 (the worker owns it; close() closes it)
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fuzz.worker"], cwd=ROOT, env=env,
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log)
        self.job = None      # (key, case) in flight
        self.deadline = 0.0
        self.ready = False
        self.log_start = 0

    def send(self, key, case, timeout: float) -> None:
        if not self.ready:  # the time limit starts once the worker has imported everything
            if read_frame(self.proc.stdout) != b"ready":
                raise RuntimeError(f"fuzz worker failed to start:\n{self.crash_report()}")
            self.ready = True
        self.job = (key, case)
        self.log.seek(0, os.SEEK_END)
        self.log_start = self.log.tell()
        self.deadline = time.monotonic() + timeout
        write_frame(self.proc.stdin, pickle.dumps(case))

    def crash_report(self, limit: int = 2500) -> str:
        """What the worker wrote while running the fatal case: a sanitizer report's first lines
        (its error line and the top of the stack), else the tail."""
        self.log.seek(self.log_start)
        text = self.log.read(4 << 20).decode(errors="replace")
        for marker in ("runtime error:", "ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "SUMMARY:"):
            at = text.find(marker)
            if at >= 0:
                start = text.rfind("\n", 0, at) + 1
                return text[start:start + limit]
        return text[-limit:]

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        for s in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                s.close()
        self.log.close()


class WorkerPool:
    """``run(jobs)`` yields ``(key, case, result)`` for an iterable of ``(key, case)``."""

    def __init__(self, workers: int = 2, timeout: float = 30.0, env: dict | None = None):
        self.size = workers
        self.timeout = timeout
        self.env = dict(os.environ if env is None else env)
        self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), self.env.get("PYTHONPATH")]))
        self.env.setdefault("OMP_NUM_THREADS", "1")
        self.workers: list[_Worker] = []
        self.restarts = 0

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for w in self.workers:
            w.stop()
        self.workers = []

    def _spawn(self) -> _Worker:
        return _Worker(self.env)

    def run(self, jobs):
        jobs = iter(jobs)
        while len(self.workers) < self.size:
            self.workers.append(self._spawn())
        idle = list(self.workers)
        busy: dict = {}
        sel = selectors.DefaultSelector()
        exhausted = False
        try:
            while True:
                while idle and not exhausted:
                    job = next(jobs, None)
                    if job is None:
                        exhausted = True
                        break
                    w = idle.pop()
                    try:
                        w.send(*job, self.timeout)
                    except (BrokenPipeError, OSError):  # died while idle: replace it and retry once
                        w = self._replace(w)
                        w.send(*job, self.timeout)
                    busy[w.proc.stdout.fileno()] = w
                    sel.register(w.proc.stdout, selectors.EVENT_READ, w)
                if not busy:
                    return
                now = time.monotonic()
                wait = max(0.0, min(w.deadline for w in busy.values()) - now)
                for sel_key, _ in sel.select(timeout=wait):
                    w = sel_key.data
                    frame = read_frame(w.proc.stdout)
                    sel.unregister(w.proc.stdout)
                    del busy[w.proc.stdout.fileno()]
                    key, case = w.job
                    if frame is None:  # the worker died on this case
                        w.proc.wait()
                        result = {"outcome": CRASH, "detail": f"worker died ({_signal_name(w.proc.returncode)}); "
                                  f"log:\n{w.crash_report()}", "seconds": None}
                        w = self._replace(w)
                    else:
                        result = pickle.loads(frame)
                        w.job = None
                    idle.append(w)
                    yield key, case, result
                now = time.monotonic()
                for fd, w in list(busy.items()):
                    if w.deadline <= now:
                        sel.unregister(w.proc.stdout)
                        del busy[fd]
                        key, case = w.job
                        idle.append(self._replace(w))
                        yield key, case, {"outcome": HANG, "detail": f"no answer within {self.timeout:g} s",
                                          "seconds": self.timeout}
        finally:
            sel.close()

    def _replace(self, w: _Worker) -> _Worker:
        w.stop()
        self.restarts += 1
        new = self._spawn()
        self.workers[self.workers.index(w)] = new
        return new
