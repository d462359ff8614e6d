"""Generate the reference part of docs/operators.md from the ONNX schemas.

docs/operators.md holds hand-written semantics and validation rules; between the markers
``<!-- BEGIN GENERATED: <op> -->`` and ``<!-- END GENERATED: <op> -->`` it holds, for each op, what
this module renders from ``onnx_schemas.SCHEMAS``: inputs, outputs, attributes with defaults, type
constraints, and shapes as the schema's own shape inference computes them. Run
``python -m ascend_moe_onnx.onnx_schemas.docgen [docs/operators.md]`` after changing a schema;
``--check`` exits 1 when the file is stale (a test does the same).
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import helper
from onnx.defs import OpSchema

from . import OP_MODULES, SCHEMAS, opset_import, register
from ._common import DOMAIN, OPSET_VERSION, attribute_defaults

BEGIN = "<!-- BEGIN GENERATED: {op} (python -m ascend_moe_onnx.onnx_schemas.docgen) -->"
END = "<!-- END GENERATED: {op} -->"

# Representative nodes whose outputs the schema's shape inference describes, from each op module's
# SHAPE_EXAMPLES: (input name -> (element type, dims)), attributes. Symbolic dims keep their names.
SHAPE_EXAMPLES: dict[str, list[tuple[dict[str, tuple[int, list]], dict[str, Any]]]] = {
    m.OP_TYPE: m.SHAPE_EXAMPLES for m in OP_MODULES}

_PRESENCE = {OpSchema.FormalParameterOption.Single: "required",
             OpSchema.FormalParameterOption.Optional: "optional",
             OpSchema.FormalParameterOption.Variadic: "variadic"}


def _type_name(elem_type: int) -> str:
    return helper.tensor_dtype_to_string(elem_type).replace("TensorProto.", "").lower()


def _dims(t: onnx.TypeProto) -> str:
    if not t.tensor_type.HasField("shape"):
        return "unknown"
    return "[" + ", ".join(d.dim_param or str(d.dim_value) for d in t.tensor_type.shape.dim) + "]"


def _params(title: str, params: Sequence[OpSchema.FormalParameter]) -> list[str]:
    lines = [f"| # | {title} | type | presence | description |", "|---|---|---|---|---|"]
    for i, p in enumerate(params):
        lines.append(f"| {i} | `{p.name}` | {p.type_str} | {_PRESENCE[p.option]} | {p.description} |")
    return lines


def _default_text(value: float | None) -> str:
    if value is None:
        return "required"
    return str(np.float32(value)) if isinstance(value, float) else str(value)  # as stored: float32


def _attributes(schema: OpSchema) -> list[str]:
    defaults = attribute_defaults(schema)
    lines = ["| attribute | type | default | description |", "|---|---|---|---|"]
    # required first, then by name: the schema's own attribute order is not stable across onnx builds
    for name, attr in sorted(schema.attributes.items(), key=lambda kv: (not kv[1].required, kv[0])):
        kind = str(attr.type).rsplit(".", 1)[-1]
        lines.append(f"| `{name}` | {kind} | {_default_text(defaults[name])} | {attr.description} |")
    return lines


def _constraints(schema: OpSchema) -> list[str]:
    lines = ["| type parameter | allowed types | description |", "|---|---|---|"]
    for c in schema.type_constraints:
        allowed = ", ".join(t.replace("tensor(", "").rstrip(")") for t in c.allowed_type_strs)
        lines.append(f"| `{c.type_param_str}` | {allowed} | {c.description} |")
    return lines


def _inferred(schema: OpSchema, inputs: dict[str, tuple[int, list]], attrs: dict[str, Any]) -> str:
    """One line: the example's inputs and attributes, then the outputs shape inference gives."""
    register()  # inference runs the registered schemas' functions
    names = [p.name for p in schema.inputs]
    node_inputs = [n if n in inputs else "" for n in names]
    while node_inputs and not node_inputs[-1]:
        node_inputs.pop()
    outputs = [p.name for p in schema.outputs]
    node = helper.make_node(schema.name, node_inputs, outputs, domain=DOMAIN, **attrs)
    graph = helper.make_graph(
        [node], "example", [helper.make_tensor_value_info(n, t, d) for n, (t, d) in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), opset_import()])
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    given = ", ".join(f"`{n}` {_type_name(t)}[{', '.join(map(str, d))}]" for n, (t, d) in inputs.items())
    if attrs:
        given += "; " + ", ".join(f"{k}={v}" for k, v in attrs.items())
    got = ", ".join(f"`{v.name}` {_type_name(v.type.tensor_type.elem_type)}{_dims(v.type)}"
                    for v in inferred.graph.output)
    return f"- {given} → {got}"


def render_op(schema: OpSchema) -> str:
    """The generated Markdown block of one op (without the markers)."""
    lines = [f"**`{schema.domain}::{schema.name}`**, opset version {schema.since_version}. {schema.doc}", ""]
    lines += ["Inputs:", ""] + _params("input", schema.inputs) + [""]
    lines += ["Outputs:", ""] + _params("output", schema.outputs) + [""]
    lines += ["Attributes:", ""] + _attributes(schema) + [""]
    lines += ["Type constraints:", ""] + _constraints(schema) + [""]
    lines += ["Shapes, as the schema's shape inference computes them (examples):", ""]
    lines += [_inferred(schema, inputs, attrs) for inputs, attrs in SHAPE_EXAMPLES.get(schema.name, [])]
    return "\n".join(lines)


def update(text: str) -> str:
    """``text`` with every op's generated block replaced by a fresh rendering."""
    for name, schema in SCHEMAS.items():
        begin, end = BEGIN.format(op=name), END.format(op=name)
        found = re.search(re.escape(begin) + r".*?" + re.escape(end), text, re.S)
        if not found:
            raise ValueError(f"docs: no generated block for {name} (add the lines '{begin}' and '{end}')")
        text = text[:found.start()] + f"{begin}\n{render_op(schema)}\n{end}" + text[found.end():]
    return text


def main(argv: list[str] | None = None) -> int:
    """Rewrite (or with --check, verify) the generated blocks of docs/operators.md."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("path", nargs="?", default="docs/operators.md")
    parser.add_argument("--check", action="store_true", help="exit 1 when the file is stale, change nothing")
    args = parser.parse_args(argv)
    path = Path(args.path)
    old = path.read_text(encoding="utf-8")
    new = update(old)
    if args.check:
        if new != old:
            print(f"{path} is stale: run python -m ascend_moe_onnx.onnx_schemas.docgen {path}", file=sys.stderr)
            return 1
        return 0
    if new != old:
        path.write_text(new, encoding="utf-8")
        print(f"updated {path} (domain {DOMAIN}, opset {OPSET_VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
