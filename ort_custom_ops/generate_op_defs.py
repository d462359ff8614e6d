"""Write ``ort_custom_ops/src/op_defs.gen.h`` from the ONNX schemas (the single statement of op
names, input/output order, optional flags, allowed types, attribute kinds and defaults), and
``ops_src/cpu/attr_defaults.gen.h``: the attribute defaults alone, for the kernels' parameter structs
(the kernels do not include ONNX Runtime's headers).

The headers are checked in so that a plain ``pip install .`` needs nothing but a C++ compiler;
``tests/test_op_table.py`` fails when they differ from what this module generates. Regenerate with
``python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import numpy as np
from onnx import helper
from onnx.defs import OpSchema

HEADER_PATH = Path(__file__).resolve().parent / "src" / "op_defs.gen.h"
DEFAULTS_PATH = Path(__file__).resolve().parent.parent / "ops_src" / "cpu" / "attr_defaults.gen.h"
_MODULE = "ascend_moe_onnx.ort_custom_ops.generate_op_defs"


def _camel(name: str) -> str:
    return "".join(part[:1].upper() + part[1:] for part in name.split("_"))


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _element_type(type_str: str) -> str:
    """'tensor(float16)' -> 'ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16'."""
    inner = re.fullmatch(r"tensor\((\w+)\)", type_str)
    if inner is None:
        raise ValueError(f"unsupported type string {type_str!r}")
    return "ONNX_TENSOR_ELEMENT_DATA_TYPE_" + inner.group(1).upper()


def _attr_default(attr: OpSchema.Attribute) -> str:
    if attr.required:
        return "0"
    value = helper.get_attribute_value(attr.default_value)
    if attr.type == OpSchema.AttrType.FLOAT:
        return f"double{{{np.float32(value)}f}}"  # the float32 value ONNX stores
    return str(int(value))


_KINDS = {OpSchema.AttrType.INT: "AttrSpec::kInt", OpSchema.AttrType.FLOAT: "AttrSpec::kFloat"}


def _op_block(schema: OpSchema) -> list[str]:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    lines = [f"// ---- {schema.name}", f"namespace {_snake(schema.name)} {{", "",
             f'inline constexpr const char* kName = "{schema.name}";',
             f"inline constexpr int kSinceVersion = {schema.since_version};", ""]

    def enum(tag: str, names: list[str]) -> None:
        items = [f"k{tag}{_camel(n)} = {i}" for i, n in enumerate(names)]
        items.append(f"kNum{tag}s = {len(names)}")
        lines.append(f"enum {tag} : size_t {{ " + ", ".join(items) + " };")

    enum("In", [p.name for p in schema.inputs])
    enum("Out", [p.name for p in schema.outputs])
    enum("Attr", sorted(schema.attributes))  # sorted: the binding's map order is not declared
    lines.append("")

    def params(tag: str, formal: list) -> None:
        for p in formal:
            types = constraints.get(p.type_str, [p.type_str])
            lines.append(f"inline constexpr ONNXTensorElementDataType k{tag}{_camel(p.name)}Types[] = {{"
                         + ", ".join(_element_type(t) for t in types) + "};")
        lines.append(f"inline constexpr ParamSpec k{tag}puts[] = {{")
        for p in formal:
            optional = "true" if p.option == OpSchema.FormalParameterOption.Optional else "false"
            type_param = p.type_str if p.type_str in constraints else ""
            lines.append(f'    {{"{p.name}", "{type_param}", {optional}, k{tag}{_camel(p.name)}Types, '
                         f"std::size(k{tag}{_camel(p.name)}Types)}},")
        lines.append("};")

    params("In", schema.inputs)
    params("Out", schema.outputs)
    lines.append("inline constexpr AttrSpec kAttrs[] = {")
    for name, attr in sorted(schema.attributes.items()):
        if attr.type not in _KINDS:
            raise ValueError(f"{schema.name}: attribute {name!r} has a kind the C++ side cannot read")
        required = "true" if attr.required else "false"
        lines.append(f'    {{"{name}", {_KINDS[attr.type]}, {required}, {_attr_default(attr)}}},')
    lines += ["};", "", f"}}  // namespace {_snake(schema.name)}", ""]
    return lines


def generate() -> str:
    """The text of op_defs.gen.h for the registered schemas."""
    from ascend_moe_onnx import onnx_schemas

    lines = [
        "// Op definitions generated from the ONNX schemas (onnx_schemas): names, input/output order,",
        "// optional flags, allowed element types, attribute kinds and defaults.",
        f"// Do not edit: regenerate with `python -m {_MODULE}`;",
        "// tests/test_op_defs.py fails when this file and the schemas differ.",
        "#pragma once",
        "",
        "#include <iterator>",
        "",
        '#include "op_utils.h"',
        "",
        "namespace ascend_moe::defs {",
        "",
        f'inline constexpr const char* kDomain = "{onnx_schemas.DOMAIN}";',
        f"inline constexpr int kOpsetVersion = {onnx_schemas.OPSET_VERSION};",
        "",
    ]
    for schema in onnx_schemas.SCHEMAS.values():
        lines += _op_block(schema)
    lines.append("}  // namespace ascend_moe::defs")
    return "\n".join(lines) + "\n"


def _default_constant(name: str, attr: OpSchema.Attribute) -> str:
    value = helper.get_attribute_value(attr.default_value)
    if attr.type == OpSchema.AttrType.FLOAT:
        return f"inline constexpr float k{_camel(name)} = {str(np.float32(value))}f;"
    return f"inline constexpr int64_t k{_camel(name)} = {int(value)};"


def generate_defaults() -> str:
    """The text of attr_defaults.gen.h: every optional attribute's default (required ones have none)."""
    from ascend_moe_onnx import onnx_schemas

    lines = [
        "// Attribute defaults generated from the ONNX schemas (onnx_schemas), for the kernels' parameter",
        f"// structs. Do not edit: regenerate with `python -m {_MODULE}`;",
        "// tests/test_op_table.py fails when this file and the schemas differ.",
        "#pragma once",
        "",
        "#include <cstdint>",
        "",
        "namespace ascend_moe::attr_defaults {",
        "",
    ]
    for schema in onnx_schemas.SCHEMAS.values():
        lines.append(f"namespace {_snake(schema.name)} {{")
        lines += [_default_constant(n, a) for n, a in sorted(schema.attributes.items()) if not a.required]
        lines += [f"}}  // namespace {_snake(schema.name)}", ""]
    lines.append("}  // namespace ascend_moe::attr_defaults")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the headers (or, with --check, exit 1 when a checked-in one is stale)."""
    argv = sys.argv[1:] if argv is None else argv
    outputs = {HEADER_PATH: generate(), DEFAULTS_PATH: generate_defaults()}
    if "--check" in argv:
        stale = [p for p, text in outputs.items() if p.read_text() != text]
        for p in stale:
            print(f"{p} is stale: run python -m {_MODULE}", file=sys.stderr)
        return 1 if stale else 0
    for path, text in outputs.items():
        path.write_text(text)
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
