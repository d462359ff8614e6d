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
- ``ge``: CANN's graph engine (``atc --framework=5``, or the CANN EP with ``enable_cann_graph=1``),
  which reads the whole graph with its ONNX parser and the project's plugin (ge_plugin). Opset 18
  (the newest version GE's parser registers for every standard op the layers use,
  ``ge_plugin.ge_ir.GE_ONNX_OPSETS``), routed experts as the op family's chain (exporters.ge_chain)
  with GroupedMatmul weights [E, K, N], every node output named (the parser joins an output named
  "" to every "" input), index inputs in the one integer type GE takes, and a warning for FLOAT
  attributes that the parser's ``%g`` (6 significant digits) would change; nodes GE cannot express
  are refused with the plugin's reason (``rewrite_for_ge``).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from ascend_moe_onnx.ge_plugin import ge_ir
from ascend_moe_onnx.ge_plugin import mapping as ge_mapping
from ascend_moe_onnx.onnx_schemas._common import DOMAIN, walk_graphs
from ascend_moe_onnx.ort_custom_ops.cann_placement import CANN_EP_KERNELS, CANN_OPSET, cann_host_nodes  # noqa: F401

TARGETS = ("cpu", "cann", "ge")
DEFAULT = "cpu"


# The opset of the ge target: GE's ONNX parser looks standard nodes up as ai.onnx::<opset>::<Op>.
GE_OPSET = 18


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
            standard = node.domain in ("", "ai.onnx")
            if node.op_type == "Gemm" and standard and types.get(node.input[0]) != TensorProto.FLOAT16:
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


def _name_empty_outputs(graph: onnx.GraphProto, taken: set) -> None:
    """Give every output named "" a unique name: GE's parser wires an output "" to every "" input."""
    for _n, node in enumerate(graph.node):
        for i, out in enumerate(node.output):
            if out == "":
                name, k = f"{node.name or node.op_type}_unused_output{i}", 0
                while name in taken:
                    k += 1
                    name = f"{node.name or node.op_type}_unused_output{i}_{k}"
                taken.add(name)
                node.output[i] = name


def _ge_index_types(op_type: str, variant: str) -> dict[str, int]:
    """Schema input name -> the ONNX element type GE's op takes, for its index inputs that need one."""
    schema = ge_mapping.SCHEMAS[op_type]
    ge = ge_ir.GE_OPS[variant]
    onnx_of = {3: TensorProto.INT32, 9: TensorProto.INT64}
    out: dict[str, int] = {}
    for gi in ge.inputs:
        p = next((p for p in schema.inputs if p.name == gi.name), None)
        if p is not None:
            code = ge_mapping.index_cast(schema, p, gi)
            if code >= 0:
                out[p.name] = onnx_of[code]
    return out


def ge_refusal(node: onnx.NodeProto) -> str | None:
    """Why the plugin would refuse this ascend.moe node (its logged reason), or None."""
    if node.op_type in ge_mapping.REFUSED_OPS:
        return ge_mapping.REFUSED_OPS[node.op_type]
    m = ge_mapping.MAPPINGS.get(node.op_type)
    if m is None:
        return f"no GE mapping for {node.op_type}"
    names = [p.name for p in ge_mapping.SCHEMAS[node.op_type].inputs]
    given = {names[i] for i, v in enumerate(node.input) if v}
    for name, reason in m.refused_inputs.items():
        if name in given:
            return f"input '{name}' is given: {reason}"
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    for name, (value, reason) in m.refused_values.items():
        if attrs.get(name) == value:
            return f"attribute '{name}' = {value}: {reason}"
    if not any(set(v.present) <= given and not set(v.absent) & given for v in m.variants):
        return "no GE operator takes this combination of inputs"
    return None


def _variant(node: onnx.NodeProto) -> str:
    names = [p.name for p in ge_mapping.SCHEMAS[node.op_type].inputs]
    given = {names[i] for i, v in enumerate(node.input) if v}
    return next(v.ge_op for v in ge_mapping.MAPPINGS[node.op_type].variants
                if set(v.present) <= given and not set(v.absent) & given)


def g_format_changes(node: onnx.NodeProto) -> list[str]:
    """The FLOAT attributes of ``node`` that GE's parser would read differently (it prints them with
    ``%g``: 6 significant digits), as "name: value -> printed"."""
    out = []
    for a in node.attribute:
        if a.type == onnx.AttributeProto.FLOAT and ge_mapping.g_value(a.f) != np.float32(a.f):
            out.append(f"{a.name}: {float(np.float32(a.f))!r} -> {ge_mapping.g_format(a.f).strip(chr(34))}")
    return out


def rewrite_for_ge(model: onnx.ModelProto) -> list[str]:
    """Make ``model`` (in place) what GE's ONNX parser and the plugin read as intended: outputs named,
    index inputs cast to the type GE takes, GroupedMatmul weights stored [E, K, N]. A TargetError for
    a node the plugin refuses or a standard op GE's parser does not register at the model's opset;
    returns warnings (FLOAT attributes ``%g`` changes)."""
    from ascend_moe_onnx.ort_custom_ops.cann_placement import value_types

    types = value_types(model)
    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), None)
    taken = {v for g in walk_graphs(model.graph) for n in g.node for v in (*n.input, *n.output)}
    taken |= {v.name for v in (*model.graph.input, *model.graph.initializer)}
    warnings_, unknown = [], []
    for graph in walk_graphs(model.graph):
        _name_empty_outputs(graph, taken)
        initializers = {t.name: t for t in graph.initializer}
        nodes = []
        for node in graph.node:
            if node.domain in ("", "ai.onnx"):
                if opset not in ge_ir.GE_ONNX_OPSETS.get(node.op_type, ()):
                    unknown.append(f"{node.op_type} '{node.name}'")
            elif node.domain != DOMAIN:
                raise TargetError(f"target 'ge': node '{node.name}' ({node.domain}::{node.op_type}) has no GE "
                                  f"operator or plugin")
            if node.domain != DOMAIN:
                nodes.append(node)
                continue
            if node.op_type == "GroupedMatmul":
                _gmm_weight_ekn(graph, node, initializers)
            reason = ge_refusal(node)
            if reason is not None:
                raise TargetError(f"target 'ge': node '{node.name}' ({node.op_type}): {reason}")
            warnings_ += [f"{node.op_type} '{node.name}' {c}" for c in g_format_changes(node)]
            for _i, (name, want) in enumerate(_ge_index_types(node.op_type, _variant(node)).items()):
                k = [p.name for p in ge_mapping.SCHEMAS[node.op_type].inputs].index(name)
                v = node.input[k] if k < len(node.input) else ""
                if v and types.get(v) != want:
                    cast = f"{node.name or node.op_type}_{name}_as_ge_type"
                    nodes.append(helper.make_node("Cast", [v], [cast], name=cast + "_cast", to=want))
                    node.input[k] = cast
            nodes.append(node)
        del graph.node[:]
        graph.node.extend(nodes)
    used = {i for g in walk_graphs(model.graph) for node in g.node for i in node.input}
    kept = [t for t in model.graph.initializer if t.name in used or t.name in {o.name for o in model.graph.output}]
    del model.graph.initializer[:]
    model.graph.initializer.extend(kept)
    if unknown:
        raise TargetError(f"target 'ge': GE's ONNX parser registers no opset-{opset} version of: "
                          + "; ".join(unknown[:8]) + (f"; ... ({len(unknown)} in all)" if len(unknown) > 8 else ""))
    return warnings_


def _gmm_weight_ekn(graph: onnx.GraphProto, node: onnx.NodeProto, initializers: dict) -> None:
    """A GroupedMatmul with ``transpose_weight`` 1 ([E, N, K]) rewritten to take its weight as
    [E, K, N] (a transposed copy of the initializer): GE's transpose_weight is not enabled."""
    attrs = {a.name: a for a in node.attribute}
    if "transpose_weight" not in attrs or attrs["transpose_weight"].i == 0:
        return
    weight = initializers.get(node.input[1])
    if weight is None or weight.data_location == TensorProto.EXTERNAL or weight.data_type != TensorProto.FLOAT and \
            weight.data_type not in (TensorProto.FLOAT16, TensorProto.BFLOAT16, TensorProto.INT8):
        raise TargetError(f"target 'ge': GroupedMatmul '{node.name}' has transpose_weight 1 and its weight is not an "
                          f"in-memory float / int8 initializer: GE takes weights [E, K, N] only")
    dims = list(weight.dims)
    width = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.uint16, TensorProto.BFLOAT16: np.uint16,
             TensorProto.INT8: np.int8}[weight.data_type]
    raw = weight.raw_data if weight.HasField("raw_data") else numpy_helper.to_array(weight).tobytes()
    arr = np.frombuffer(raw, width).reshape(dims).transpose(0, 2, 1)
    name = f"{node.input[1]}_ekn"
    graph.initializer.append(helper.make_tensor(name, weight.data_type, list(arr.shape),
                                                np.ascontiguousarray(arr).tobytes(), raw=True))
    node.input[1] = name
    attrs["transpose_weight"].i = 0
