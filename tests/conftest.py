"""pytest configuration: opt-in flags for long runs, shared fixtures."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# `tests.*` helper modules import as a package from the repository root.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def pytest_addoption(parser):
    parser.addoption("--full-size", action="store_true", default=os.environ.get("MOE_FULL_SIZE") == "1",
                     help="also run the real-size model presets (slow)")


def pytest_configure(config):
    # Registered here, not in pyproject, so the suite run from an installed wheel knows it too.
    config.addinivalue_line("markers", "full_size: real-size model presets (opt in with --full-size)")


def pytest_collection_modifyitems(config, items):
    if config.getoption("--full-size"):
        return
    skip = pytest.mark.skip(reason="real-size preset: run with --full-size")
    for item in items:
        if "full_size" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session")
def library_path() -> str:
    """Path of the built custom-op library."""
    from ascend_moe_onnx import ort_custom_ops

    return ort_custom_ops.get_library_path()
