"""``moe-onnx info``: a model's ascend.moe nodes, their attributes, and where each would run.

A node runs on the custom-op library's kernel for an execution provider when the library declares
one (its manifest) and that provider is available in this onnxruntime; with the library not loaded
ONNX Runtime inlines the model-local function body of the node (if the model has one).
"""

from __future__ import annotations

from pathlib import Path

import onnx
from onnx import helper

from ascend_moe_onnx.onnx_schemas.functions import OVERLOADS_MIN_ORT

CANN = "CANNExecutionProvider"


def load_model(path) -> onnx.ModelProto:
    """Load an ONNX model, raising FileNotFoundError or ValueError with a one-line message."""
    p = Path(path)
    if not p.is_file():
        raise FileNotFoundError(f"no such file: {path}")
    try:
        return onnx.load(str(p), load_external_data=False)
    except Exception as e:  # protobuf DecodeError and friends
        raise ValueError(f"{path} is not an ONNX model ({type(e).__name__}: {str(e)[:120]})") from None


def _kernels() -> tuple[dict, str]:
    """{op type: set of providers} the custom-op library declares, and a note if it is missing."""
    try:
        from ascend_moe_onnx import ort_custom_ops

        ops = ort_custom_ops.manifest()["ops"]
    except Exception as e:  # library not built, manifest symbol missing, ...
        return {}, f"custom-op library unavailable ({type(e).__name__}: {str(e)[:100]})"
    kernels: dict[str, set] = {}
    for op in ops:
        kernels.setdefault(op["name"], set()).add(op.get("provider", "CPUExecutionProvider"))
    return kernels, ""


def _nodes(model: onnx.ModelProto, domain: str):
    """(where, node) for every node of ``domain`` in the graph, its subgraphs and non-ascend functions."""
    def walk(graph, where):
        for node in graph.node:
            if node.domain == domain:
                yield where, node
            for a in node.attribute:
                subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
                for g in subs:
                    yield from walk(g, f"{where}/{node.name or node.op_type}")

    yield from walk(model.graph, "graph")
    for f in model.functions:
        if f.domain != domain:
            for node in f.node:
                if node.domain == domain:
                    yield f"function {f.domain}::{f.name}", node


def _attributes(node: onnx.NodeProto) -> str:
    from ascend_moe_onnx.onnx_schemas import SCHEMAS
    from ascend_moe_onnx.onnx_schemas._common import resolve_attributes

    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    given = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in given.items()}
    try:
        resolved = resolve_attributes(SCHEMAS[node.op_type], given) if node.op_type in SCHEMAS else given
    except Exception:
        resolved = given
    parts = []
    for name in sorted(resolved):
        value = resolved[name]
        value = f"{value:g}" if isinstance(value, float) else value
        parts.append(f"{name}={value}" + ("" if name in given else " (default)"))
    return ", ".join(parts)


def _shape(vi) -> str:
    t = vi.type.tensor_type
    dims = [d.dim_param or str(d.dim_value) if (d.dim_param or d.HasField("dim_value")) else "?"
            for d in t.shape.dim]
    return f"{vi.name}: {onnx.TensorProto.DataType.Name(t.elem_type).lower()}[{', '.join(dims)}]"


def describe(model: onnx.ModelProto, path: str = "") -> str:
    """A readable report of the model's interface and its ascend.moe nodes."""
    import onnxruntime as ort

    from ascend_moe_onnx.onnx_schemas import DOMAIN

    kernels, lib_note = _kernels()
    available = ort.get_available_providers()
    functions = {(f.name, f.overload) for f in model.functions if f.domain == DOMAIN}
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    lines = [f"{path}: IR version {model.ir_version}, opsets {opsets}",
             "inputs:  " + "; ".join(_shape(v) for v in model.graph.input),
             "outputs: " + "; ".join(_shape(v) for v in model.graph.output),
             f"onnxruntime {ort.__version__}, providers: {', '.join(available)}"]
    if lib_note:
        lines.append(lib_note)
    nodes = list(_nodes(model, DOMAIN))
    lines.append(f"{len(nodes)} {DOMAIN} node(s)")
    for where, node in nodes:
        ins = ", ".join(i if i else "<absent>" for i in node.input)
        lines.append(f"- {node.op_type} '{node.name}' ({where}): inputs [{ins}]")
        lines.append(f"    attributes: {_attributes(node)}")
        have = kernels.get(node.op_type, set())
        if "CPUExecutionProvider" in have:
            cpu = "CPUExecutionProvider: custom-op library kernel"
        else:
            cpu = "CPUExecutionProvider: no library kernel (ORT inlines the function body)"
        if CANN in have and CANN in available:
            cann = f"{CANN}: custom-op library kernel"
        elif CANN in available:
            cann = f"{CANN}: available, but the library has no CANN kernel for this op (falls back to CPU)"
        else:
            cann = f"{CANN}: not in this onnxruntime"
        body = (node.op_type, node.overload) in functions
        without = ("without the library: attached function body"
                   + (f" (overload '{node.overload}', needs onnxruntime >= {OVERLOADS_MIN_ORT})" if node.overload else "")
                   if body else "without the library: no function body, the session would fail")
        lines += [f"    runs on: {cpu}", f"             {cann}", f"             {without}"]
    return "\n".join(lines)
