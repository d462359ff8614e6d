"""Which nodes of a model ONNX Runtime's CANN EP runs on the NPU (onnxruntime-cann 1.24.4,
``enable_cann_graph=0``): its kernel registry for standard ops as measured on the wheel
(tests/cann/test_aclop.py keeps it honest), and the nodes of a model it would leave to the host.

The EP places a standard node on the NPU only where a kernel matches the node's since-version and
element type, and ORT matches an open-ended kernel only at the version it was registered for: in an
opset-20 model Cast (19) and Reshape (19) find none, in an opset-18 one they do. Every placed node
becomes one ``aclopCompileAndExecute`` call (Reshape, Identity, Flatten, Dropout: a device copy).
"""

from __future__ import annotations

import onnx
from onnx import TensorProto

from ascend_moe_onnx.onnx_schemas._common import walk_graphs

CANN_OPSET = 18  # the opset CANN_EP_KERNELS was measured at (exporters.targets exports it)

_F, _H, _BF, _D = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.DOUBLE
_I8, _U8, _I16, _I32, _I64, _B = (TensorProto.INT8, TensorProto.UINT8, TensorProto.INT16, TensorProto.INT32,
                                  TensorProto.INT64, TensorProto.BOOL)
_ARITH = frozenset({_F, _H, _D, _I8, _U8, _I16, _I32, _I64})
_FH = frozenset({_F, _H})
# Standard ops the CANN EP of onnxruntime-cann 1.24.4 places on the NPU in an opset-18 model, by the
# element type of their first input (measured on the wheel).
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



def value_types(model: onnx.ModelProto) -> dict[str, int]:
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


def shape_values(graph: onnx.GraphProto) -> set[str]:
    """Values computed from constants and shapes alone (initializers, Constant, Shape, Size and
    whatever is computed from those only): the shape bookkeeping ONNX Runtime keeps on the host.
    A node with a subgraph (If, Loop) reads the outer scope's data: never bookkeeping."""
    known = {t.name for t in graph.initializer} | {""}
    for node in graph.node:
        nested = any(a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS) for a in node.attribute)
        if node.op_type in _SHAPE_SOURCES or (not nested and node.input and all(i in known for i in node.input)):
            known.update(node.output)
    return known


def _same_version(op: str, opset: int | None) -> bool:
    """Whether ``op`` at ``opset`` is the version CANN_EP_KERNELS was measured at (ORT matches a
    kernel registered open-ended only at that since-version)."""
    try:
        return onnx.defs.get_schema(op, opset or CANN_OPSET).since_version == \
            onnx.defs.get_schema(op, CANN_OPSET).since_version
    except onnx.defs.SchemaError:
        return False


def cann_host_nodes(model: onnx.ModelProto) -> list[str]:
    """The nodes of ``model`` the CANN EP would run on the host although they compute on data: every
    standard node without a CANN kernel for its opset-18 version and input type, and every node of
    another domain but ascend.moe (control flow included), as "op_type 'name' (why)". Shape
    bookkeeping (``shape_values``) is left out."""
    from ascend_moe_onnx.onnx_schemas import DOMAIN

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    types = value_types(model)
    found = []
    for graph in walk_graphs(model.graph):
        shape_only = shape_values(graph)
        for node in graph.node:
            if node.domain == DOMAIN or all(o in shape_only for o in node.output):
                continue
            where = f"{node.op_type} '{node.name}'"
            if node.domain not in ("", "ai.onnx"):
                found.append(f"{where} (domain {node.domain}: no CANN kernel)")
            elif node.op_type not in CANN_EP_KERNELS:
                found.append(f"{where} (no CANN kernel in onnxruntime-cann 1.24.4)")
            elif not _same_version(node.op_type, opset):
                found.append(f"{where} (its opset-{opset} version has no CANN kernel; opset {CANN_OPSET}'s has)")
            else:
                t = types.get(node.input[0]) if node.input else None
                if t not in CANN_EP_KERNELS[node.op_type]:
                    name = TensorProto.DataType.Name(t).lower() if t else "unknown"
                    found.append(f"{where} (its CANN kernel takes no {name})")
    return found
