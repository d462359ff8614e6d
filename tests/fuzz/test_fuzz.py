"""CI slice of the fuzz campaign (seeded, a few thousand cases) and a Hypothesis-driven search;
both run every case in a worker process, so a crash or hang fails the test instead of pytest.

Known defects (tests/fuzz/known_defects.py) are skipped; set ASCEND_MOE_SANITIZERS=1 in
sanitizer builds to skip the sanitizer-only ones too."""

from __future__ import annotations

import os

import pytest

pytest.importorskip("onnxruntime")
hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from tests.fuzz import known_defects  # noqa: E402
from tests.fuzz.campaign import markdown, run_campaign  # noqa: E402
from tests.fuzz.cases import gen_case  # noqa: E402
from tests.fuzz.execute import FAILURES  # noqa: E402
from tests.fuzz.pool import WorkerPool  # noqa: E402
from tests.fuzz.source import HypothesisSource  # noqa: E402

SANITIZERS = os.environ.get("ASCEND_MOE_SANITIZERS") == "1"
SLICE_SEED = 15
SLICE_CASES = int(os.environ.get("ASCEND_MOE_FUZZ_CASES", "3000"))
CHUNKS = 4  # separate tests so that pytest-xdist spreads them over the cores
TIMEOUT_S = 60.0 if SANITIZERS else 20.0


@pytest.mark.parametrize("chunk", range(CHUNKS))
def test_fuzz_slice(chunk):
    size = SLICE_CASES // CHUNKS
    summary = run_campaign(size, seed=SLICE_SEED, start=chunk * size, workers=1, timeout=TIMEOUT_S,
                           sanitizers=SANITIZERS)
    assert summary["failures"] == 0, markdown(summary)
    # The slice must exercise both verdicts of the contract, or it proves nothing.
    assert summary["ok_split"].get("valid, matched the reference", 0) > size // 5, summary["ok_split"]
    assert summary["ok_split"].get("invalid, rejected clearly", 0) > size // 10, summary["ok_split"]


@pytest.fixture(scope="module")
def pool():
    with WorkerPool(1, TIMEOUT_S) as p:
        yield p


@settings(max_examples=int(os.environ.get("ASCEND_MOE_HYPOTHESIS_EXAMPLES", "150")), deadline=None,
          derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much, HealthCheck.data_too_large,
                                 HealthCheck.function_scoped_fixture])
@given(data=st.data())
def test_hypothesis_cases(pool, data):
    case = gen_case(HypothesisSource(data))
    assume(known_defects.match(case, SANITIZERS) is None)
    ((_, _, result),) = list(pool.run([(0, case)]))
    if result["outcome"] in FAILURES and known_defects.explain(case, result) is None:
        pytest.fail(f"{result['outcome']}: {result['detail']}\ncontract: {result.get('reasons')}\n"
                    f"case: {case.describe()}")
