"""Timing: interleaved repetitions of several candidates, per-call medians and ratios.

The machines are shared and noisy, so every candidate of a case is timed in the same process on
the same inputs, and the repetitions interleave the candidates (rotating their order) so that a
burst of outside load hits all of them alike. A sample runs one candidate enough times to last at
least ``min_sample_s``; the per-call time of a candidate is the median of its samples.
"""

from __future__ import annotations

import gc
import math
import statistics
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

MAX_CALLS_PER_SAMPLE = 100_000
CALIBRATION_CALLS = 3
# Untimed warm-up before every sample when candidates run on several threads: the previous
# candidate's pool (torch's OpenMP workers) spins for tens of ms after its last call, stealing
# the cores of the next candidate's threads (a 2-thread ORT call after torch eager: +17% with
# 15 ms of warm-up, clean from 30 ms). Sleeping it off is worse on these VMs: a vCPU idle for
# 20 ms comes back slowly, and 2-thread calls right after ran 3x slower (measured).
MULTI_THREAD_WARMUP_S = 0.03


@dataclass
class Timing:
    """Per-call times (seconds) of one candidate, one entry per repetition."""

    calls_per_sample: int
    samples: list = field(default_factory=list)

    @property
    def median(self) -> float:
        """Median per-call time in seconds."""
        return statistics.median(self.samples)

    @property
    def fastest(self) -> float:
        """Fastest per-call time in seconds (the sample least disturbed on a shared machine)."""
        return min(self.samples)

    @property
    def spread(self) -> float:
        """Relative spread of the samples, (p75 - p25) / median: how noisy the measurement was."""
        if len(self.samples) < 4:
            return 0.0
        q = statistics.quantiles(self.samples, n=4)
        return (q[2] - q[0]) / self.median


def _calls_per_sample(fn: Callable[[], object], min_sample_s: float) -> int:
    # The fastest of a few calls: a single slow call (page faults, a preempted thread) would
    # otherwise shrink every later sample.
    best = math.inf
    for _ in range(CALIBRATION_CALLS):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(min_sample_s / max(best, 1e-9))))


def measure(candidates: Mapping[str, Callable[[], object]], repeats: int = 7,
            min_sample_s: float = 0.005, warmup_s: float = 0.0) -> dict[str, Timing]:
    """Time every candidate ``repeats`` times, interleaved; returns name -> Timing.

    Each candidate is first called CALIBRATION_CALLS times: warm-up (first-run allocations,
    thread-pool start-up) and the calls per sample, from the fastest of those calls.
    ``warmup_s``: before every sample the candidate also runs untimed for that long (at least
    one call; see MULTI_THREAD_WARMUP_S).
    """
    names = list(candidates)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one candidate's sample would bias it
    try:
        timings = {n: Timing(_calls_per_sample(candidates[n], min_sample_s)) for n in names}
        for rep in range(repeats):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                fn, t = candidates[name], timings[name]
                n = t.calls_per_sample
                if warmup_s > 0:
                    end = time.perf_counter() + warmup_s
                    fn()
                    while time.perf_counter() < end:
                        fn()
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t.samples.append((time.perf_counter() - t0) / n)
    finally:
        if gc_was_enabled:
            gc.enable()
    return timings


def warmup_for(threads: int) -> float:
    """The untimed warm-up before each sample for candidates on ``threads`` threads (see measure)."""
    return MULTI_THREAD_WARMUP_S if threads > 1 else 0.0


def ratio(baseline: Timing, candidate: Timing) -> float:
    """How many times faster ``candidate`` is than ``baseline`` (ratio of the medians)."""
    return baseline.median / candidate.median


# A multi-thread case measured while other processes kept more than this many cores busy is
# measured again (at most QUIET_RETRIES times); the quietest attempt is kept.
QUIET_LIMIT_CORES = 0.5
QUIET_RETRIES = 1


def measure_quietly(candidates: Mapping[str, Callable[[], object]], repeats: int, min_sample_s: float,
                    threads: int) -> tuple[dict[str, Timing], float | None, int]:
    """``measure`` for candidates on ``threads`` threads, repeated when other processes were busy
    (multi-thread cases only); returns (timings, cores other processes used, attempts)."""
    from .machine import OtherLoad

    best = None
    for attempt in range(1, QUIET_RETRIES + 2):  # noqa: B007 (the count is returned)
        with OtherLoad() as load:
            t = measure(candidates, repeats, min_sample_s, warmup_for(threads))
        if best is None or (load.cores is not None and best[1] is not None and load.cores < best[1]):
            best = (t, load.cores)
        if threads <= 1 or load.cores is None or load.cores <= QUIET_LIMIT_CORES:
            break
    assert best is not None  # the first attempt sets it
    return best[0], best[1], attempt
