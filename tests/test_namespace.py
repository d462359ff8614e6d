"""The installed distribution exposes one import namespace, ``ascend_moe_onnx``."""

from __future__ import annotations

import subprocess
import sys

PARTS = ("onnx_schemas", "ort_custom_ops", "exporters", "models", "benchmarks", "cli", "hf", "ep")


def test_parts_import_only_under_the_namespace():
    code = (
        "import sys\n"
        + "".join(f"import ascend_moe_onnx.{p}\n" for p in PARTS)
        + "import ascend_moe_onnx.cli.main, ascend_moe_onnx.cli.verify, ascend_moe_onnx.benchmarks.runner\n"
        + f"bare = sorted(set({PARTS!r}) & set(sys.modules))\n"
        + "print(','.join(bare))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/", check=True)
    assert out.stdout.strip() == "", f"imported as top-level packages: {out.stdout.strip()}"
