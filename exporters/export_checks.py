"""Checks that keep ``export()`` from going silently wrong: dimensions declared dynamic that came
out static, and exporter failures caused by known Ascend-code idioms (docs/ascend-code.md)."""

from __future__ import annotations

import inspect
from collections.abc import Iterator

import onnx
import torch
from torch.fx.experimental.symbolic_shapes import is_concrete_int

_DOC = "docs/ascend-code.md"


class ExportError(RuntimeError):
    """An export that would be wrong or failed for a known reason; the message says what to do."""


def _is_dynamic(spec) -> bool:
    """Whether one dimension's entry of ``dynamic_shapes`` / ``dynamic_axes`` asks for a dynamic size."""
    # A named Dim, Dim.AUTO / Dim.DYNAMIC, or a dynamic_axes name.
    return not (spec is None or isinstance(spec, int) or spec is torch.export.Dim.STATIC)


def _dims_of(spec) -> list[int]:
    """Dynamic dimension indices of one input's spec (``{dim: Dim}``, ``[Dim, None, ...]`` or
    dynamic_axes' ``[dims]``)."""
    if isinstance(spec, dict):
        return sorted(d for d, s in spec.items() if _is_dynamic(s))
    if isinstance(spec, (list, tuple)):
        if all(isinstance(s, int) for s in spec):  # dynamic_axes' list form
            return list(spec)
        return [d for d, s in enumerate(spec) if _is_dynamic(s)]
    return []


def _graph_inputs(proto: onnx.ModelProto) -> list[onnx.ValueInfoProto]:
    initializers = {i.name for i in proto.graph.initializer}
    return [i for i in proto.graph.input if i.name not in initializers]


def _static_onnx_dims(value_info: onnx.ValueInfoProto, dims: list[int]) -> list[tuple[int, int]]:
    shape = value_info.type.tensor_type.shape.dim
    return [(d, shape[d].dim_value) for d in dims if d < len(shape) and shape[d].HasField("dim_value")]


def _declared_by_position(model, args: tuple, kwargs: dict | None,
                          dynamic_shapes) -> list[tuple[str, list[int]] | None]:
    """Per tensor input of the traced program (the tensors among the call's arguments, in order),
    the argument name and its declared dynamic dims; None where nothing is declared. Empty when the
    arguments are not plain tensors (nested inputs: no reliable mapping)."""
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        bound = inspect.signature(forward).bind(*args, **(kwargs or {}))
    except (TypeError, ValueError):
        return []
    names = list(bound.arguments)
    specs = dynamic_shapes if isinstance(dynamic_shapes, dict) else dict(zip(names, dynamic_shapes))
    out = []
    for name in names:
        value = bound.arguments[name]
        if value is None:
            continue
        if not isinstance(value, torch.Tensor):
            return []
        dims = _dims_of(specs.get(name))
        out.append((name, dims) if dims else None)
    return out


def _user_input_shapes(program: torch.export.ExportedProgram) -> list:
    nodes = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    return [nodes[name].meta["val"].shape for name in program.graph_signature.user_inputs]


def specialised_dims(traced, *, model=None, args=(), kwargs=None, dynamic_shapes=None,
                     dynamic_axes=None) -> list[tuple[str, int, int]]:
    """``(input, dim, fixed size)`` for every dimension declared dynamic that the trace fixed.

    ``traced`` is the ExportedProgram of a dynamo export (its input sizes are what the graph
    holds: the ONNX inputs keep the declared names even when the trace specialised them) or the
    ONNX model of a legacy export (with ``dynamic_axes``).
    """
    if dynamic_axes:
        by_name = {i.name: i for i in _graph_inputs(traced)}
        return [(name, d, v) for name, spec in dynamic_axes.items() if name in by_name
                for d, v in _static_onnx_dims(by_name[name], _dims_of(spec))]
    if dynamic_shapes is None:
        return []
    declared = _declared_by_position(model, args, kwargs, dynamic_shapes)
    shapes = _user_input_shapes(traced)
    if len(declared) != len(shapes):
        return []
    return [(decl[0], d, int(shape[d])) for shape, decl in zip(shapes, declared) if decl is not None
            for d in decl[1] if d < len(shape) and is_concrete_int(shape[d])]


class SpecialisedDimsError(ExportError):
    """Dimensions declared dynamic that the traced graph fixes: ``found`` lists (input, dim, size)."""

    def __init__(self, message: str, found: list[tuple[str, int, int]]):
        super().__init__(message)
        self.found = found


def specialisation_error(found: list[tuple[str, int, int]], tried_strict: bool) -> SpecialisedDimsError:
    """The error for dims that came out static."""
    listed = ", ".join(f"input '{n}' dimension {d} (fixed at {v})" for n, d, v in found)
    strict = (" Tracing with torch.export's strict mode (which keeps `shape[:-1].numel()` symbolic) "
              "fixed it too." if tried_strict else "")
    return SpecialisedDimsError(
        f"export: {listed} declared dynamic, but the exported graph fixes it: the model turned that size "
        f"into a Python constant (e.g. `n = x.shape[:-1].numel()` in non-strict tracing, `int(x.shape[0])`, "
        f"or an `int` argument computed from it). The graph would be wrong for any other size.{strict} "
        f"Compute the size with tensor ops or `math.prod(x.shape[:-1])`; {_DOC} lists the idioms.", found)


def traced_specialisation(exc: BaseException) -> ExportError | None:
    """torch.export's refusal of a named dynamic Dim the model specialised, with what to do."""
    text = str(exc)
    if "Constraints violated" not in text:
        return None
    return ExportError(
        "export: a dimension declared dynamic is specialised by the model in both of torch.export's "
        "tracing modes (a Python int computed from a shape, a branch on a size, ...): compute sizes "
        f"with tensor ops or `math.prod(x.shape[:-1])` ({_DOC}). torch.export said:\n{text}")


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        yield link
        link = link.__cause__ or link.__context__


_KNOWN_FAILURES = (
    (("fake tensor in the exported program constant", ".numpy() is not supported for tensor subclasses"),
     "the model reads a tensor through `.data` inside forward (e.g. `torch.matmul(x, layer.weight.data)`) "
     "where torch.export's strict mode traced it (export takes it when non-strict tracing fixed a size), "
     "which cannot: use the parameter itself (`layer.weight`) there, or export with dynamo=False."),
    (("aten.sort', overload='stable'", "aten.sort.stable", "Sort, Out parameter is not supported"),
     "`torch.argsort(..., stable=True)` / `torch.sort(stable=True)` has no ONNX translation: sort unique "
     "keys instead (`torch.argsort(key * n + torch.arange(n))` is stable), or route with "
     "npu_moe_init_routing_v2 / npu_moe_token_permute, which sort stably inside one node."),
)


def explain(exc: BaseException) -> ExportError | None:
    """An :class:`ExportError` saying what to do when ``exc`` comes from a known idiom, else None."""
    text = " ".join(str(e) for e in _chain(exc))
    for needles, advice in _KNOWN_FAILURES:
        if any(n in text for n in needles):
            return ExportError(f"export: {advice} ({_DOC})")
    return None

