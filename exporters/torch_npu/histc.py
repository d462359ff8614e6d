"""``torch.histc`` on integer tensors, as torch_npu computes it on the NPU.

torch's CPU kernel (and its meta kernel, so also export) takes floating tensors only; torch_npu's
``histc`` (op-plugin ``op_plugin/ops/opapi/HistcKernelNpuOpApi.cpp``, ``aclnnHistc``) also takes
integer ones and returns the counts in the input's dtype. vllm-ascend's all-to-all token dispatcher
counts tokens per expert that way (``torch.histc(topk_ids, bins=E, min=0, max=E)`` on int32 ids).

:func:`install_integer_histc` (called by ``install()`` when this package is ``torch_npu``) routes
integer tensors given to ``torch.histc`` / ``Tensor.histc`` to :func:`integer_histc`; every other
call reaches torch's own function unchanged (floating tensors keep torch's kernel and its errors).
"""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from ._args import require

# aclnnHistc's integer input types (its float ones are torch's own kernel here)
INTEGER_DTYPES = frozenset({torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64})


def integer_histc(input: torch.Tensor, bins: int = 100, min: Any = 0, max: Any = 0) -> torch.Tensor:
    """``torch.histc`` of an integer tensor with torch_npu's semantics: ``bins`` equal-width bins over
    ``[min, max]`` (``max`` falls in the last bin; values outside are not counted; ``min == max``
    takes the data's range, widened by 1 each side if that is one value too), counts in
    ``input.dtype``. Computed with scatter-add, so it exports as ONNX ``ScatterElements``."""
    fn = "histc"
    require(isinstance(input, torch.Tensor) and input.dtype in INTEGER_DTYPES, fn, "input",
            "must be an integer tensor (int8, uint8, int16, int32 or int64)", input)
    require(isinstance(bins, int) and not isinstance(bins, bool) and bins > 0, fn, "bins", "must be > 0", bins)
    lo_s, hi_s = float(min), float(max)
    require(math.isfinite(lo_s), fn, "min", "must be finite", min)
    require(math.isfinite(hi_s), fn, "max", "must be finite", max)
    values = input.reshape(-1).to(torch.float64)
    if lo_s == hi_s:
        # torch_npu (histc_check_and_get_min_max): the data's range, widened by 1 each side when it is
        # one value (or the tensor is empty); tensors here, so a dynamic size stays symbolic
        if input.numel() == 0:
            lo, hi = torch.tensor(lo_s - 1.0, dtype=torch.float64), torch.tensor(hi_s + 1.0, dtype=torch.float64)
        else:
            lo, hi = values.min(), values.max()
            same = lo == hi
            lo, hi = torch.where(same, lo - 1.0, lo), torch.where(same, hi + 1.0, hi)
    else:
        require(lo_s < hi_s, fn, "max", lambda: f"must be larger than min ({min})", max)
        lo = torch.tensor(lo_s, dtype=torch.float64)
        hi = torch.tensor(hi_s, dtype=torch.float64)
    inside = (values >= lo) & (values <= hi)
    index = ((values - lo) * bins / (hi - lo)).floor().clamp(0, bins - 1).to(torch.int64)
    counts = torch.zeros(bins, dtype=input.dtype)
    return counts.scatter_add(0, index, inside.to(input.dtype))


@functools.cache
def install_integer_histc() -> None:
    """Route integer tensors of ``torch.histc`` / ``Tensor.histc`` to :func:`integer_histc` (what
    torch_npu's kernel accepts on its device; the CPU plays the NPU here). Idempotent."""
    torch_histc = torch.histc
    tensor_histc = torch.Tensor.histc

    @functools.wraps(torch_histc)
    def histc(input, bins=100, min=0, max=0, *, out=None):
        if isinstance(input, torch.Tensor) and input.dtype in INTEGER_DTYPES:
            result = integer_histc(input, bins, min, max)
            if out is None:
                return result
            # histc.out: torch_npu checks out's dtype (the input's) and resizes it to [bins]
            require(isinstance(out, torch.Tensor) and out.dtype == input.dtype, "histc", "out",
                    lambda: f"must be a {input.dtype} tensor", out)
            return out.resize_(result.shape).copy_(result)
        if out is not None:
            return torch_histc(input, bins, min, max, out=out)
        return torch_histc(input, bins, min, max)

    @functools.wraps(tensor_histc)
    def histc_method(self, bins=100, min=0, max=0):
        if self.dtype in INTEGER_DTYPES:
            return integer_histc(self, bins, min, max)
        return tensor_histc(self, bins, min, max)

    torch.histc = histc
    torch.Tensor.histc = histc_method  # type: ignore[method-assign]


__all__ = ["INTEGER_DTYPES", "install_integer_histc", "integer_histc"]
