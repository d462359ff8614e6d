"""The worker pool counts a crash or a hang against its case and carries on with the next one."""

from __future__ import annotations

import os
import time

import numpy as np
import pytest

pytest.importorskip("onnxruntime")

from tests.fuzz.cases import GATING, Case  # noqa: E402
from tests.fuzz.execute import CRASH, HANG, OK  # noqa: E402
from tests.fuzz.pool import WorkerPool  # noqa: E402


class _AbortsWhenLoaded:
    """Unpickling this in the worker kills it, as a segfaulting kernel would."""

    def __reduce__(self):
        return os.abort, ()


class _SleepsWhenLoaded:
    def __reduce__(self):
        return time.sleep, (60,)


def _valid_case() -> Case:
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    return Case(GATING, {"k": 2}, {"x": x}, ["x"], ["y", "expert_idx"], {"x": "symbolic"})


def test_crash_and_hang_are_counted_and_the_pool_recovers():
    jobs = [(0, _AbortsWhenLoaded()), (1, _valid_case()), (2, _SleepsWhenLoaded()), (3, _valid_case())]
    with WorkerPool(workers=1, timeout=5.0) as pool:
        outcomes = {key: result["outcome"] for key, _, result in pool.run(jobs)}
        assert pool.restarts == 2
    assert outcomes == {0: CRASH, 1: OK, 2: HANG, 3: OK}
