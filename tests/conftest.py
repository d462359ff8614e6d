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
    parser.addoption("--all-families", action="store_true", default=os.environ.get("MOE_ALL_FAMILIES") == "1",
                     help="export every transformers MoE family of the table (slow; a few by default)")


def pytest_configure(config):
    # Registered here, not in pyproject, so the suite run from an installed wheel knows it too.
    config.addinivalue_line("markers", "full_size: real-size model presets (opt in with --full-size)")
    config.addinivalue_line("markers", "all_families: the full HF family table (opt in with --all-families)")


def pytest_collection_modifyitems(config, items):
    for flag, marker in (("--full-size", "full_size"), ("--all-families", "all_families")):
        if config.getoption(flag):
            continue
        skip = pytest.mark.skip(reason=f"long run: opt in with {flag}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def library_path() -> str:
    """Path of the built custom-op library."""
    from ascend_moe_onnx import ort_custom_ops

    return ort_custom_ops.get_library_path()
