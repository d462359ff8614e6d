"""Known defects that the fuzzer does not count as failures while they are being fixed on other
branches, by the name docs/reliability.md gives them ("N1", ...).

Two kinds of entry: ``KNOWN_DEFECTS`` match a case before it runs (the case is skipped: crashes
cost a worker restart each), ``KNOWN_FAILURE_MESSAGES`` match a failed result by its message.
Both are counted under their item in the summary.

When a fix is merged, delete its entries: the CI slice then runs those cases again and fails if
the defect is still there. Each predicate is as narrow as the defect, so it hides nothing else.
``sanitizer_only`` entries matter only in ASan/UBSan builds (the defect is undefined behaviour
with correct results)."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from tests.fuzz.cases import (
    EXPERTS,
    EXPERTS_DEFAULTS,
    EXPERTS_QUANT_DEFAULTS,
    GATING,
    GATING_DEFAULTS,
    GATING_INPUTS,
    REROUTING,
    REROUTING_DEFAULTS,
    Case,
)
from tests.fuzz.cases_ops import DEFAULTS as PIPELINE_DEFAULTS

GATING_ATTRS = set(GATING_DEFAULTS) | {"k"}
REROUTING_ATTRS = set(REROUTING_DEFAULTS)


@dataclass(frozen=True)
class KnownDefect:
    item: str
    summary: str
    matches: Callable[[Case], bool]
    sanitizer_only: bool = False
    # When set, the case still runs and only these outcomes of it are counted as the defect.
    only_outcomes: tuple = ()
    # A minimal case that shows the defect (test_known_defects.py checks it still does).
    reproducer: Callable[[], Case] | None = None


def _unknown_attribute_name(c: Case) -> bool:
    known = {GATING: GATING_ATTRS, EXPERTS: set(EXPERTS_DEFAULTS) | set(EXPERTS_QUANT_DEFAULTS),
             **{op: set(defaults) for op, defaults in PIPELINE_DEFAULTS.items()}}.get(c.op, REROUTING_ATTRS)
    return any(n not in known for n in c.attrs)


def _opset_version(c: Case) -> bool:
    return c.opset != 1


# ---- minimal reproducers -----------------------------------------------------------------------


def _gating(attrs, x, outputs=("y", "expert_idx", "out"), dims=None, opset=1, **extra) -> Case:
    inputs = {"x": x, **extra}
    names = [n if n in inputs else "" for n in GATING_INPUTS]
    while names[-1] == "":
        names.pop()
    return Case(GATING, attrs, inputs, names, list(outputs), dims or {}, opset=opset)


def _logits(rows=4, experts=8, value=None):
    if value is not None:
        return np.full((rows, experts), value, np.float32)
    return np.random.default_rng(0).standard_normal((rows, experts)).astype(np.float32)


KNOWN_DEFECTS: list[KnownDefect] = [
    KnownDefect("4", "ORT limitation, documented in docs/contributing.md: a kernel cannot see attributes "
                "with unknown names (norm=1); onnx_schemas.check_model rejects them", _unknown_attribute_name,
                reproducer=lambda: _gating(dict(k=2, norm=1), _logits())),
    KnownDefect("9", "ORT limitation, documented in docs/contributing.md: a kernel cannot see the model's "
                "opset_import (version 2 runs); onnx_schemas.check_model rejects it", _opset_version,
                reproducer=lambda: _gating(dict(k=2), _logits(), opset=2)),
]


@dataclass(frozen=True)
class KnownFailureMessage:
    item: str
    summary: str
    outcomes: tuple
    pattern: str
    reproducer: Callable[[], Case] | None = None


def _rerouting_without_tokens() -> Case:
    scales = np.zeros(4, np.float16)
    counts = np.array([[2, 2]], np.int32)
    return Case(REROUTING, {}, {"tokens": np.zeros((4, 2), np.float32), "expert_token_num_per_rank": counts,
                                "per_token_scales": scales}, ["", "expert_token_num_per_rank", "per_token_scales"],
                ["permute_tokens", "permute_per_token_scales", "permute_token_idx", "expert_token_num"])


KNOWN_FAILURE_MESSAGES: list[KnownFailureMessage] = [
    KnownFailureMessage(
        "10", "ORT limitation, documented in docs/contributing.md: a required input left out or named '' "
        "that types an output the graph declares: ORT types that output like the node's last input and "
        "reports the clash before any kernel exists", ("unclear_error",),
        r"expected one of \[[^\]]*'input \d+'[^\]]*\] named: .*Type Error: Type \(tensor\(\w+\)\) of output arg",
        reproducer=_rerouting_without_tokens),
]


# Existing tests that exercise a sanitizer-only defect (deselected by .ci/jobs/30-sanitizers.sh).
SANITIZER_DESELECT: dict[str, list[str]] = {}


def match(case: Case, sanitizers: bool = False) -> str | None:
    """The item number of the first known defect ``case`` may trigger, or None."""
    for d in KNOWN_DEFECTS:
        if not d.only_outcomes and (sanitizers or not d.sanitizer_only) and d.matches(case):
            return d.item
    return None


def explain(case: Case, result: dict) -> str | None:
    """The item of a known defect that explains the failed ``result`` of ``case``, or None."""
    for k in KNOWN_DEFECTS:
        if result["outcome"] in k.only_outcomes and k.matches(case):
            return k.item
    for d in KNOWN_FAILURE_MESSAGES:
        if result["outcome"] in d.outcomes and re.search(d.pattern, result.get("detail") or ""):
            return d.item
    return None
