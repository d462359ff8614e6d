"""Long fuzz campaign: ``python -m tests.fuzz --cases 100000`` (see docs/reliability.md)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from tests.fuzz.campaign import case_at, run_campaign, summary_line, write_summary


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m tests.fuzz", description=__doc__)
    p.add_argument("--cases", type=int, default=10000)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--start", type=int, default=0, help="first case index")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--timeout", type=float, default=30.0, help="seconds per case before it counts as a hang")
    p.add_argument("--include-known", action="store_true",
                   help="also run the cases of tests/fuzz/known_defects.py")
    p.add_argument("--sanitizers", action="store_true", help="skip sanitizer-only known defects too")
    p.add_argument("--out", type=Path, default=Path("fuzz-results"))
    p.add_argument("--replay", type=int, metavar="INDEX", help="run one case in this process and print it")
    args = p.parse_args(argv)

    if args.replay is not None:
        from tests.fuzz.execute import classify

        case = case_at(args.seed, args.replay)
        print(json.dumps(case.describe(), indent=1, default=str))
        print(json.dumps(classify(case), indent=1, default=str))
        return 0

    def progress(done, partial):
        print(f"{done} results: " + ", ".join(f"{o} {n}" for o, n in partial["outcomes"].items() if n),
              file=sys.stderr, flush=True)
        if done % 5000 == 0:  # a long campaign stopped early still leaves its figures
            write_summary(partial, args.out)

    summary = run_campaign(args.cases, args.seed, args.start, args.workers, args.timeout,
                           skip_known=not args.include_known, sanitizers=args.sanitizers, progress=progress)
    js, md = write_summary(summary, args.out)
    print(md.read_text())
    print(f"written: {js}, {md}")
    print(summary_line(summary))
    return 1 if summary["failures"] else 0


if __name__ == "__main__":
    sys.exit(main())
