"""Shared helpers: ONNX Runtime sessions and IO bindings, NumPy <-> ORT values, torch threads."""

from __future__ import annotations

from typing import TYPE_CHECKING

import ml_dtypes
import numpy as np
import onnx
import torch

if TYPE_CHECKING:
    import onnxruntime as ort

PROVIDERS = ["CPUExecutionProvider"]


def session(model: bytes | onnx.ModelProto, threads: int, library: bool):
    """An ORT CPU session with ``threads`` intra-op threads, with or without the custom-op library."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.log_severity_level = 3  # shape-mismatch warnings of the exported graphs are not news here
    # ORT's pool threads spin-wait for tens of ms after their work unless told to stop when Run()
    # returns; spinning, they would steal the cores of the next candidate in the interleaving.
    # Inside a Run (between the nodes of a graph) they still spin as usual.
    so.add_session_config_entry("session.force_spinning_stop", "1")
    if library:
        ort_custom_ops.register(so)
    data = model if isinstance(model, bytes) else model.SerializeToString()
    return ort.InferenceSession(data, so, providers=PROVIDERS)


def ort_value(a: np.ndarray):
    """An OrtValue over ``a``'s memory (bfloat16 passed as its bits: ORT's NumPy bridge lacks it)."""
    import onnxruntime as ort

    a = np.ascontiguousarray(a)
    if a.dtype == ml_dtypes.bfloat16:
        return ort.OrtValue.ortvalue_from_numpy_with_onnx_type(a.view(np.uint16), onnx.TensorProto.BFLOAT16)
    return ort.OrtValue.ortvalue_from_numpy(a)


class BoundRun:
    """A zero-argument callable running a session on its IO binding (``binding``); ``keep`` holds
    the bound OrtValues alive."""

    def __init__(self, sess: ort.InferenceSession, binding: ort.IOBinding, keep: list[ort.OrtValue]) -> None:
        self.sess, self.binding, self.keep = sess, binding, keep

    def __call__(self) -> None:
        self.sess.run_with_iobinding(self.binding)


def bound_runner(sess: ort.InferenceSession, inputs: dict[str, np.ndarray],
                 outputs: dict[str, np.ndarray] | None = None) -> BoundRun:
    """A :class:`BoundRun` of ``sess`` through an IO binding: inputs bound once (no copy per call);
    outputs written into the given arrays, or allocated by ORT from its arena."""
    binding = sess.io_binding()
    keep = []  # the OrtValues must outlive the binding
    for name, a in inputs.items():
        v = ort_value(a)
        keep.append(v)
        binding.bind_ortvalue_input(name, v)
    for o in sess.get_outputs():
        if outputs is not None and o.name in outputs:
            v = ort_value(outputs[o.name])
            keep.append(v)
            binding.bind_ortvalue_output(o.name, v)
        else:
            binding.bind_output(o.name)
    return BoundRun(sess, binding, keep)


def bound_output(run, index: int) -> np.ndarray:
    """Output ``index`` of the last call of a ``bound_runner`` as NumPy (integer outputs only)."""
    return run.binding.get_outputs()[index].numpy()


def to_torch(a: np.ndarray) -> torch.Tensor:
    """NumPy -> torch sharing memory (ml_dtypes.bfloat16 -> torch.bfloat16)."""
    if a.dtype == ml_dtypes.bfloat16:
        return torch.from_numpy(a.view(np.int16)).view(torch.bfloat16)
    return torch.from_numpy(a)


class torch_threads:
    """Context manager: torch's intra-op thread count set to ``n`` inside, restored after."""

    def __init__(self, n: int):
        self.n = n

    def __enter__(self):
        self.before = torch.get_num_threads()
        torch.set_num_threads(self.n)
        return self

    def __exit__(self, *exc):
        torch.set_num_threads(self.before)
        return False
