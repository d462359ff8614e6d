"""Real-size presets (published hidden size, expert count, top-k, routing; random weights with the
expert width shrunk to fit 1 GiB): the same graph-level checks as the tiny suite.
Opt in with ``pytest --full-size`` (about 30 s and up to 8 GiB of memory per block)."""

from __future__ import annotations

import pytest

from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.models import presets

CASES = [(name, presets.default_dtype(name)) for name in presets.PRESETS] + [
    ("deepseek-v3", "bfloat16"), ("qwen3-moe", "bfloat16"), ("mixtral", "float16")]


@pytest.mark.full_size
@pytest.mark.parametrize("name,dtype", CASES, ids=[f"{n}-{d}" for n, d in CASES])
def test_full_size_block(name, dtype):
    checks = verify.verify_preset(name, "full", dtype, token_counts=(1, 16, 128))
    table = verify.format_table(checks)
    print(table, *verify.describe_near_ties(checks), sep="\n")
    assert all(c.passed for c in checks), table
