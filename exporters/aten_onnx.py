"""Translations of torch's own ops where torch.onnx's (onnxscript's torchlib) cannot take what
Ascend model code gives them; merged into ``export.custom_translation_table()``.

Each one only widens the input types torchlib's function takes and then calls that function, so
the ONNX it writes is torchlib's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from onnxscript import ir
from onnxscript import opset18 as op
from onnxscript.function_libs.torch_lib.ops import core


def repeat_interleave_counts(repeats, output_size=None):
    """``aten::repeat_interleave.Tensor`` (``torch.repeat_interleave(x, counts)`` decomposes to it):
    torchlib builds a ``Range`` from int64 constants and the counts' sum, which ONNX requires to share
    one type, so int32 counts (torch_npu's ``histc`` of int32 ids gives them) fail there. They are
    widened to int64 and the indices returned as int32, the counts' dtype, as torch returns them."""
    if repeats.dtype == ir.DataType.INT64:
        return core.aten_repeat_interleave_Tensor(repeats)
    return op.CastLike(core.aten_repeat_interleave_Tensor(op.Cast(repeats, to=ir.DataType.INT64)), repeats)


def aten_translations() -> dict[Any, Callable]:
    """``{aten OpOverload: translation}`` for the table given to ``torch.onnx.export``."""
    return {torch.ops.aten.repeat_interleave.Tensor: repeat_interleave_counts}
