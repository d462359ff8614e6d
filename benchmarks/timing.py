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
from dataclasses import dataclass, field
from typing import Callable

MAX_CALLS_PER_SAMPLE = 100_000
CALIBRATION_CALLS = 3
# Pause between samples when candidates run on several threads: torch's OpenMP workers spin for
# ~10 ms after a parallel region (measured: a 2-thread ORT call right after torch eager ran 40%
# slower with pauses up to 5 ms, unaffected from 10 ms on).
MULTI_THREAD_PAUSE_S = 0.02


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


def measure(candidates: dict[str, Callable[[], object]], repeats: int = 7,
            min_sample_s: float = 0.005, pause_s: float = 0.0) -> dict[str, Timing]:
    """Time every candidate ``repeats`` times, interleaved; returns name -> Timing.

    Each candidate is first called CALIBRATION_CALLS times: warm-up (first-run allocations,
    thread-pool start-up) and the calls per sample, from the fastest of those calls.
    ``pause_s`` is slept before every sample: with several threads, the pools of the previous
    candidate (ORT's, OpenMP's) spin-wait for a while after their last call and would steal the
    cores of the next candidate's threads; a pause lets them go to sleep first.
    """
    names = list(candidates)
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one candidate's sample would bias it
    try:
        timings = {}
        for n in names:
            if pause_s > 0:
                time.sleep(pause_s)
            timings[n] = Timing(_calls_per_sample(candidates[n], min_sample_s))
        for rep in range(repeats):
            shift = rep % len(names)
            for name in names[shift:] + names[:shift]:
                fn, t = candidates[name], timings[name]
                n = t.calls_per_sample
                if pause_s > 0:
                    time.sleep(pause_s)
                t0 = time.perf_counter()
                for _ in range(n):
                    fn()
                t.samples.append((time.perf_counter() - t0) / n)
    finally:
        if gc_was_enabled:
            gc.enable()
    return timings


def pause_for(threads: int) -> float:
    """The pause between samples for candidates running on ``threads`` threads (see measure)."""
    return MULTI_THREAD_PAUSE_S if threads > 1 else 0.0


def ratio(baseline: Timing, candidate: Timing) -> float:
    """How many times faster ``candidate`` is than ``baseline`` (ratio of the medians)."""
    return baseline.median / candidate.median
