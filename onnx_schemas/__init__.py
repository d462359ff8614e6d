"""ONNX schemas of the ascend.moe operators: the single source of their names, inputs, outputs,
attributes, defaults and type constraints; shape inference; NumPy references usable as
``onnx.reference`` ops; and pure-ONNX function bodies (see :mod:`onnx_schemas.functions`).
"""

from __future__ import annotations

import os
import threading

import onnx
import onnx.defs

from . import (
    grouped_matmul,
    moe_finalize_routing_v2,
    moe_gating_top_k_hash,
    moe_init_routing,
    moe_init_routing_v3,
    moe_re_routing,
    moe_routed_experts,
    moe_token_permute,
    moe_token_unpermute,
    swi_glu,
)
from ._common import (
    DOMAIN,
    OPSET_VERSION,
    attribute_defaults,
    check_required_inputs,
    reference_op,
    resolve_attributes,
    walk_graphs,
)

# The one list of the ops: everything else (SCHEMAS, REFERENCE_OPS, functions.BUILDERS, the C++
# tables and AllOps() of ort_custom_ops/src/op_defs.gen.h, docgen) derives from it. Each module
# defines OP_TYPE, SCHEMA, INPUT_NAMES / OUTPUT_NAMES (from SCHEMA), DEFAULTS, reference(*inputs,
# **attributes) and SHAPE_EXAMPLES; optionally LIMITS; a sibling <module>_function.py with
# build_function gives the op a function body.
OP_MODULES = [moe_gating_top_k_hash, moe_re_routing, moe_routed_experts, grouped_matmul, moe_init_routing_v3,
              moe_init_routing, moe_token_permute, moe_finalize_routing_v2, moe_token_unpermute,
              swi_glu]

SCHEMAS = {m.OP_TYPE: m.SCHEMA for m in OP_MODULES}
# onnx.reference ops: ReferenceEvaluator(model, new_ops=REFERENCE_OPS).
REFERENCE_OPS = [reference_op(m.OP_TYPE, m.reference) for m in OP_MODULES]

_lock = threading.Lock()

__all__ = ["DOMAIN", "OPSET_VERSION", "SCHEMAS", "REFERENCE_OPS", "OP_MODULES", "register",
           "attribute_defaults", "opset_import", "check_model", "check_nodes"]


def register() -> None:
    """Register every ascend.moe schema with ``onnx.defs`` (idempotent, thread-safe)."""
    with _lock:
        for schema in SCHEMAS.values():
            if not onnx.defs.has(schema.name, schema.domain):
                onnx.defs.register_schema(schema)


def opset_import() -> onnx.OperatorSetIdProto:
    """The ``opset_import`` entry a model using these ops needs."""
    return onnx.helper.make_opsetid(DOMAIN, OPSET_VERSION)


def load_model(model: onnx.ModelProto | bytes | str | os.PathLike) -> onnx.ModelProto:
    """A ModelProto from a proto, serialized bytes or a file (external data not loaded).
    ``FileNotFoundError`` for a missing file; ``ValueError`` naming the file (or "the model
    bytes") and the reason for an empty, truncated or non-ONNX one: protobuf reads 0 bytes as an
    empty model and some garbage as a model without an IR version or graph, which no ONNX model is."""
    if isinstance(model, onnx.ModelProto):
        return model
    if isinstance(model, (bytes, bytearray)):
        what, data = "the model bytes", bytes(model)
    else:
        path = os.fspath(model)
        if not os.path.isfile(path):
            raise FileNotFoundError(f"no such file: {path}")
        what = path
        with open(path, "rb") as f:
            data = f.read()
    verb = "are" if isinstance(model, (bytes, bytearray)) else "is"
    if not data:
        raise ValueError(f"{what} {verb} not an ONNX model (empty: 0 bytes)")
    try:
        proto = onnx.load_from_string(data)
    except Exception as e:  # protobuf's DecodeError, or what the parser raises for other bytes
        raise ValueError(f"{what} {verb} not an ONNX model: truncated or corrupt ({type(e).__name__}: "
                         f"{str(e)[:160]})") from None
    if proto.ir_version < 1 or not proto.HasField("graph"):
        found = "no IR version" if proto.ir_version < 1 else f"IR version {proto.ir_version} but no graph"
        raise ValueError(f"{what} {verb} not an ONNX model ({len(data)} bytes that parse as a model with {found})")
    return proto


def check_nodes(model: onnx.ModelProto | bytes | str | os.PathLike) -> None:
    """Check what ONNX Runtime cannot show the library's kernels: the ascend.moe opset version a
    model imports, and every ascend.moe node's op type, required inputs (ORT names an empty one by
    its position) and attribute names and kinds (a misspelled ``norm=1`` would otherwise run with
    the defaults). Cheap: reads no weights. Raises ValueError
    with the kernels' own messages."""
    proto = load_model(model)
    imports = list(proto.opset_import) + [i for f in proto.functions for i in f.opset_import]
    for imp in imports:
        if imp.domain == DOMAIN and imp.version != OPSET_VERSION:
            raise ValueError(
                f"model imports opset {DOMAIN} version {imp.version}; the {DOMAIN} ops exist only at "
                f"version {OPSET_VERSION} (a breaking change gets a new op name, never a new version)")
    nodes = [n for g in walk_graphs(proto.graph) for n in g.node]
    nodes += [n for f in proto.functions for n in f.node]
    for node in nodes:
        if node.domain != DOMAIN:
            continue
        schema = SCHEMAS.get(node.op_type)
        if schema is None:
            raise ValueError(f"node '{node.name}': {DOMAIN} has no op '{node.op_type}' "
                             f"(known: {', '.join(sorted(SCHEMAS))})")
        try:
            # ONNX Runtime refuses a required input named "" itself, by position ("input 3").
            check_required_inputs(schema, [bool(name) for name in node.input])
            resolve_attributes(schema, {a.name: a for a in node.attribute})
        except ValueError as e:
            raise ValueError(f"node '{node.name}': {e}") from None


def check_model(model: onnx.ModelProto | str | os.PathLike, full_check: bool = True) -> None:
    """``onnx.checker.check_model`` with these schemas registered, after :func:`check_nodes`
    (the imported ascend.moe version and the nodes' attributes, with the kernels' messages).

    The version check is needed because neither ONNX nor ONNX Runtime rejects another version by
    itself: ONNX resolves a node to the newest schema not above the imported version, and ORT
    registers custom-op domains for versions 1 to 1000 and gives kernels no way to see the
    imported version.
    """
    register()
    proto = model if isinstance(model, onnx.ModelProto) else onnx.load(
        os.fspath(model), load_external_data=False)
    try:
        check_nodes(proto)
    except ValueError as e:
        raise onnx.checker.ValidationError(str(e)) from None
    onnx.checker.check_model(model if isinstance(model, onnx.ModelProto) else os.fspath(model),
                             full_check=full_check)
