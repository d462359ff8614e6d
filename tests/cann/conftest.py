"""tests/cann run in .venv-cann (onnxruntime-cann) with the fake CANN runtime on LD_LIBRARY_PATH
(.ci/jobs/20-cann.sh); elsewhere none of them is collected (the one place that says so)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cann.helpers import CANN_AVAILABLE, fake_runtime


def _runtime_dir() -> Path | None:
    """The LD_LIBRARY_PATH entry holding the fake libascendcl.so."""
    for entry in os.environ.get("LD_LIBRARY_PATH", "").split(":"):
        if entry and (Path(entry) / "libascendcl.so").is_file():
            return Path(entry)
    return None


if not CANN_AVAILABLE:
    # needs onnxruntime-cann and the fake CANN runtime: run .ci/jobs/20-cann.sh
    collect_ignore_glob = ["test_*.py"]

if CANN_AVAILABLE and _runtime_dir() is not None:
    # The custom operator package (libcust_opapi.so) as CANN installs it: found by the kernels'
    # loader through $ASCEND_OPP_PATH/vendors/config.ini, as on an Ascend host.
    os.environ.setdefault("ASCEND_OPP_PATH", str(_runtime_dir() / "opp"))


@pytest.fixture(autouse=True, scope="session")
def _fake_cann_runtime():
    """With onnxruntime-cann, the fake runtime must be the libascendcl.so the EP loads."""
    if CANN_AVAILABLE:
        try:
            fake_runtime()
        except (OSError, RuntimeError) as e:
            pytest.exit(f"tests/cann need the fake CANN runtime on LD_LIBRARY_PATH "
                        f"(LD_LIBRARY_PATH=$(bash scripts/build_cann_test_runtime.sh)): {e}", returncode=1)
    yield
