"""Write ``ort_custom_ops/src/op_defs.gen.h`` from the ONNX schemas (the single statement of op
names, input/output order, optional flags, allowed types, attribute kinds and defaults): per op the
tables, an ``Attrs`` struct with ``ReadAttrs(info)``, the ``Def`` that ``AscendMoeOp`` takes, and
``AllOps()`` over ``onnx_schemas.OP_MODULES``; and ``ops_src/cpu/attr_defaults.gen.h``: the attribute
defaults and each op module's ``LIMITS``, for the kernels (which do not include ONNX Runtime's headers).

What an op's sources must define: ``<OpType>Ops()``, ``defs::<op>::InferShapes`` and
``defs::<op>::CheckAttrs`` (see docs/contributing.md).

The headers are checked in so that a plain ``pip install .`` needs nothing but a C++ compiler;
``tests/test_op_table.py::test_generated_headers_are_current`` fails when they differ from what this
module generates. Regenerate with
``python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
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
_FIELD_TYPES = {OpSchema.AttrType.INT: "int64_t", OpSchema.AttrType.FLOAT: "float"}
_READERS = {OpSchema.AttrType.INT: "ReadIntAttr", OpSchema.AttrType.FLOAT: "ReadFloatAttr"}


def _field_default(attr: OpSchema.Attribute) -> str:
    if attr.required:
        return "0"
    value = helper.get_attribute_value(attr.default_value)
    if attr.type == OpSchema.AttrType.FLOAT:
        return f"{np.float32(value)}f"
    return str(int(value))


def _attrs_block(schema: OpSchema) -> list[str]:
    """The Attrs struct (one field per attribute, the schema's default) and ReadAttrs."""
    attrs = sorted(schema.attributes.items())
    lines = ["// One node's attribute values; each field starts at the schema's default (required: 0).",
             "struct Attrs {"]
    for name, attr in attrs:
        note = "  // required" if attr.required else ""
        lines.append(f"  {_FIELD_TYPES[attr.type]} {name} = {_field_default(attr)};{note}")
    lines += ["};", "",
              "// The value rules of the attributes that do not depend on the inputs: the message for the",
              "// first one broken, empty when all hold. Defined in "
              f"{_snake(schema.name)}/{_snake(schema.name)}_op.cc or its",
              "// validator.",
              "std::string CheckAttrs(const Attrs& attrs);", "",
              "// Reads every attribute through kAttrs (absent optional ones keep their default; another",
              "// kind or a missing required one fails, naming it), then fails on CheckAttrs' message.",
              "inline Attrs ReadAttrs(const OrtKernelInfo* info) {",
              "  Attrs a;"]
    if not attrs:
        lines.append("  (void)info;")
    for name, attr in attrs:
        lines.append(f"  a.{name} = {_READERS[attr.type]}(info, kName, kAttrs[kAttr{_camel(name)}]);")
    lines += ["  const std::string error = CheckAttrs(a);",
              "  if (!error.empty()) Fail(error);",
              "  return a;",
              "}", "",
              "// The attributes as shape inference reads them (INT ones through kAttrs, their default when",
              "// absent or unreadable; the others keep their default), and CheckAttrs' message in `error`.",
              "inline Attrs InferAttrs(const OrtApi& api, OrtShapeInferContext* ctx, std::string* error) {",
              "  Attrs a;"]
    ints = [name for name, attr in attrs if attr.type == OpSchema.AttrType.INT]
    if not ints:
        lines += ["  (void)api;", "  (void)ctx;"]
    for name in ints:
        lines.append(f"  a.{name} = InferAttrInt(api, ctx, kAttrs[kAttr{_camel(name)}]);")
    lines += ["  *error = CheckAttrs(a);",
              "  return a;",
              "}"]
    return lines


def _def_block(schema: OpSchema) -> list[str]:
    """The op definition AscendMoeOp<Def, Kernel> takes (op_base.h) and its shape inference hook."""
    ns = _snake(schema.name)
    return [
        f"// Output types and shapes from the inputs (ORT's custom-op shape inference); defined in {ns}/{ns}_op.cc.",
        "OrtStatusPtr ORT_API_CALL InferShapes(const OrtCustomOp* op, OrtShapeInferContext* ctx);",
        "",
        "// Every input of a call, in table order (InputView: present, type, shape, data).",
        "using Inputs = std::array<InputView, kNumIns>;",
        "",
        "// The op definition, independent of the execution provider (see op_base.h).",
        "struct Def {",
        f"  static constexpr const char* kName = {ns}::kName;",
        f"  static constexpr int kSinceVersion = {ns}::kSinceVersion;",
        f"  static constexpr const ParamSpec* kInputs = {ns}::kInputs;",
        "  static constexpr size_t kNumInputs = kNumIns;",
        f"  static constexpr const ParamSpec* kOutputs = {ns}::kOutputs;",
        "  static constexpr size_t kNumOutputs = kNumOuts;",
        f"  static constexpr const AttrSpec* kAttrs = {ns}::kAttrs;",
        f"  static constexpr size_t kNumAttrs = {ns}::kNumAttrs;",
        f"  static constexpr auto InferShapes = &{ns}::InferShapes;",
        f"  using Attrs = {ns}::Attrs;",
        f"  using Inputs = {ns}::Inputs;",
        f"  static Attrs ReadAttrs(const OrtKernelInfo* info) {{ return {ns}::ReadAttrs(info); }}",
        "  // every input of a call, checked against kInputs (GetInputViews)",
        f"  static Inputs GetInputs(Ort::KernelContext& ctx) {{ return GetInputViews(ctx, kName, {ns}::kInputs); }}",
        "};",
    ]


def _op_block(schema: OpSchema) -> list[str]:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    lines = [f"// ---- {schema.name}", f"namespace {_snake(schema.name)} {{", "",
             f'inline constexpr const char* kName = "{schema.name}";',
             f"inline constexpr int kSinceVersion = {schema.since_version};", ""]

    def enum(tag: str, names: list[str], count: str) -> None:
        items = [f"k{tag}{_camel(n)} = {i}" for i, n in enumerate(names)]
        items.append(f"{count} = {len(names)}")
        lines.append(f"enum {tag} : size_t {{ " + ", ".join(items) + " };")

    enum("In", [p.name for p in schema.inputs], "kNumIns")
    enum("Out", [p.name for p in schema.outputs], "kNumOuts")
    enum("Attr", sorted(schema.attributes), "kNumAttrs")  # sorted: the binding's map order is not declared
    lines.append("")

    def params(tag: str, formal: Sequence[OpSchema.FormalParameter]) -> None:
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
    lines += ["};", ""]
    lines += _attrs_block(schema) + [""]
    lines += _def_block(schema)
    lines += ["", f"}}  // namespace {_snake(schema.name)}", ""]
    return lines


def _all_ops_block(schemas: list[OpSchema]) -> list[str]:
    lines = ["// Each op's kernels, one static OrtCustomOp per execution provider, all under the op's name;",
             "// defined in <op>/<op>_op.cc. Constructing them registers the op's manifest entry (no ORT call)."]
    lines += [f"std::vector<const OrtCustomOp*> {s.name}Ops();" for s in schemas]
    lines += ["", "// Every op of the library, in the order of onnx_schemas.OP_MODULES.",
              "inline std::vector<const OrtCustomOp*> AllOps() {",
              "  std::vector<const OrtCustomOp*> ops;"]
    lines += [f"  for (const OrtCustomOp* op : {s.name}Ops()) ops.push_back(op);" for s in schemas]
    lines += ["  return ops;", "}"]
    return lines


_TEST = "tests/test_op_table.py::test_generated_headers_are_current"


def generate() -> str:
    """The text of op_defs.gen.h for the registered schemas."""
    from ascend_moe_onnx import onnx_schemas

    schemas = list(onnx_schemas.SCHEMAS.values())
    for schema in schemas:
        if any(p.option == OpSchema.FormalParameterOption.Variadic for p in (*schema.inputs, *schema.outputs)):
            raise ValueError(f"{schema.name}: variadic inputs/outputs are not supported by the C++ tables")
    lines = [
        "// Op definitions generated from the ONNX schemas (onnx_schemas): per op its names, input/output",
        "// order, optional flags, allowed element types, attribute kinds and defaults, the Attrs struct",
        "// and ReadAttrs, the Def that AscendMoeOp takes; and AllOps().",
        f"// Do not edit: regenerate with `python -m {_MODULE}`;",
        f"// {_TEST} fails when this file and the schemas differ.",
        "#pragma once",
        "",
        "#include <array>",
        "#include <cstdint>",
        "#include <iterator>",
        "#include <string>",
        "#include <vector>",
        "",
        '#include "op_utils.h"',
        "",
        "namespace ascend_moe {",
        "namespace defs {",
        "",
        f'inline constexpr const char* kDomain = "{onnx_schemas.DOMAIN}";',
        f"inline constexpr int kOpsetVersion = {onnx_schemas.OPSET_VERSION};",
        "",
    ]
    for schema in schemas:
        lines += _op_block(schema)
    lines += ["}  // namespace defs", ""]
    lines += _all_ops_block(schemas)
    lines += ["", "}  // namespace ascend_moe"]
    return "\n".join(lines) + "\n"


def _default_constant(name: str, attr: OpSchema.Attribute) -> str:
    value = helper.get_attribute_value(attr.default_value)
    if attr.type == OpSchema.AttrType.FLOAT:
        return f"inline constexpr float k{_camel(name)} = {str(np.float32(value))}f;"
    return f"inline constexpr int64_t k{_camel(name)} = {int(value)};"


def _limit_constant(name: str, value: int) -> str:
    return f"inline constexpr int64_t k{_camel(name.lower())} = {int(value)};"


def generate_defaults() -> str:
    """The text of attr_defaults.gen.h: every optional attribute's default (required ones have none)
    and the limits each op module states in ``LIMITS``."""
    from ascend_moe_onnx import onnx_schemas

    lines = [
        "// Attribute defaults and size limits generated from the ONNX schemas (onnx_schemas: each op",
        "// module's SCHEMA and LIMITS), for the kernels' parameter structs and checks.",
        f"// Do not edit: regenerate with `python -m {_MODULE}`;",
        f"// {_TEST} fails when this file and the schemas differ.",
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
    lines += ["}  // namespace ascend_moe::attr_defaults", "", "namespace ascend_moe::limits {", ""]
    for module in onnx_schemas.OP_MODULES:
        limits = getattr(module, "LIMITS", {})
        if not limits:
            continue
        lines.append(f"namespace {_snake(module.OP_TYPE)} {{")
        lines += [_limit_constant(n, v) for n, v in limits.items()]
        lines += [f"}}  // namespace {_snake(module.OP_TYPE)}", ""]
    lines.append("}  // namespace ascend_moe::limits")
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
