"""NumPy arrays in and out of ONNX Runtime for every element type the ops take, bfloat16 and float8
included (ORT's NumPy bridge has no such types: their bits travel as unsigned integers of the same
width). The one place tests convert; element types follow onnx.helper's NumPy mapping."""

from __future__ import annotations

import ctypes

import numpy as np
import onnxruntime as ort
from onnx import helper

_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}


def to_ortvalue(a) -> ort.OrtValue:
    """A CPU OrtValue holding the bits of ``a``."""
    a = np.require(a, requirements="C")  # np.ascontiguousarray would turn a scalar into [1]
    return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(
        a.view(_UINT[a.dtype.itemsize]), helper.np_dtype_to_tensor_dtype(a.dtype))


def to_numpy(v: ort.OrtValue) -> np.ndarray:
    """A NumPy copy of a CPU tensor OrtValue (bfloat16 / float8 as ml_dtypes)."""
    out = np.empty(v.shape(), dtype=helper.tensor_dtype_to_np_dtype(v.element_type()))
    if out.nbytes:
        ctypes.memmove(out.ctypes.data, v.data_ptr(), out.nbytes)
    return out


def run(sess: ort.InferenceSession, feeds: dict) -> list[np.ndarray]:
    """Run ``sess`` on NumPy inputs keyed by input name; every output as NumPy, in order."""
    values = {name: to_ortvalue(a) for name, a in feeds.items()}
    return [to_numpy(v) for v in sess.run_with_ort_values(None, values)]


def run_named(sess: ort.InferenceSession, feeds: dict) -> dict[str, np.ndarray]:
    """Like :func:`run`, keyed by output name."""
    return dict(zip((o.name for o in sess.get_outputs()), run(sess, feeds)))
