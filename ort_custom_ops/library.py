"""Where the custom-op library is, how a session loads it, and what it declares."""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import itertools
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import onnxruntime as ort

LIBRARY_NAME = "libascend_moe_ort.so"
_ENV_VAR = "ASCEND_MOE_ORT_LIBRARY"
# The oldest ONNX Runtime the library supports; the library itself refuses older runtimes too
# (their custom-op shape inference crashes on a node with an absent optional input before a
# present one). Kept equal to the library's and pyproject's floor by a test.
MIN_ORT_VERSION = "1.24.1"


def version_tuple(text: str) -> tuple:
    """``(major, minor, patch)`` of a version string such as ``1.32.0+cann``."""
    parts = []
    for piece in text.split("+")[0].split(".")[:3]:
        digits = "".join(itertools.takewhile(str.isdigit, piece))
        parts.append(int(digits) if digits else 0)
    return tuple(parts + [0] * (3 - len(parts)))


def check_ort_version(version: str | None = None) -> None:
    """Raise RuntimeError when ONNX Runtime (``version``, default: the installed one) is too old."""
    if version is None:
        import onnxruntime as ort

        version = ort.__version__
    if version_tuple(version) < version_tuple(MIN_ORT_VERSION):
        raise RuntimeError(
            f"ascend.moe custom ops need ONNX Runtime >= {MIN_ORT_VERSION}, this environment has "
            f"onnxruntime {version}: pip install 'onnxruntime>={MIN_ORT_VERSION}'"
        )


def _candidates() -> Iterator[Path]:
    if os.environ.get(_ENV_VAR):
        yield Path(os.environ[_ENV_VAR])
    here = Path(__file__).resolve().parent
    yield here / LIBRARY_NAME
    try:  # editable installs keep the built library in site-packages, not next to this file
        for f in importlib.metadata.files("ascend-moe-onnx") or ():
            if f.name == LIBRARY_NAME:
                yield Path(f.locate()).resolve()
    except importlib.metadata.PackageNotFoundError:
        pass
    yield from sorted((here.parent / "build").glob("*/" + LIBRARY_NAME))


@functools.cache
def get_library_path() -> str:
    """Return the absolute path of the built custom-op shared library."""
    for path in _candidates():
        if path.is_file():
            return str(path)
    raise FileNotFoundError(
        f"{LIBRARY_NAME} not found: build and install the package (pip install .) "
        f"or set {_ENV_VAR} to the library's path"
    )


def register(session_options: ort.SessionOptions) -> None:
    """Register the custom-op library on an ``onnxruntime.SessionOptions`` (checks the ORT version)."""
    check_ort_version()
    session_options.register_custom_ops_library(get_library_path())


# ORT >= 1.27 does not constant-fold a node whose output exceeds 1 GiB unless this entry says so
# (older versions ignore it). Exported blocks store their expert weights in their final layout, but
# one exported with external data (past protobuf's 2 GiB) keeps the layout nodes, which would
# otherwise run again on every call (0.3 s instead of 0.04 s for 4 tokens, Qwen3-30B-A3B-sized).
CONSTANT_FOLDING_LIMIT_KEY = "optimization.constant_folding_max_output_size_in_bytes"
CONSTANT_FOLDING_LIMIT_BYTES = 2**40


def session_options(intra_op_threads: int | None = None) -> ort.SessionOptions:
    """Return new ``onnxruntime.SessionOptions`` with the library registered (and constant folding
    of expert-weight layouts past 1 GiB allowed: ``CONSTANT_FOLDING_LIMIT_KEY``)."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    if intra_op_threads is not None:
        so.intra_op_num_threads = intra_op_threads
    so.add_session_config_entry(CONSTANT_FOLDING_LIMIT_KEY, str(CONSTANT_FOLDING_LIMIT_BYTES))
    register(so)
    return so


@functools.cache
def manifest() -> dict:
    """Return the ops, providers and attribute defaults that the C++ library declares."""
    lib = ctypes.CDLL(get_library_path())
    fn = lib.AscendMoeOpsManifest
    fn.restype = ctypes.c_char_p
    return json.loads(fn().decode())
