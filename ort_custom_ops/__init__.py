"""ONNX Runtime custom-op library for the ascend.moe operators (those of ``onnx_schemas.OP_MODULES``).

Load it into a session with :func:`register` (or pass :func:`get_library_path` to
``SessionOptions.register_custom_ops_library``).
"""

from __future__ import annotations

from .cann import CannFallbackWarning, cann_provider, inference_session
from .library import (
    CONSTANT_FOLDING_LIMIT_BYTES,
    CONSTANT_FOLDING_LIMIT_KEY,
    LIBRARY_NAME,
    MIN_ORT_VERSION,
    check_ort_version,
    get_library_path,
    manifest,
    register,
    session_options,
    version_tuple,
)

__all__ = ["LIBRARY_NAME", "MIN_ORT_VERSION", "CONSTANT_FOLDING_LIMIT_KEY", "CONSTANT_FOLDING_LIMIT_BYTES",
           "get_library_path", "register", "manifest", "session_options", "check_ort_version", "version_tuple",
           "cann_provider", "inference_session", "CannFallbackWarning"]
