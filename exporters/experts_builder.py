"""What every expert-formulation expansion writes with: a node builder, a node's attributes, the
initializers as arrays, and the error that names what a formulation cannot express."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import onnx
from onnx import TensorProto, helper

if TYPE_CHECKING:
    from .weights_quant import WeightsQuant


class ExpertsError(ValueError):
    """An unknown formulation or one that cannot express a block (message says which and why)."""


class Builder:
    """Appends nodes with unique names (``prefix`` + counter) to a list."""

    def __init__(self, prefix: str, initializers: dict | None = None, weights_quant: WeightsQuant | None = None,
                 types: dict | None = None) -> None:
        self.prefix, self._n = prefix, itertools.count()
        self.nodes: list[onnx.NodeProto] = []
        self.weights_quant = weights_quant
        self.initializers = initializers if initializers is not None else {}  # the model's, by name
        self.types = types if types is not None else {}  # element types the export declared, by value name
        self.new_initializers: list[onnx.TensorProto] = []
        # float32 outputs that are exact widenings of a 16-bit value: name -> (that value, its type)
        self.widened: dict[str, tuple[str, int]] = {}

    def initializer(self, array: np.ndarray, hint: str) -> str:
        name = self.name(hint)
        self.new_initializers.append(onnx.numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def name(self, hint: str = "t") -> str:
        return f"{self.prefix}{hint}_{next(self._n)}"

    def op(self, op_type: str, inputs: list, n_out: int = 1, domain: str = "", outputs: list[str] | None = None,
           **attrs: Any) -> Any:
        """Append a node; its output name, or the list of them when ``n_out`` > 1 (hence ``Any``)."""
        outs = outputs or [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, list(inputs), outs, name=self.name("n"), domain=domain,
                                           **attrs))
        return outs[0] if n_out == 1 else outs

    def const(self, value: Any, dtype: npt.DTypeLike = np.int64) -> str:
        arr = np.asarray(value, dtype=dtype)
        return self.op("Constant", [], value=onnx.numpy_helper.from_array(arr, self.name("c")))

    def dims(self, v: str, start: int, end: int) -> str:
        """``Shape(v)[start:end]``; a constant for an initializer (which may then be dropped)."""
        if v in self.initializers:
            return self.const(list(self.initializers[v].dims[start:end]))
        return self.op("Shape", [v], start=start, end=end)

    def cast(self, v: str, to: int) -> str:
        return self.op("Cast", [v], to=to)


def node_attributes(node: onnx.NodeProto) -> dict[str, Any]:
    """A node's attributes as Python values."""
    return {a.name: helper.get_attribute_value(a) for a in node.attribute}


def refuse_biased(node: onnx.NodeProto, where: str) -> None:
    """An ExpertsError where ``where`` cannot run a placeholder's experts with biases or an
    activation other than SiLU (attributes ``biased`` / ``alpha``, models.experts)."""
    a = node_attributes(node)
    if a.get("biased") or "alpha" in a:
        raise ExpertsError(f"experts: {where} runs SwiGLU experts without biases and with SiLU; these experts "
                           "have biases or g sigmoid(alpha g) (u + beta) (gpt-oss): export them with the 'ort' "
                           "formulation for the CPU or CANN target, unquantized or with weight-only quantization")


def stored_arrays(b: Builder, names: Iterable[str]) -> list[np.ndarray] | None:
    """The initializers ``names`` as arrays, or None when one is not an in-memory initializer."""
    protos = [b.initializers.get(n) for n in names]
    in_memory = [p for p in protos if p is not None and p.data_location != TensorProto.EXTERNAL]
    if len(in_memory) != len(protos):
        return None
    return [onnx.numpy_helper.to_array(p) for p in in_memory]
