"""Export targets: the runtime an exported graph is meant for, and what that runtime runs on its
device (``exporters.export(..., target=)``, ``moe-onnx export --target``).

- ``cpu`` (default): ONNX Runtime's CPU EP (and CUDA). Opset 20; the ``ort`` expert formulation is
  an ``If`` between the library's MoeRoutedExperts and ``com.microsoft.MoE`` (exporters.experts_graph).
- ``cann``: ONNX Runtime's CANN EP (onnxruntime-cann 1.24.4, ``enable_cann_graph=0``) on Ascend
  NPUs. The EP runs a standard node on the NPU only where its kernel registry has a kernel for
  the node's since-version and element type (ort_custom_ops.cann_placement: ``CANN_EP_KERNELS``),
  and runs everything else on the CPU, with copies.
  So this target exports opset 18 (Cast-13 and Reshape-14 have CANN kernels, their opset-19
  versions do not), MoeRoutedExperts at every size instead of the ``If`` (the EP has no kernel for
  ``If``, ``com.microsoft.MoE``, ``ScatterElements`` or ``ReduceSum``), the shared expert as its own
  MoeRoutedExperts call, and a ``Gemm`` that is not float16 as MatMul (+ Mul, Add): the EP's Gemm
  kernel is float16 only. Quantized experts (``weights_quant``) of a float16 / bfloat16 block are
  the op family's chain in the block's dtype (exporters.quantized_chain): MoeRoutedExperts'
  quantized form runs on the host. ``cann_host_nodes`` names what would still run on the host.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ascend_moe_onnx.onnx_schemas._common import walk_graphs
from ascend_moe_onnx.ort_custom_ops.cann_placement import CANN_EP_KERNELS, CANN_OPSET, cann_host_nodes  # noqa: F401

TARGETS = ("cpu", "cann")
DEFAULT = "cpu"


class TargetError(ValueError):
    """An unknown target, or an option the target cannot honour (the message says which)."""


def check(target: str) -> str:
    """``target`` if known, else a TargetError naming the known ones."""
    if target not in TARGETS:
        raise TargetError(f"target: unknown target '{target}' (known: {', '.join(TARGETS)})")
    return target


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
    """Rewrite, in place, the standard nodes the CANN EP cannot run on the NPU into ones it can: a
    ``Gemm`` that is not float16 (the EP's Gemm kernel is float16 only) becomes MatMul (+ Mul, Add).
    Returns ``model``."""
    from ascend_moe_onnx.ort_custom_ops.cann_placement import value_types

    types = value_types(model)
    for graph in walk_graphs(model.graph):
        initializers = {t.name: t for t in graph.initializer}
        nodes = []
        for n, node in enumerate(graph.node):
            replaced = None
            if node.op_type == "Gemm" and node.domain in ("", "ai.onnx") and types.get(node.input[0]) != TensorProto.FLOAT16:
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
