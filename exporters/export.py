"""``export()``: torch model -> checked ONNX model with one ascend.moe node per op call."""

from __future__ import annotations

import io
import os
import warnings
from typing import Any

import onnx
import torch

import onnx_schemas

# The dynamo exporter emits opset 20 by default; the function bodies need >= 18.
DEFAULT_OPSET = 20


def custom_translation_table() -> dict:
    """``{torch OpOverload: onnxscript translation}`` for ``torch.onnx.export(dynamo=True)``."""
    from . import OPS

    return {getattr(getattr(torch.ops, ns), name).default: fn for ns, name, fn, _ in OPS}


_symbolics_registered: set[int] = set()


def register_torchscript_symbolics(opset_version: int = DEFAULT_OPSET) -> None:
    """Register the legacy TorchScript exporter symbolics (``dynamo=False``) for an opset."""
    from . import OPS

    if opset_version in _symbolics_registered:
        return
    for ns, name, _, symbolic in OPS:
        torch.onnx.register_custom_op_symbolic(f"{ns}::{name}", symbolic, opset_version)
    _symbolics_registered.add(opset_version)


def export(
    model: torch.nn.Module,
    args: tuple,
    path: str | os.PathLike | None = None,
    *,
    kwargs: dict[str, Any] | None = None,
    dynamic_shapes: Any = None,
    input_names: list[str] | None = None,
    output_names: list[str] | None = None,
    opset_version: int = DEFAULT_OPSET,
    attach_functions: bool = True,
    dynamo: bool = True,
    dynamic_axes: dict | None = None,
    check: bool = True,
) -> onnx.ModelProto:
    """Export ``model`` with one ascend.moe node per op call, check it and optionally save it.

    ``attach_functions`` adds the pure-ONNX bodies (model-local functions) so the model also runs
    where the custom-op library is not loaded. ``dynamo=False`` uses the TorchScript exporter
    (``dynamic_axes`` instead of ``dynamic_shapes``).
    """
    onnx_schemas.register()
    model = model.eval() if isinstance(model, torch.nn.Module) else model
    if dynamo:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=FutureWarning)
            program = torch.onnx.export(
                model, args, kwargs=kwargs, dynamo=True,
                custom_translation_table=custom_translation_table(),
                dynamic_shapes=dynamic_shapes, input_names=input_names,
                output_names=output_names, opset_version=opset_version, optimize=True,
                verbose=False,
            )
        proto = program.model_proto
    else:
        register_torchscript_symbolics(opset_version)
        buf = io.BytesIO()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=DeprecationWarning)
            warnings.filterwarnings("ignore", category=FutureWarning)
            torch.onnx.export(
                model, args if kwargs is None else (*args, kwargs), buf, dynamo=False,
                input_names=input_names, output_names=output_names,
                dynamic_axes=dynamic_axes, opset_version=opset_version,
                custom_opsets={onnx_schemas.DOMAIN: onnx_schemas.OPSET_VERSION},
            )
        proto = onnx.load_from_string(buf.getvalue())
    if attach_functions:
        from onnx_schemas.functions import attach_functions as attach

        proto = attach(proto)
    if check:
        onnx.checker.check_model(proto, full_check=True)
    if path is not None:
        onnx.save(proto, os.fspath(path))
    return proto
