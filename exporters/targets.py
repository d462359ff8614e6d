"""Export targets: the runtime an exported graph is meant for, and what that runtime runs on its
device (``exporters.export(..., target=)``, ``moe-onnx export --target``).

- ``cpu`` (default): ONNX Runtime's CPU EP (and CUDA). Opset 20; the ``ort`` expert formulation is
  an ``If`` between the library's MoeRoutedExperts and ``com.microsoft.MoE`` (exporters.experts_graph).
- ``cann``: ONNX Runtime's CANN EP (onnxruntime-cann 1.24.4, ``enable_cann_graph=0``) on Ascend
  NPUs. The EP runs a standard node on the NPU only where its kernel registry has a kernel for
  the node's since-version and element type (``CANN_EP_KERNELS``; ORT matches an open-ended kernel
  only at the version it was registered for), and runs everything else on the CPU, with copies.
  So this target exports opset 18 (Cast-13 and Reshape-14 have CANN kernels, their opset-19
  versions do not), MoeRoutedExperts at every size instead of the ``If`` (the EP has no kernel for
  ``If``, ``com.microsoft.MoE``, ``ScatterElements`` or ``ReduceSum``), the shared expert as its own
  MoeRoutedExperts call, and a float32 ``Gemm`` as MatMul + Add (its CANN kernel is float16 only).
  ``cann_host_nodes`` names what would still run on the host.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ascend_moe_onnx.onnx_schemas._common import walk_graphs

TARGETS = ("cpu", "cann")
DEFAULT = "cpu"
CANN_OPSET = 18  # the opset the cann target exports (see the module doc)

_F, _H, _BF, _D = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE
_I8, _U8, _I16, _I32, _I64, _B = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.INT32,
                                  TensorProto.INT64, TensorProto.BOOL)
_ARITH = frozenset({_F, _H, _D, _I8, _U8, _I16, _I32, _I64})
_FH = frozenset({_F, _H})
# Standard ops the CANN EP of onnxruntime-cann 1.24.4 places on the NPU in an opset-18 model, by the
# element type of their first input (measured on the wheel: tests/cann/test_cann_ep_kernels.py).
# Each becomes one aclopCompileAndExecute call (Reshape, Identity, Flatten, Dropout: a device copy).
CANN_EP_KERNELS: dict[str, frozenset] = {
    "MatMul": frozenset({_F, _H, _BF, _I32}),
    "Gemm": frozenset({_H}),
    "Add": _ARITH, "Sub": _ARITH, "Mul": _ARITH, "Div": _ARITH,
    "Cast": _ARITH | {_B},
    "Abs": frozenset({_F, _H, _I32}),
    "Neg": frozenset({_F, _H, _I8, _I32}),
    "Relu": frozenset({_F, _H, _D, _I8, _I16, _I32, _I64}),
    "Exp": frozenset({_H}),
    "Floor": _FH, "Ceil": _FH, "Round": _FH, "Reciprocal": _FH, "Sqrt": _FH, "Log": _FH, "Erf": _FH,
    "Sin": _FH, "Cos": _FH, "Dropout": _FH,
    "Identity": _ARITH | {_BF, _B}, "Reshape": _ARITH | {_BF, _B},
    "Flatten": frozenset({_F, _H, _I8, _U8, _I16, _I32, _I64}),
}
# Nodes whose outputs describe shapes only: they stay on the host wherever the EP is.
_SHAPE_SOURCES = {"Shape", "Size", "Constant"}


class TargetError(ValueError):
    """An unknown target, or an option the target cannot honour (the message says which)."""


def check(target: str) -> str:
    """``target`` if known, else a TargetError naming the known ones."""
    if target not in TARGETS:
        raise TargetError(f"target: unknown target '{target}' (known: {', '.join(TARGETS)})")
    return target


def _value_types(model: onnx.ModelProto) -> dict[str, int]:
    """Element type of every typed value of the model (after ONNX shape inference)."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    except Exception:  # noqa: BLE001  (an uninferable model: the declared types only)
        inferred = model
    types = {t.name: t.data_type for t in model.graph.initializer}
    for g in walk_graphs(inferred.graph):
        for vi in (*g.input, *g.value_info, *g.output):
            if vi.type.tensor_type.elem_type:
                types[vi.name] = vi.type.tensor_type.elem_type
    return types


def _shape_values(graph: onnx.GraphProto) -> set[str]:
    """Values computed from constants and shapes alone (initializers, Constant, Shape, Size and
    whatever is computed from those only): the shape bookkeeping ONNX Runtime keeps on the host."""
    known = {t.name for t in graph.initializer} | {""}
    for node in graph.node:
        if node.op_type in _SHAPE_SOURCES or (node.input and all(i in known for i in node.input)):
            known.update(node.output)
    return known


def cann_host_nodes(model: onnx.ModelProto) -> list[str]:
    """The nodes of ``model`` the CANN EP would run on the host although they compute on data: every
    standard node without a CANN kernel for its opset-18 version and input type, and every node of
    another domain but ascend.moe (control flow included), as "op_type 'name' (why)". Shape
    bookkeeping (``_shape_values``) is left out."""
    from ascend_moe_onnx.onnx_schemas import DOMAIN

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    types = _value_types(model)
    found = []
    for graph in walk_graphs(model.graph):
        shape_only = _shape_values(graph)
        for node in graph.node:
            if node.domain == DOMAIN or all(o in shape_only for o in node.output):
                continue
            where = f"{node.op_type} '{node.name}'"
            if node.domain not in ("", "ai.onnx"):
                found.append(f"{where} (domain {node.domain}: no CANN kernel)")
            elif opset != CANN_OPSET:
                found.append(f"{where} (opset {opset}: the CANN EP's kernels are checked at opset {CANN_OPSET})")
            elif node.op_type not in CANN_EP_KERNELS:
                found.append(f"{where} (no CANN kernel in onnxruntime-cann 1.24.4)")
            else:
                t = types.get(node.input[0]) if node.input else None
                if t not in CANN_EP_KERNELS[node.op_type]:
                    name = TensorProto.DataType.Name(t).lower() if t else "unknown"
                    found.append(f"{where} (its CANN kernel takes no {name})")
    return found


def _gemm_as_matmul(graph: onnx.GraphProto, node: onnx.NodeProto, initializers: dict, n: int) -> list | None:
    """A ``Gemm`` with an initializer B and transA=0 as MatMul (+ Mul by alpha, + Add of beta·C):
    new nodes, B stored transposed when transB; None when it cannot be rewritten so."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    weight = initializers.get(node.input[1])
    if attrs.get("transA", 0) or weight is None or weight.data_location == TensorProto.EXTERNAL:
        return None
    a, b_name, c = node.input[0], node.input[1], node.input[2] if len(node.input) > 2 else ""
    alpha, beta = float(attrs.get("alpha", 1.0)), float(attrs.get("beta", 1.0))
    b_arr = numpy_helper.to_array(weight)
    name = f"{node.name or 'gemm'}_{n}"
    nodes, new_inits = [], []
    if attrs.get("transB", 0):
        new_inits.append(numpy_helper.from_array(np.ascontiguousarray(b_arr.T), f"{name}_b"))
        b_name = new_inits[-1].name
    y = node.output[0]
    tail = [t for t, on in (("alpha", alpha != 1.0), ("c", bool(c))) if on]
    prod = f"{name}_product" if tail else y
    nodes.append(helper.make_node("MatMul", [a, b_name], [prod], name=f"{name}_matmul"))
    if alpha != 1.0:
        new_inits.append(numpy_helper.from_array(np.array(alpha, b_arr.dtype), f"{name}_alpha"))
        scaled = f"{name}_scaled" if c else y
        nodes.append(helper.make_node("Mul", [prod, new_inits[-1].name], [scaled], name=f"{name}_mul"))
        prod = scaled
    if c:
        if beta != 1.0:
            new_inits.append(numpy_helper.from_array(np.array(beta, b_arr.dtype), f"{name}_beta"))
            nodes.append(helper.make_node("Mul", [c, new_inits[-1].name], [f"{name}_c"], name=f"{name}_mul_c"))
            c = f"{name}_c"
        nodes.append(helper.make_node("Add", [prod, c], [y], name=f"{name}_add"))
    graph.initializer.extend(new_inits)
    return nodes


def rewrite_for_cann(model: onnx.ModelProto) -> onnx.ModelProto:
    """Rewrite, in place, the standard nodes whose formulation the CANN EP runs on the host into
    ones it runs on the NPU: a ``Gemm`` that is not float16 (the EP's Gemm kernel is float16 only)
    becomes MatMul (+ Mul, Add). Returns ``model``."""
    types = _value_types(model)
    for graph in walk_graphs(model.graph):
        initializers = {t.name: t for t in graph.initializer}
        nodes = []
        for n, node in enumerate(graph.node):
            replaced = None
            if node.op_type == "Gemm" and node.domain in ("", "ai.onnx") and types.get(node.input[0]) != _H:
                replaced = _gemm_as_matmul(graph, node, initializers, n)
            nodes.extend(replaced if replaced is not None else [node])
        del graph.node[:]
        graph.node.extend(nodes)
    used = {i for g in walk_graphs(model.graph) for node in g.node for i in node.input}
    used |= {o.name for o in model.graph.output}
    kept = [t for t in model.graph.initializer if t.name in used]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    return model
