"""torch_npu's storage formats on CPU: ``npu_format_cast``, ``npu_format_cast_``, ``get_npu_format``
and ``Format``.

On the NPU a format (ND, FRACTAL_NZ, ...) is how a tensor's storage is laid out; the values the
tensor holds are unchanged. Ascend code casts its weights to NZ once, at load time
(``layer.weight.data = npu_format_cast(layer.weight.data, 29)``). Here the values stay as they are
and the format is recorded per storage, so what the code can observe (``get_npu_format``) is what
torch_npu would report, also after ``param.data = <cast tensor>``.
"""

from __future__ import annotations

import weakref
from enum import IntEnum

import torch

from ._args import fail, require


class Format(IntEnum):
    """torch_npu.Format: the NPU storage formats (torch_npu/npu/_format.py's values)."""

    UNDEFINED = -1
    NCHW = 0
    NHWC = 1
    ND = 2
    NC1HWC0 = 3
    FRACTAL_Z = 4
    NC1HWC0_C04 = 12
    HWCN = 16
    NDHWC = 27
    FRACTAL_NZ = 29
    NCDHW = 30
    NDC1HWC0 = 32
    FRACTAL_Z_3D = 33
    NC = 35
    NCL = 47
    FRACTAL_NZ_C0_16 = 50
    FRACTAL_NZ_C0_32 = 51
    FRACTAL_NZ_C0_2 = 52
    FRACTAL_NZ_C0_4 = 53
    FRACTAL_NZ_C0_8 = 54

    def __str__(self):
        return self.name


# storage -> its format; a storage never cast is ND (torch_npu's format of a tensor it creates)
_FORMATS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_VALID = frozenset(int(f) for f in Format if f is not Format.UNDEFINED)


def get_npu_format(self) -> Format:
    """torch_npu.get_npu_format: the storage format of ``self`` (``Format.ND`` unless it was cast)."""
    require(isinstance(self, torch.Tensor), "get_npu_format", "self", "must be a tensor", self)
    return Format(_FORMATS.get(self.untyped_storage(), Format.ND))


def _acl_format(fn: str, acl_format) -> int:
    if isinstance(acl_format, torch.Tensor):  # the .Tensor overload: dst's format
        return int(get_npu_format(acl_format))
    if isinstance(acl_format, bool) or not isinstance(acl_format, int) or int(acl_format) not in _VALID:
        fail(fn, "acl_format", f"must be a torch_npu.Format value ({sorted(_VALID)})", acl_format)
    return int(acl_format)


def npu_format_cast(self, acl_format, *, customize_dtype=None, input_dtype=None):
    """torch_npu.npu_format_cast: ``self`` in storage format ``acl_format`` (an int, a ``Format`` or a
    tensor whose format to take). Values unchanged: ``self`` itself when it already has that format,
    else a copy recorded with the new format (on the NPU a new storage too)."""
    fmt = _acl_format("npu_format_cast", acl_format)
    if int(get_npu_format(self)) == fmt:
        return self
    out = self.clone(memory_format=torch.contiguous_format)
    if fmt != Format.ND:
        _FORMATS[out.untyped_storage()] = fmt
    return out


def npu_format_cast_(self, acl_format, *, customize_dtype=None, input_dtype=None):
    """torch_npu.npu_format_cast_: records ``acl_format`` (an int, a ``Format`` or a tensor whose
    format to take) as ``self``'s storage format, in place; the values are unchanged."""
    fmt = _acl_format("npu_format_cast_", acl_format)
    storage = self.untyped_storage()
    if fmt == Format.ND:
        _FORMATS.pop(storage, None)
    else:
        _FORMATS[storage] = fmt
    return self


__all__ = ["Format", "get_npu_format", "npu_format_cast", "npu_format_cast_"]
