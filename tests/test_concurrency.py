"""Thread safety and memory of the custom-op library: one session used from 8 threads at once
gives exactly the serial results (errors included), and the process's RSS stays flat over
thousands of runs, failing runs and failing session creations included."""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")

from ascend_moe_onnx import ort_custom_ops  # noqa: E402
from tests.fuzz.cases import (  # noqa: E402
    GATING,
    GATING_INPUTS,
    REROUTING,
    REROUTING_INPUTS,
    REROUTING_OUTPUTS,
    Case,
)
from tests.fuzz.execute import build_model  # noqa: E402

THREADS = 8
E, K = 256, 8
DEEPSEEK_V3 = dict(k=K, k_group=4, group_count=8, group_select_mode=1, norm_type=1, out_flag=1,
                   routed_scaling_factor=2.5)
TABLE_ROWS = 100


def _session(case: Case, intra_op_threads: int = 2):
    so = ort_custom_ops.session_options(intra_op_threads)
    so.log_severity_level = 4  # the error paths below would flood the log
    return ort.InferenceSession(build_model(case).SerializeToString(), so, providers=["CPUExecutionProvider"])


def _gating_case(attrs: dict, hashed: bool) -> Case:
    x = np.zeros((1, E), np.float32)
    inputs = {"x": x, "bias": np.zeros(E, np.float32)}
    if hashed:
        inputs = {"x": x, "input_ids": np.zeros(1, np.int64), "tid2eid": np.zeros((TABLE_ROWS, K), np.int32)}
    names = [n if n in inputs else "" for n in GATING_INPUTS]
    while names[-1] == "":
        names.pop()
    return Case(GATING, attrs, inputs, names, ["y", "expert_idx", "out"], {n: "symbolic" for n in inputs})


def _rerouting_case() -> Case:
    inputs = {"tokens": np.zeros((1, 64), np.float32), "expert_token_num_per_rank": np.ones((1, 1), np.int64),
              "per_token_scales": np.zeros(1, np.float32)}
    return Case(REROUTING, {"idx_type": 1}, inputs, list(REROUTING_INPUTS), list(REROUTING_OUTPUTS),
                {n: "symbolic" for n in inputs})


def _gating_feeds(rng, rows: int, bad: bool = False) -> dict:
    return {"x": rng.standard_normal((rows, E)).astype(np.float32),
            "bias": (rng.standard_normal(E) * 0.1).astype(np.float32)}


def _hash_feeds(rng, rows: int, bad: bool = False) -> dict:
    ids = rng.integers(0, TABLE_ROWS, rows)
    if bad:
        ids[rows // 2] = TABLE_ROWS + 7
    return {"x": rng.standard_normal((rows, E)).astype(np.float32), "input_ids": ids.astype(np.int64),
            "tid2eid": np.random.default_rng(0).integers(0, E, (TABLE_ROWS, K)).astype(np.int32)}


def _rerouting_feeds(rng, rows: int, bad: bool = False) -> dict:
    counts = rng.multinomial(rows, np.ones(32) / 32).reshape(4, 8).astype(np.int64)
    if bad:
        counts[0, 0] += 1  # no longer sums to the token count
    return {"tokens": rng.standard_normal((rows, 64)).astype(np.float32), "expert_token_num_per_rank": counts,
            "per_token_scales": rng.standard_normal(rows).astype(np.float32)}


def _outcome(sess, feeds):
    try:
        return [np.asarray(o) for o in sess.run(None, feeds)]
    except Exception as e:  # noqa: BLE001 - ORT's exception types differ across versions
        return str(e)


def _same(a, b) -> bool:
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    return all(x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes() for x, y in zip(a, b))


CASES = {
    "gating_deepseek_v3": (lambda: _gating_case(DEEPSEEK_V3, hashed=False), _gating_feeds),
    "gating_hash_with_errors": (lambda: _gating_case(dict(k=K, norm_type=2, out_flag=1), hashed=True),
                                _hash_feeds),
    "rerouting_with_errors": (_rerouting_case, _rerouting_feeds),
}


@pytest.mark.parametrize("name", CASES)
def test_one_session_from_eight_threads_equals_serial_runs(name):
    make_case, make_feeds = CASES[name]
    sess = _session(make_case())
    rng = np.random.default_rng(8)
    # Per thread: different row counts (one row up to several parallel chunks); every third
    # input of the error-capable cases is invalid, so failures interleave with good runs.
    jobs = [[make_feeds(rng, int(rng.integers(1, 400)), bad=(t + i) % 3 == 0) for i in range(6)]
            for t in range(THREADS)]
    serial = [[_outcome(sess, f) for f in feeds] for feeds in jobs]
    assert any(isinstance(o, str) for row in serial for o in row) == (name != "gating_deepseek_v3")
    start = threading.Barrier(THREADS)

    def worker(t):
        start.wait()
        return [[_outcome(sess, f) for f in jobs[t]] for _ in range(5)]

    with ThreadPoolExecutor(THREADS) as pool:
        concurrent = list(pool.map(worker, range(THREADS)))
    for t in range(THREADS):
        for rep in concurrent[t]:
            for i, got in enumerate(rep):
                assert _same(got, serial[t][i]), f"thread {t}, input {i} differs from the serial run"


def _rss_bytes() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


@pytest.mark.skipif(not os.path.exists("/proc/self/statm"), reason="needs Linux /proc")
@pytest.mark.skipif(os.environ.get("ASCEND_MOE_SANITIZERS") == "1",
                    reason="AddressSanitizer's quarantine keeps freed memory (up to 256 MiB), so RSS says "
                           "nothing about leaks there; the plain build's run checks it")
def test_rss_flat_over_many_runs_including_errors():
    """~1 MB of outputs per good run, so a leaked output or scratch buffer would add gigabytes."""
    rng = np.random.default_rng(3)
    gating = _session(_gating_case(dict(k=K, norm_type=2, out_flag=1), hashed=True), intra_op_threads=1)
    rerouting = _session(_rerouting_case(), intra_op_threads=1)
    good_g, bad_g = _hash_feeds(rng, 512), _hash_feeds(rng, 512, bad=True)
    good_r, bad_r = _rerouting_feeds(rng, 512), _rerouting_feeds(rng, 512, bad=True)
    bad_attr = build_model(_gating_case(dict(k=K, norm_type=7), hashed=True)).SerializeToString()
    so = ort_custom_ops.session_options(1)
    so.log_severity_level = 4

    def rounds(n):
        for i in range(n):
            gating.run(None, good_g)
            rerouting.run(None, good_r)
            for sess, feeds in ((gating, bad_g), (rerouting, bad_r)):
                with pytest.raises(Exception, match="out of range|must sum to"):
                    sess.run(None, feeds)
            if i % 20 == 0:
                with pytest.raises(Exception, match="norm_type"):
                    ort.InferenceSession(bad_attr, so, providers=["CPUExecutionProvider"])

    rounds(100)  # warm-up: arenas, thread-local buffers, caches
    before = _rss_bytes()
    rounds(600)
    grown = _rss_bytes() - before
    print(f"RSS growth over 600 rounds: {grown / 2**20:.2f} MiB")
    assert grown < 16 << 20, f"RSS grew by {grown / 2**20:.1f} MiB over 600 rounds"
