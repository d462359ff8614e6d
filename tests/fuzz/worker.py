"""Worker process of :mod:`tests.fuzz.pool`: reads pickled cases from stdin, writes pickled
results to the original stdout; everything else the process prints goes to stderr (the log)."""

from __future__ import annotations

import os
import pickle
import sys


def main() -> None:
    from tests.fuzz.pool import read_frame, write_frame

    answers = os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # prints and native logs must not corrupt the protocol
    sys.stdout = sys.stderr
    import onnxruntime  # noqa: F401 - imported before the first case's time limit starts

    from tests.fuzz.execute import classify

    write_frame(answers, b"ready")
    requests = sys.stdin.buffer
    while True:
        frame = read_frame(requests)
        if frame is None:
            return
        write_frame(answers, pickle.dumps(classify(pickle.loads(frame))))


if __name__ == "__main__":
    main()
