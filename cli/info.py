"""``moe-onnx info``: a model's ascend.moe nodes, their attributes, and where each would run.

A node runs on the custom-op library's kernel for an execution provider when the library declares
one (its manifest) and that provider is available in this onnxruntime; with the library not loaded
ONNX Runtime inlines the model-local function body of the node (if the model has one). On the CANN
EP a node runs natively through an ACLNN operator or through the kernel's fallback: which one, and
why, follows from its attributes and input types (ort_custom_ops.cann, docs/ascend.md).
"""

from __future__ import annotations

import os
from pathlib import Path

import onnx
from onnx import helper

from ascend_moe_onnx.onnx_schemas.functions import OVERLOADS_MIN_ORT

CANN = "CANNExecutionProvider"


def load_model(path: str | os.PathLike) -> onnx.ModelProto:
    """Load an ONNX model, raising FileNotFoundError or ValueError with a one-line message."""
    from ascend_moe_onnx.onnx_schemas import load_model as load

    return load(Path(path))


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


def _types(model: onnx.ModelProto) -> dict:
    """{value name: (ONNX type name, dims or None)} for every typed value of the main graph."""
    try:
        from ascend_moe_onnx import onnx_schemas

        onnx_schemas.register()
        model = onnx.shape_inference.infer_shapes(model)
    except Exception:  # inference is a bonus: declared types still count
        pass
    out = {}
    for vi in list(model.graph.input) + list(model.graph.value_info) + list(model.graph.output):
        t = vi.type.tensor_type
        if t.elem_type:
            dims = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] \
                if t.HasField("shape") else None
            out[vi.name] = (onnx.helper.tensor_dtype_to_np_dtype(t.elem_type).name
                            if t.elem_type != onnx.TensorProto.BFLOAT16 else "bfloat16", dims)
    for init in model.graph.initializer:
        out[init.name] = (onnx.TensorProto.DataType.Name(init.data_type).lower(), list(init.dims))
    return {k: ("float" if v[0] == "float32" else v[0], v[1]) for k, v in out.items()}


def _family_facts(op_type: str, typ, present: list) -> dict:
    """What AscendMoeCannPath reads of the MoE op family's inputs (ort_custom_ops/src/cann_facts.h)."""
    def dim(i, axis):
        dims = typ(i)[1]
        return dims[axis] if dims and len(dims) > abs(axis) and isinstance(dims[axis], int) else None

    if op_type == "GroupedMatmul":
        scale_dims = typ(6)[1]  # antiquant_scale [E, N] or [E, G, N]
        return {"x_type": typ(0)[0], "weight_type": typ(1)[0], "bias_type": typ(3)[0] if present[3] else None,
                "scale_type": typ(4)[0] if present[4] else None, "experts": dim(1, 0),
                "antiquant_groups": dim(6, 1) if scale_dims and len(scale_dims) == 3 else 1}
    if op_type == "MoeRoutedExperts":
        return {"experts": dim(3, 0), "weight_type": typ(3)[0]}
    if op_type == "MoeFinalizeRoutingV2":
        return {"x_type": typ(0)[0], "scales_type": typ(5)[0] if present[5] else None,
                "k": dim(5, 1) if present[5] else 1, "experts": dim(4, 0) if present[4] else None}
    if op_type == "MoeTokenPermute":
        dims = typ(1)[1]
        return {"k": (dim(1, 1) if len(dims) == 2 else 1) if dims else None}
    if op_type == "MoeTokenUnpermute":
        return {"k": dim(2, 1) if present[2] else 1}
    if op_type == "SwiGlu":
        dims = typ(0)[1]
        return {"rank": len(dims) if dims is not None else None}
    return {}


def cann_path(node: onnx.NodeProto, types: dict) -> str:
    """How the node runs on the CANN EP: natively through which ACLNN call, or the fallback and why."""
    from ascend_moe_onnx.onnx_schemas import SCHEMAS
    from ascend_moe_onnx.onnx_schemas._common import resolve_attributes
    from ascend_moe_onnx.ort_custom_ops import cann

    given = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    try:
        attrs = resolve_attributes(SCHEMAS[node.op_type], given)
    except Exception as e:
        return f"invalid node ({e})"
    present = [bool(n) for n in node.input] + [False] * 8

    def typ(i):
        return types.get(node.input[i], (None, None)) if present[i] else (None, None)

    if node.op_type == "MoeReRouting":
        tokens, scales = typ(0), typ(2)
        hidden = tokens[1][1] if tokens[1] and len(tokens[1]) == 2 else None
        call, why = cann.rerouting_path(attrs, token_type=tokens[0], scale_type=scales[0] if present[2] else None,
                                        scale_rank=len(scales[1]) if present[2] and scales[1] else None,
                                        hidden=hidden)
        fallback = "device-to-device copy fallback"
    elif node.op_type == "MoeGatingTopKHash":
        x = typ(0)
        experts = x[1][-1] if x[1] else None
        call, why = cann.gating_path(attrs, experts=experts, hash_routing=present[3],
                                     table_type=typ(3)[0], additional=present[4] and present[5])
        fallback = "host fallback (CPU kernel, with copies)"
    else:
        call, why = cann.family_path(node.op_type, {**attrs, **_family_facts(node.op_type, typ, present)})
        fallback = "host fallback (CPU kernel, with copies)"
    if call:
        where = " (the cann-recipes-infer custom operator package)" if call == "aclnnMoeGatingTopKHash" else ""
        return f"native: {call}{where}"
    return f"{fallback}: {why}"


def _cann_soc_line() -> str:
    """The Ascend SoC this process sees and whether CANN's MoE operators have kernels for it."""
    from ascend_moe_onnx.ort_custom_ops import cann

    soc = cann.soc_name()
    if not soc:
        why = cann.soc_blocker()  # a runtime that cannot name its SoC: nothing is taken as native
        return f"CANN SoC: {why}" if why else (
            "CANN SoC: not known (no CANN runtime in this process): the SoC is taken to have the MoE kernels")
    why = cann.soc_blocker(soc)
    return f"CANN SoC: {soc}: " + (why if why else "CANN's MoE operators have kernels for it")


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
    elif CANN in available:
        lines.append(_cann_soc_line())
    nodes = list(_nodes(model, DOMAIN))
    types = _types(model)
    lines.append(f"{len(nodes)} {DOMAIN} node(s)")
    for where, node in nodes:
        ins = ", ".join(i if i else "<absent>" for i in node.input)
        lines.append(f"- {node.op_type} '{node.name}' ({where}): inputs [{ins}]")
        lines.append(f"    attributes: {_attributes(node)}")
        have = kernels.get(node.op_type, set())
        if "CPUExecutionProvider" in have:
            cpu = "CPUExecutionProvider: custom-op library kernel"
        elif kernels:
            cpu = "CPUExecutionProvider: the library has no CPU kernel for this op"
        else:
            cpu = "CPUExecutionProvider: custom-op library unavailable (see above)"
        if CANN in have:
            where = "" if CANN in available else " (onnxruntime-cann; not in this onnxruntime)"
            cann = f"{CANN}{where}: custom-op library kernel, {cann_path(node, types)}"
        elif kernels:
            cann = f"{CANN}: the library has no CANN kernel for this op (ORT runs it on the CPU)"
        else:
            cann = f"{CANN}: needs the custom-op library"
        body = (node.op_type, node.overload) in functions
        overload = f" (overload '{node.overload}', needs onnxruntime >= {OVERLOADS_MIN_ORT})" if node.overload else ""
        without = ("without the library: attached function body" + overload
                   if body else "without the library: no function body, the session would fail")
        lines += [f"    runs on: {cpu}", f"             {cann}", f"             {without}"]
    lines.append(_cann_host_summary(model))
    return "\n".join(lines)


def _cann_host_summary(model: onnx.ModelProto) -> str:
    """One line (or a short list): what the CANN EP would compute on the host (ort_custom_ops.cann_placement)."""
    from ascend_moe_onnx.ort_custom_ops.cann_placement import cann_host_nodes

    host = cann_host_nodes(model)
    if not host:
        return f"{CANN}: every standard node that computes has a CANN kernel (shape bookkeeping stays on the host)"
    shown = host[:10] + ([f"... ({len(host)} in all)"] if len(host) > 10 else [])
    return (f"{CANN}: {len(host)} node(s) would compute on the host (export with --target cann to avoid what "
            f"it can):\n" + "\n".join(f"  - {h}" for h in shown))
