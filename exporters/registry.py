"""Where each torch front end registers itself, next to its definition: the function that defines
its torch ops (:func:`torch_ops`) and, per torch op, the dynamo translation with its TorchScript
symbolic (:func:`translation`, :func:`symbolic`). ``exporters`` imports every ``*_onnx`` module,
so these tables hold every front end; ``exporters.define_torch_ops``, ``custom_translation_table`` and
``register_torchscript_symbolics`` read them."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from ascend_moe_onnx import onnx_schemas

from ._torch_lib import torchscript_symbolic


@dataclass
class FrontEnd:
    """A torch op and its two ONNX exports."""

    op: str  # "namespace::name"
    translation: Callable | None = None  # dynamo (onnxscript)
    symbolic: Callable | None = None  # legacy TorchScript exporter

    @property
    def namespace(self) -> str:
        return self.op.split("::")[0]

    @property
    def name(self) -> str:
        return self.op.split("::")[1]


_FRONT_ENDS: dict[str, FrontEnd] = {}
TORCH_OP_DEFINITIONS: list[Callable[[], None]] = []


def torch_ops(define: Callable[[], None]) -> Callable[[], None]:
    """Decorator of a module's ``define_torch_ops()`` (idempotent): ``exporters.define_torch_ops``
    calls it."""
    if define not in TORCH_OP_DEFINITIONS:
        TORCH_OP_DEFINITIONS.append(define)
    return define


def _entry(op: str, field: str) -> FrontEnd:
    entry = _FRONT_ENDS.setdefault(op, FrontEnd(op))
    if getattr(entry, field) is not None:
        raise ValueError(f"exporters: {op} has two {field}s")
    return entry


def translation(op: str) -> Callable[[Callable], Callable]:
    """Decorator of the dynamo translation of torch op ``op`` ("namespace::name")."""

    def register(fn: Callable) -> Callable:
        _entry(op, "translation").translation = fn
        return fn

    return register


def symbolic(op: str, schema: str) -> Callable[[Callable], Callable]:
    """Decorator of ``fn(g, *args)``, the TorchScript symbolic of torch op ``op`` whose torch
    schema is ``schema`` (the arguments in its order; constants as Python values)."""

    def register(fn: Callable) -> Callable:
        _entry(op, "symbolic").symbolic = torchscript_symbolic(schema, fn)
        return fn

    return register


def front_ends() -> list[FrontEnd]:
    """Every registered front end; each must have both exports."""
    for entry in _FRONT_ENDS.values():
        missing = [f for f in ("translation", "symbolic") if getattr(entry, f) is None]
        if missing:
            raise ValueError(f"exporters: {entry.op} has no {' and no '.join(missing)}")
    return list(_FRONT_ENDS.values())


def onnxscript_op(spec: ModuleType) -> Any:
    """The onnxscript ``values.Op`` of an op module of ``onnx_schemas`` (its OP_TYPE and SCHEMA in
    the ascend.moe opset), for its dynamo translation to call."""
    from onnxscript import values

    return values.Op(values.Opset(onnx_schemas.DOMAIN, onnx_schemas.OPSET_VERSION), spec.OP_TYPE, spec.SCHEMA)


def torchscript_name(spec: ModuleType) -> str:
    """``domain::OpType`` of an op module of ``onnx_schemas``, the name a TorchScript ``g.op`` takes."""
    return f"{onnx_schemas.DOMAIN}::{spec.OP_TYPE}"
