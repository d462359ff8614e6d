"""ONNX Runtime custom-op library for the ascend.moe operators (MoeGatingTopKHash, MoeReRouting).

Load it into a session with :func:`register` (or pass :func:`get_library_path` to
``SessionOptions.register_custom_ops_library``).
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import json
import os
from pathlib import Path

LIBRARY_NAME = "libascend_moe_ort.so"
_ENV_VAR = "ASCEND_MOE_ORT_LIBRARY"

from .cann import CannFallbackWarning, cann_provider, inference_session  # noqa: E402

__all__ = ["LIBRARY_NAME", "get_library_path", "register", "manifest", "session_options",
           "cann_provider", "inference_session", "CannFallbackWarning"]


def _candidates():
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
    for build in sorted((here.parent / "build").glob("*/" + LIBRARY_NAME)):
        yield build


@functools.lru_cache(maxsize=None)
def get_library_path() -> str:
    """Return the absolute path of the built custom-op shared library."""
    for path in _candidates():
        if path.is_file():
            return str(path)
    raise FileNotFoundError(
        f"{LIBRARY_NAME} not found: build and install the package (pip install .) "
        f"or set {_ENV_VAR} to the library's path"
    )


def register(session_options) -> None:
    """Register the custom-op library on an ``onnxruntime.SessionOptions``."""
    session_options.register_custom_ops_library(get_library_path())


def session_options(intra_op_threads: int | None = None):
    """Return new ``onnxruntime.SessionOptions`` with the library registered."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    if intra_op_threads is not None:
        so.intra_op_num_threads = intra_op_threads
    register(so)
    return so


@functools.lru_cache(maxsize=None)
def manifest() -> dict:
    """Return the ops, providers and attribute defaults that the C++ library declares."""
    lib = ctypes.CDLL(get_library_path())
    fn = lib.AscendMoeOpsManifest
    fn.restype = ctypes.c_char_p
    return json.loads(fn().decode())
