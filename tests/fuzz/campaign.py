"""A fuzz campaign: seeded cases through the worker pool, outcomes counted, a JSON + Markdown
summary with reproducers (``python -m tests.fuzz --seed S --replay INDEX``)."""

from __future__ import annotations

import json
import platform
import time
from collections import Counter, defaultdict
from pathlib import Path

from tests.fuzz import known_defects
from tests.fuzz.cases import gen_case
from tests.fuzz.execute import FAILURES, KNOWN_DEFECT, OUTCOMES
from tests.fuzz.pool import WorkerPool
from tests.fuzz.source import RandomSource

EXAMPLES_PER_OUTCOME = 5


def case_at(seed: int, index: int):
    """The case number ``index`` of the campaign seeded with ``seed``."""
    return gen_case(RandomSource.for_case(seed, index))


def run_campaign(cases: int, seed: int = 0, start: int = 0, workers: int = 2, timeout: float = 30.0,
                 skip_known: bool = True, sanitizers: bool = False, env: dict | None = None,
                 progress=None) -> dict:
    """Run cases ``start .. start+cases-1`` of ``seed``; returns the summary dict."""
    counts: Counter = Counter()
    by_op: dict = defaultdict(Counter)
    known: Counter = Counter()
    examples: dict = defaultdict(list)
    seconds: list = []
    valid_ok = Counter()
    began = time.monotonic()

    def jobs():
        for i in range(start, start + cases):
            case = case_at(seed, i)
            item = known_defects.match(case, sanitizers) if skip_known else None
            if item is not None:
                counts[KNOWN_DEFECT] += 1
                by_op[case.op][KNOWN_DEFECT] += 1
                known[f"item {item}"] += 1
                continue
            yield i, case

    def snapshot(restarts: int) -> dict:
        ordered = sorted(seconds)
        wall = time.monotonic() - began
        return {
            "seed": seed, "start": start, "cases": cases, "run": sum(counts.values()),
            "workers": workers, "timeout_s": timeout,
            "sanitizers": sanitizers, "known_defects_skipped": skip_known,
            "wall_s": round(wall, 1), "worker_restarts": restarts,
            "cases_per_s": round(sum(counts.values()) / wall, 2) if wall > 0 else None,
            "cases_by_op": {op: sum(c.values()) for op, c in by_op.items()},
            "case_s_median": ordered[len(ordered) // 2] if ordered else None,
            "case_s_max": ordered[-1] if ordered else None,
            "outcomes": {o: counts.get(o, 0) for o in OUTCOMES},
            "by_op": {op: dict(c) for op, c in by_op.items()},
            "ok_split": dict(valid_ok),
            "known_defects": dict(known),
            "failures": sum(counts.get(o, 0) for o in FAILURES),
            "examples": dict(examples),
            "host": platform.platform(),
        }

    with WorkerPool(workers, timeout, env) as pool:
        for done, (i, case, result) in enumerate(pool.run(jobs()), 1):
            outcome = result["outcome"]
            item = known_defects.explain(case, result) if skip_known and outcome in FAILURES else None
            if item is not None:
                outcome = KNOWN_DEFECT
                known[f"item {item}"] += 1
            counts[outcome] += 1
            by_op[case.op][outcome] += 1
            if outcome == "ok":
                verdict = "valid, matched the reference" if result.get("valid") else "invalid, rejected clearly"
                valid_ok[verdict] += 1
            if result.get("seconds") is not None:
                seconds.append(result["seconds"])
            if outcome in FAILURES and len(examples[outcome]) < EXAMPLES_PER_OUTCOME:
                examples[outcome].append({
                    "index": i, "replay": f"python -m tests.fuzz --seed {seed} --replay {i}",
                    "detail": result["detail"], "contract": result.get("reasons"), "case": case.describe()})
            if progress and done % 1000 == 0:
                progress(done, snapshot(pool.restarts))
        return snapshot(pool.restarts)


def write_summary(summary: dict, out_dir: Path) -> tuple[Path, Path]:
    """Write summary.json and summary.md into ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    js = out_dir / "summary.json"
    js.write_text(json.dumps(summary, indent=1, default=str))
    md = out_dir / "summary.md"
    md.write_text(markdown(summary))
    return js, md


def markdown(s: dict) -> str:
    """The summary as a Markdown report."""
    lines = [
        f"# Fuzz campaign: {s['run']} of {s['cases']} cases run, seed {s['seed']}",
        "",
        summary_line(s),
        "",
        f"{s['wall_s']} s wall ({s['cases_per_s']} cases/s), {s['workers']} workers, "
        f"{s['timeout_s']} s per-case limit, "
        f"{s['worker_restarts']} worker restarts, sanitizers: {s['sanitizers']}, "
        f"known defects skipped: {s['known_defects_skipped']}.",
        "",
        "| outcome | cases |" + "".join(f" {op} |" for op in s["by_op"]),
        "|---|---|" + "---|" * len(s["by_op"]),
    ]
    lines.append(f"| cases | {s['run']} |" + "".join(f" {sum(c.values())} |" for c in s["by_op"].values()))
    for o, n in s["outcomes"].items():
        lines.append(f"| {o} | {n} |" + "".join(f" {c.get(o, 0)} |" for c in s["by_op"].values()))
    if s.get("ok_split"):
        lines += ["", "ok: " + ", ".join(f"{v} {k}" for k, v in sorted(s["ok_split"].items()))]
    if s["known_defects"]:
        lines += ["", "Skipped as known defects: " +
                  ", ".join(f"{k}: {v}" for k, v in sorted(s["known_defects"].items()))]
    for outcome, examples in s["examples"].items():
        lines += ["", f"## {outcome}", ""]
        for e in examples:
            lines.append(f"- `{e['replay']}`: {e['detail'][:300]!r}")
            lines.append(f"  case: `{json.dumps(e['case'], default=str)[:600]}`")
    return "\n".join(lines) + "\n"


def summary_line(s: dict) -> str:
    """One line: cases run, failures by kind, cases/s and the cases of each op."""
    o = s["outcomes"]
    silent = o.get("mismatch", 0) + o.get("accepted_bad_attribute", 0) + o.get("accepted_bad_input", 0)
    per_op = ", ".join(f"{op} {n}" for op, n in sorted(s.get("cases_by_op", {}).items()))
    return (f"{s['run']} cases: {o.get('crash', 0)} crashes, {o.get('hang', 0)} hangs, {silent} silent wrong, "
            f"{s['failures']} failures in all; {s.get('cases_per_s')} cases/s over {s['wall_s']} s; per op: {per_op}")
