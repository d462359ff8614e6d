"""``python -m ascend_moe_onnx.benchmarks``: run the benchmark suites (see benchmarks.runner)."""

import sys

from .runner import main

sys.exit(main())
