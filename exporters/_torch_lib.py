"""Helpers for defining the torch ops: detect existing definitions, dtype names, libraries."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Sequence
from typing import Literal

import ml_dtypes
import numpy as np
import torch

_TORCH_TO_ONNX_NAME = {
    torch.float32: "float",
    torch.float16: "float16",
    torch.bfloat16: "bfloat16",
    torch.float64: "double",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.int32: "int32",
    torch.int64: "int64",
    torch.bool: "bool",
    torch.float8_e4m3fn: "float8e4m3fn",
    torch.float8_e5m2: "float8e5m2",
    torch.float8_e4m3fnuz: "float8e4m3fnuz",
    torch.float8_e5m2fnuz: "float8e5m2fnuz",
    torch.float8_e8m0fnu: "float8e8m0",
}

_LIBRARIES: dict[str, torch.library.Library] = {}
# Element types NumPy holds through ml_dtypes, moved as raw integers of the same width:
# torch dtype -> (ml_dtypes type, torch raw type, NumPy raw type).
_ML_DTYPES = {torch.bfloat16: (ml_dtypes.bfloat16, torch.int16, np.int16),
              torch.float8_e4m3fn: (ml_dtypes.float8_e4m3fn, torch.uint8, np.uint8),
              torch.float8_e5m2: (ml_dtypes.float8_e5m2, torch.uint8, np.uint8),
              torch.float8_e4m3fnuz: (ml_dtypes.float8_e4m3fnuz, torch.uint8, np.uint8),
              torch.float8_e5m2fnuz: (ml_dtypes.float8_e5m2fnuz, torch.uint8, np.uint8),
              # MX scales: the ops' validation then names the input and its type
              torch.float8_e8m0fnu: (ml_dtypes.float8_e8m0fnu, torch.uint8, np.uint8)}
_FROM_ML = {np.dtype(v[0]): (k, v[2]) for k, v in _ML_DTYPES.items()}

# The dispatch key the CPU implementations are registered under: they move data to the host
# (the NumPy references) and back, so they serve every device.
IMPL_KEY = "CompositeExplicitAutograd"


def to_numpy(t: torch.Tensor | None) -> np.ndarray | None:
    """A NumPy array with the same bits (bfloat16 / float8 as ml_dtypes), on the host."""
    if t is None:
        return None
    t = t.detach().cpu().contiguous()
    # through DLPack: Tensor.numpy() would leave the tensor's storage unresizable for good, and model
    # code frees the buffers it passed to an operator (untyped_storage().resize_(0))
    if t.dtype in _ML_DTYPES:
        np_dtype, raw, _ = _ML_DTYPES[t.dtype]
        return np.from_dlpack(t.view(raw)).view(np_dtype)
    try:
        return np.from_dlpack(t)
    except (TypeError, BufferError, RuntimeError) as exc:  # e.g. float4 pairs: no NumPy element type
        raise ValueError(f"a {onnx_type_name(t.dtype)}{list(t.shape)} tensor: element type {t.dtype} has no "
                         "NumPy / ONNX counterpart that these operators take") from exc


def from_numpy(a: np.ndarray, device) -> torch.Tensor:
    """A torch tensor with the same bits on ``device``, in storage of its own as any operator's
    output has: model code frees buffers with ``untyped_storage().resize_(0)``, which storage
    borrowed from NumPy refuses."""
    a = np.ascontiguousarray(a)
    if a.dtype in _FROM_ML:
        dtype, raw = _FROM_ML[a.dtype]
        return torch.from_numpy(a.view(raw)).view(dtype).to(device, copy=True)
    return torch.from_numpy(a).to(device, copy=True)


def onnx_type_name(dtype: torch.dtype) -> str:
    """ONNX-style element type name of a torch dtype ('float', 'bfloat16', ...)."""
    return _TORCH_TO_ONNX_NAME.get(dtype, str(dtype).replace("torch.", ""))


def described(t: torch.Tensor | None):
    """``(shape, onnx type name)`` of a tensor, or None, for the shared validators."""
    return None if t is None else (tuple(t.shape), onnx_type_name(t.dtype))


def static_described(t: torch.Tensor | None):
    """``described(t)`` with symbolic dims replaced by None (the validators skip unknown dims): what a
    fake kernel validates."""
    desc = described(t)
    if desc is None:
        return None
    shape, dtype = desc
    return tuple(d if isinstance(d, int) else None for d in shape), dtype


def static_inputs(names: Sequence[str], tensors: Sequence[torch.Tensor | None]) -> dict:
    """``{name: static_described(tensor)}``, for the validators that take the inputs by name."""
    return {n: static_described(t) for n, t in zip(names, tensors)}


@functools.cache
def try_import_torch_npu() -> bool:
    """Import torch_npu if it is installed and usable (it needs CANN); never raise."""
    try:
        import torch_npu  # noqa: F401
    except (ImportError, RuntimeError, OSError):
        return False
    return True


def op_defined(namespace: str, name: str) -> bool:
    """Whether ``torch.ops.<namespace>.<name>`` already exists (e.g. from torch_npu)."""
    try:
        getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def library(namespace: str) -> torch.library.Library:
    """The FRAGMENT library this package defines its ops of ``namespace`` in."""
    if namespace not in _LIBRARIES:
        _LIBRARIES[namespace] = torch.library.Library(namespace, "FRAGMENT")
    return _LIBRARIES[namespace]


def define_op(qualname: str, schema: str, impl: Callable, fake: Callable) -> None:
    """Define ``torch.ops.<namespace>.<name>`` (``qualname`` "namespace::name") from its schema
    string, with an implementation for every device and a fake kernel, in this package's library;
    nothing when it exists already (torch_npu's own, or an earlier call)."""
    namespace, name = qualname.split("::")
    if op_defined(namespace, name):
        return
    lib = library(namespace)
    torch.library.define(qualname, schema, lib=lib)
    torch.library.impl(qualname, IMPL_KEY, lib=lib)(impl)
    torch.library.register_fake(qualname, lib=lib)(fake)


def schema_default(value) -> str:
    """A Python default value written as it appears in a torch operator schema."""
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, float):
        return str(np.float32(value))  # shortest form of the float32 default, e.g. 1e-20
    return str(value)


# parse_args kinds: v value, i int, f float, b bool, is int list.
_SymbolicArgKind = Literal["v", "i", "f", "b", "is"]
_SYMBOLIC_ARG_KINDS: dict[str, _SymbolicArgKind] = {
    "Tensor": "v", "Tensor?": "v", "int": "i", "float": "f", "bool": "b", "SymInt": "i", "SymInt?": "i",
    "int[]": "is", "int[]?": "v", "SymInt[]?": "v"}


def torchscript_symbolic(schema: str, fn):
    """``fn(g, *args)`` behind ``torch.onnx.symbolic_helper.parse_args`` (the documented decorator
    for TorchScript symbolics), which passes constant arguments as Python values: the argument kinds
    and names (parse_args reads the names from the signature) come from the op's ``schema``."""
    from torch.onnx.symbolic_helper import parse_args

    args = [a.split("=")[0].split() for a in schema[1:schema.index(") ->")].split(", ") if a != "*"]

    def symbolic(g, *values):
        return fn(g, *values)

    # inspect.signature reads __signature__ (typeshed does not declare the attribute on functions)
    symbolic.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_OR_KEYWORD) for n in ["g"] + [name for _, name in args]])
    symbolic.__doc__ = fn.__doc__
    return parse_args(*(_SYMBOLIC_ARG_KINDS[kind] for kind, _ in args))(symbolic)


def symbolic_present(v) -> bool:
    """Whether a TorchScript symbolic's argument ``v`` is a tensor (not an absent optional one)."""
    return v is not None and not v.node().mustBeNone()


def symbolic_inputs(g, values_in_order):
    """The node's inputs: trailing absent ones dropped, a middle one as a None constant of
    optional type (an empty input name in ONNX)."""
    out = [v if symbolic_present(v) else None for v in values_in_order]
    while out and out[-1] is None:
        out.pop()
    return [v if v is not None else g.op("prim::Constant").setType(torch.OptionalType.ofTensor()) for v in out]


def symbolic_rows_type(out, rows, n_source, h_source):
    """[N, H] of rows' type, when the shapes are known (TorchScript cannot infer custom ops)."""
    t = rows.type()
    if t.dim() is None or n_source.type().dim() is None:
        return out
    n = n_source.type().varyingSizes()[0]
    out.setType(t.with_sizes([n, h_source.type().varyingSizes()[-1]]))
    return out
