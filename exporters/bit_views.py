"""Bit views that change the element width (``t.view(dtype)``, e.g. float8 rows seen as bfloat16),
while exporting.

ONNX has no translation for such a view: ``BitCast`` (opset 26) keeps the width, and ONNX Runtime
has no kernel for it. Ascend code uses the view to move one-byte rows through an operator that
takes wider elements (the recipes route MXFP8 rows as ``x_q.view(torch.bfloat16)`` through
``npu_moe_init_routing_v2`` and view the result back). A row move commutes with the view: the
moved rows of the view are the view of the moved rows. While exporting, :func:`recording` remembers
which tensor each width-changing view was taken of; an operator of the stand-in that only moves
rows asks :func:`source_of` for the source, moves its rows instead and returns the view of the
result (itself recorded), whose own view back to the source's type is then the moved rows themselves. The views are
left in the traced program unused, where the exporter drops them; a view some other operation
reads still reaches the exporter, which refuses it as before.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.utils.weak import WeakIdKeyDictionary

# view -> the tensor it views (keys by identity: a tensor's == is elementwise)
_sources = WeakIdKeyDictionary()
_recording = False


def _width_changing_view(func, args, kwargs) -> torch.dtype | None:
    if func is not torch.Tensor.view or kwargs or len(args) != 2 or not isinstance(args[1], torch.dtype):
        return None
    source, dtype = args
    if not isinstance(source, torch.Tensor) or source.dtype.itemsize == dtype.itemsize:
        return None
    return dtype


class _RecordBitViews(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        dtype = _width_changing_view(func, args, kwargs)
        if dtype is None:
            return func(*args, **(kwargs or {}))
        viewed = args[0]
        source = source_of(viewed)
        if source is not None and source.dtype == dtype and source.dim() == viewed.dim():
            return source  # the view back: the very tensor the view was taken of
        out = func(*args)
        _sources[out] = viewed
        return out


@contextlib.contextmanager
def recording() -> Iterator[None]:
    """Record the width-changing bit views taken inside (only while exporting)."""
    global _recording
    previous = _recording
    _recording = True
    try:
        with _RecordBitViews():
            yield
    finally:
        _recording = previous
        if not previous:
            _sources.clear()


def source_of(t: torch.Tensor) -> torch.Tensor | None:
    """The tensor ``t`` is a width-changing bit view of (recorded while exporting), else None."""
    # strict tracing (dynamo) does not trace the record's weak dictionary: no source there, so a
    # view is left to the exporter, which refuses it
    if not _recording or torch.compiler.is_dynamo_compiling():
        return None
    return _sources.get(t)


__all__ = ["recording", "source_of"]
