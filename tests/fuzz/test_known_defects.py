"""Every entry of tests/fuzz/known_defects.py must still reproduce: once a fix is merged, this
test says which entry to delete, so the fuzzer's exclusions never outlive their defects."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnxruntime")

from tests.fuzz import known_defects  # noqa: E402
from tests.fuzz.execute import FAILURES  # noqa: E402
from tests.fuzz.pool import WorkerPool  # noqa: E402

SANITIZERS = os.environ.get("ASCEND_MOE_SANITIZERS") == "1"
ENTRIES = [d for d in known_defects.KNOWN_DEFECTS + known_defects.KNOWN_FAILURE_MESSAGES if d.reproducer]


def test_every_entry_has_a_reproducer():
    missing = [d.item for d in known_defects.KNOWN_DEFECTS + known_defects.KNOWN_FAILURE_MESSAGES
               if d.reproducer is None]
    assert not missing, f"known defects without a reproducer: {missing}"


def test_known_defects_still_reproduce():
    run = [d for d in ENTRIES if SANITIZERS or not getattr(d, "sanitizer_only", False)]
    with WorkerPool(workers=1, timeout=60.0) as pool:
        results = {key: r for key, _, r in pool.run((i, d.reproducer()) for i, d in enumerate(run))}
    fixed = [f"item {d.item} ({d.summary})" for i, d in enumerate(run) if results[i]["outcome"] not in FAILURES]
    assert not fixed, ("no longer reproduced, delete from tests/fuzz/known_defects.py: " + "; ".join(fixed))
