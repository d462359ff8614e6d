"""Attach pure-ONNX function bodies of the ascend.moe ops to a model, so that it also runs where the
custom-op library is not loaded (ONNX Runtime runs the library kernel when it is registered and
inlines the model-local function otherwise).

Bodies are specialised per node: a builder bakes one node's attributes into the body and skips its
absent optional inputs. When all nodes of an op type share one specialisation the model gets one
plain function; otherwise every specialisation becomes an overload (IR version 10), which only
ONNX Runtime >= 1.27.0 honours (``OVERLOADS_MIN_ORT``; older runtimes ignore ``overload`` and inline
the wrong body).
"""

from __future__ import annotations

import importlib
import importlib.util
import warnings
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np
import onnx
from onnx.defs import OpSchema

from ._common import DOMAIN, resolve_attributes, walk_graphs
from ._function_body import MIN_OPSET

Builder = Callable[[dict, Sequence[bool], int], onnx.FunctionProto]


def _builders() -> dict[str, Builder]:
    """``build_function`` of each op module's sibling ``<module>_function`` module, where there is one."""
    from . import OP_MODULES

    out = {}
    for module in OP_MODULES:
        name = f"{module.__name__}_function"
        if importlib.util.find_spec(name) is not None:
            out[module.OP_TYPE] = importlib.import_module(name).build_function
    return out


# Function-body builders, by op type (domain ascend.moe). Each takes (attributes, present_inputs,
# opset) and returns a FunctionProto named after the op.
BUILDERS: dict[str, Builder] = _builders()

OVERLOAD_IR_VERSION = 10  # NodeProto.overload / FunctionProto.overload appeared in IR version 10
FUNCTIONS_IR_VERSION = 8  # model-local functions appeared in IR version 8
# The first ONNX Runtime that inlines the overload a node names (measured: 1.26.0 and older inline
# another specialisation's body).
OVERLOADS_MIN_ORT = "1.27.0"


def _schema(op_type: str) -> OpSchema:
    # Imported here, not at module level, so the package __init__ may import this module.
    from . import SCHEMAS

    if op_type not in SCHEMAS:
        raise ValueError(f"no ascend.moe schema for op type '{op_type}'")
    return SCHEMAS[op_type]


def _node_attributes(node: onnx.NodeProto) -> dict:
    given = {}
    for a in node.attribute:
        if a.ref_attr_name:
            raise ValueError(
                f"{node.op_type} node '{node.name}': attribute '{a.name}' refers to the enclosing "
                f"function's attribute '{a.ref_attr_name}'; a specialised body needs its value"
            )
        given[a.name] = a  # the kinds are checked on the AttributeProto (resolve_attributes)
    return given


def _present_inputs(node: onnx.NodeProto) -> list[bool]:
    return [bool(name) for name in node.input]


def _fmt(value: Any) -> str:
    """Attribute value as an identifier-friendly token: 2.5 -> 2p5, 1e-20 -> 1em20, -1 -> m1."""
    if isinstance(value, float):
        text = str(np.float32(value))  # shortest repr of the stored float32
        if text.endswith(".0"):
            text = text[:-2]
    else:
        text = str(value)
    return text.replace(".", "p").replace("-", "m").replace("+", "")


def _abbreviation(name: str) -> str:
    return "".join(part[0] for part in name.split("_") if part)


def specialisation_key(node: onnx.NodeProto) -> str:
    """Short deterministic key of a node's specialisation: its resolved attributes and present inputs.

    Example: ``e1em20_gc8_gsm1_k8_kg4_nt1_of0_r0_rsf2p5_i110000``.
    """
    schema = _schema(node.op_type)
    attrs = resolve_attributes(schema, _node_attributes(node))
    names = sorted(schema.attributes)  # the schema's own order is not guaranteed stable
    abbrs = [_abbreviation(n) for n in names]
    if len(set(abbrs)) != len(abbrs):  # keep keys unambiguous if initials ever collide
        abbrs = names
    present = _present_inputs(node)
    n_inputs = len(schema.inputs)
    if len(present) > n_inputs:
        raise ValueError(f"{node.op_type} node '{node.name}' has {len(present)} inputs, the op has {n_inputs}")
    bits = "".join("1" if p else "0" for p in present + [False] * (n_inputs - len(present)))
    # every attribute at a fixed position, so no two specialisations can share a key
    return "_".join([f"{a}{_fmt(attrs[n])}" for a, n in zip(abbrs, names)] + [f"i{bits}"])


def _all_nodes(model: onnx.ModelProto, skip_functions: set) -> Iterator[onnx.NodeProto]:
    """Every node of the model: main graph, subgraphs, and model-local functions not in skip."""
    containers = [g.node for g in walk_graphs(model.graph)]
    for f in model.functions:
        if (f.domain, f.name) in skip_functions:
            continue
        containers.append(f.node)
        for node in f.node:
            for a in node.attribute:
                if a.type == onnx.AttributeProto.GRAPH:
                    containers.extend(g.node for g in walk_graphs(a.g))
                elif a.type == onnx.AttributeProto.GRAPHS:
                    for sub in a.graphs:
                        containers.extend(g.node for g in walk_graphs(sub))
    for nodes in containers:
        yield from nodes


def _default_opset(model: onnx.ModelProto) -> int:
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return imp.version
    raise ValueError(
        f"the model imports no default-domain opset; function bodies need opset >= {MIN_OPSET} "
        "(add an opset_import entry for domain '')"
    )


def _ours() -> set:
    return {(DOMAIN, op) for op in BUILDERS}


def strip_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of ``model`` without the ascend.moe function bodies and node overloads."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    ours = _ours()
    kept = [f for f in m.functions if (f.domain, f.name) not in ours]
    del m.functions[:]
    m.functions.extend(kept)
    for node in _all_nodes(m, ours):
        if (node.domain, node.op_type) in ours:
            node.overload = ""
    return m


def attach_functions(model: onnx.ModelProto) -> onnx.ModelProto:
    """Return a copy of ``model`` with one specialised function body per distinct ascend.moe node kind.

    Replaces bodies attached before. Several specialisations of one op become overloads (IR >= 10),
    with a warning: ONNX Runtime older than ``OVERLOADS_MIN_ORT`` ignores overloads.
    """
    m = strip_functions(model)
    ours = _ours()
    by_op: dict[str, dict[str, list[onnx.NodeProto]]] = {}
    no_body: set = set()
    for node in _all_nodes(m, ours):
        if node.domain != DOMAIN:
            continue
        if node.op_type not in BUILDERS:
            no_body.add(node.op_type)
            continue
        by_op.setdefault(node.op_type, {}).setdefault(specialisation_key(node), []).append(node)
    if no_body:
        warnings.warn(
            f"no function body for ascend.moe op(s) {sorted(no_body)}: the model needs the custom-op "
            "library for them",
            stacklevel=2,
        )
    if not by_op:
        return m

    opset = _default_opset(m)
    if opset < MIN_OPSET:
        raise ValueError(
            f"ascend.moe function bodies need default-domain opset >= {MIN_OPSET}, the model imports {opset}"
        )
    overloaded = []
    for op_type, groups in by_op.items():
        use_overloads = len(groups) > 1
        for key, nodes in groups.items():
            first = nodes[0]
            func = BUILDERS[op_type](_node_attributes(first), _present_inputs(first), opset)
            if use_overloads:
                func.overload = key
            for node in nodes:
                node.overload = key if use_overloads else ""
            m.functions.append(func)
        if use_overloads:
            overloaded.append(f"{op_type} ({len(groups)} specialisations)")

    m.ir_version = max(m.ir_version, FUNCTIONS_IR_VERSION)
    if overloaded:
        m.ir_version = max(m.ir_version, OVERLOAD_IR_VERSION)
        warnings.warn(
            f"ascend.moe function bodies attached as overloads for {', '.join(overloaded)}: ONNX Runtime "
            f"< {OVERLOADS_MIN_ORT} ignores overloads and, without the custom-op library, inlines the "
            "wrong body. Load the library there.",
            stacklevel=2,
        )
    return m
