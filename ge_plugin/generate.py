"""Write ``ge_plugin/src/mapping.gen.h``: the graph-engine plugin's tables, generated from the ONNX
schemas (onnx_schemas), GE's recorded IR (ge_plugin.ge_ir) and the mapping (ge_plugin.mapping): per
op and domain version, the schema's inputs and attributes, and per GE variant the GE inputs in IR
order (which schema input feeds each, and the Cast an index input needs) and the GE attributes
(where each value comes from). The C++ core (src/mapping_core.cc) interprets them; nothing about an
op is written by hand on the C++ side.

Checked in so the plugin builds on an Ascend host with a C++ compiler only;
``tests/test_ge_plugin.py::test_generated_tables_are_current`` fails when it is stale. Regenerate
with ``python -m ascend_moe_onnx.ge_plugin.generate``.
"""

from __future__ import annotations

import sys
from pathlib import Path

from onnx import helper
from onnx.defs import OpSchema

from . import ge_ir, mapping
from .mapping import index_cast

HEADER_PATH = Path(__file__).resolve().parent / "src" / "mapping.gen.h"
_MODULE = "ascend_moe_onnx.ge_plugin.generate"
_ONNX_KIND = {OpSchema.AttrType.INT: "OnnxAttrKind::kInt", OpSchema.AttrType.FLOAT: "OnnxAttrKind::kFloat"}
_GE_KIND = {ge_ir.INT: "GeAttrKind::kInt", ge_ir.BOOL: "GeAttrKind::kBool", ge_ir.FLOAT: "GeAttrKind::kFloat",
            ge_ir.LIST_INT: "GeAttrKind::kListInt"}
_IN_KIND = {ge_ir.REQUIRED: "GeInputKind::kRequired", ge_ir.OPTIONAL: "GeInputKind::kOptional",
            ge_ir.DYNAMIC: "GeInputKind::kDynamic"}


def _c(value) -> str:
    return "nullptr" if value is None else '"' + str(value).replace('"', '\\"') + '"'


def _float(value: float) -> str:
    return f"{float(value)!r}f".replace("inf", "INFINITY")


def _variant_block(schema: OpSchema, m: mapping.OpMapping, v: mapping.Variant, tag: str) -> tuple[list[str], bool]:
    ge = ge_ir.GE_OPS[v.ge_op]
    names = [p.name for p in schema.inputs]
    attr_names = sorted(schema.attributes)
    lines, casts = [f"inline constexpr GeInputSpec k{tag}Inputs[] = {{"], False
    for gi in ge.inputs:
        onnx_index = names.index(gi.name) if gi.name in names else -1
        cast = index_cast(schema, schema.inputs[onnx_index], gi) if onnx_index >= 0 else -1
        casts |= cast >= 0
        lines.append(f"    {{{_c(gi.name)}, {_IN_KIND[gi.kind]}, {onnx_index}, {cast}}},")
    lines.append("};")
    # GE wires a node's inputs by position: a direct registration needs the schema's order, no lists
    positional = [names.index(gi.name) if gi.name in names else -1 for gi in ge.inputs]
    casts |= (any(i not in (k, -1) for k, i in enumerate(positional))
              or any(gi.kind == ge_ir.DYNAMIC for gi in ge.inputs))
    unmapped = [n for n in names if n not in {gi.name for gi in ge.inputs} and n not in m.refused_inputs
                and n not in v.absent]
    if unmapped:
        raise ValueError(f"{schema.name} -> {ge.name}: inputs {unmapped} are neither in GE's IR nor refused")
    if len(schema.outputs) != len(ge.outputs):
        raise ValueError(f"{schema.name} -> {ge.name}: {len(schema.outputs)} outputs, GE has {len(ge.outputs)}")
    lines.append(f"inline constexpr GeInputSpec k{tag}Outputs[] = {{")
    lines += [f"    {{{_c(go.name)}, {_IN_KIND[go.kind]}, {k}, -1}}," for k, go in enumerate(ge.outputs)]
    lines.append("};")
    ge_from = {m.renames.get(n, n): n for n in attr_names}
    lines.append(f"inline constexpr GeAttrSpec k{tag}Attrs[] = {{")
    for ga in ge.attrs:
        kind = _GE_KIND[ga.kind]
        if ga.name in m.fixed:
            value = m.fixed[ga.name]
            lines.append(f"    {{{_c(ga.name)}, {kind}, GeAttrSource::kFixed, -1, -1, {int(value)}, 0.0f, "
                         "nullptr, 0},")
        elif ga.name in m.combined:
            a, b = (attr_names.index(n) for n in m.combined[ga.name])
            lines.append(f"    {{{_c(ga.name)}, {kind}, GeAttrSource::kExpertRange, {a}, {b}, 0, 0.0f, nullptr, 0}},")
        elif ga.name in ge_from:
            src = ge_from[ga.name]
            onnx_kind = schema.attributes[src].type
            ok = {(OpSchema.AttrType.INT, ge_ir.INT), (OpSchema.AttrType.INT, ge_ir.BOOL),
                  (OpSchema.AttrType.FLOAT, ge_ir.FLOAT)}
            if (onnx_kind, ga.kind) not in ok:
                raise ValueError(f"{schema.name}.{src} ({onnx_kind.name}) -> "  # type: ignore[attr-defined]  # pybind enum: onnx's stub omits .name
                                 f"{ge.name}.{ga.name} ({ga.kind})")
            vmap = f"k{tag}{_camel(src)}Values" if src in m.value_maps else "nullptr"
            count = len(m.value_maps.get(src, {}))
            lines.append(f"    {{{_c(ga.name)}, {kind}, GeAttrSource::kOnnx, {attr_names.index(src)}, -1, 0, 0.0f, "
                         f"{vmap}, {count}}},")
        elif ga.required:
            raise ValueError(f"{schema.name} -> {ge.name}: required GE attribute {ga.name!r} has no source")
        # else: GE's default applies
    lines.append("};")
    used = set(ge_from) & {a.name for a in ge.attrs}
    unused = [n for n in attr_names if m.renames.get(n, n) not in used
              and not any(n in srcs for srcs in m.combined.values())]
    if unused:
        raise ValueError(f"{schema.name} -> {ge.name}: attributes {unused} map to nothing in GE's IR")
    return lines, casts


def _camel(name: str) -> str:
    return "".join(p[:1].upper() + p[1:] for p in name.split("_"))


def _op_block(name: str, version: int) -> list[str]:
    schema = mapping.SCHEMAS[name]
    tag = f"{name}V{version}"
    names = [p.name for p in schema.inputs]
    attr_names = sorted(schema.attributes)
    lines = [f"// ---- {name} (domain version {version})"]
    lines.append(f"inline constexpr OnnxInputSpec k{tag}OnnxInputs[] = {{")
    m = mapping.MAPPINGS.get(name)
    for p in schema.inputs:
        optional = "true" if p.option == OpSchema.FormalParameterOption.Optional else "false"
        lines.append(f"    {{{_c(p.name)}, {optional}, {_c(m.refused_inputs.get(p.name) if m else None)}}},")
    lines.append("};")
    lines.append(f"inline constexpr OnnxAttrSpec k{tag}OnnxAttrs[] = {{")
    for a in attr_names:
        attr = schema.attributes[a]
        value = 0 if attr.required else helper.get_attribute_value(attr.default_value)
        ival = int(value) if attr.type == OpSchema.AttrType.INT else 0
        fval = _float(value) if attr.type == OpSchema.AttrType.FLOAT else "0.0f"
        required = "true" if attr.required else "false"
        lines.append(f"    {{{_c(a)}, {_ONNX_KIND[attr.type]}, {required}, {ival}, {fval}}},")
    lines.append("};")
    if m is None:
        lines += [f"inline constexpr OpSpec k{tag} = {{{_c(name)}, {version}, {_c(mapping.REFUSED_OPS[name])}, "
                  f"k{tag}OnnxInputs, std::size(k{tag}OnnxInputs), k{tag}OnnxAttrs, std::size(k{tag}OnnxAttrs), "
                  f"{len(schema.outputs)}, nullptr, 0, nullptr, 0, false}};", ""]
        return lines
    for src, table in m.value_maps.items():
        pairs = ", ".join(f"{{{k}, {v}}}" for k, v in sorted(table.items()))
        for i in range(len(m.variants)):
            lines.append(f"inline constexpr ValuePair k{tag}{i}{_camel(src)}Values[] = {{{pairs}}};")
    refused = [f"    {{{attr_names.index(a)}, {val}, {_c(reason)}}}," for a, (val, reason) in m.refused_values.items()]
    if refused:
        lines += [f"inline constexpr RefusedValue k{tag}Refused[] = {{", *refused, "};"]
    partitioned = len(m.variants) > 1
    variant_rows = []
    for i, v in enumerate(m.variants):
        block, casts = _variant_block(schema, m, v, f"{tag}{i}")
        partitioned |= casts
        lines += block
        present = sum(1 << names.index(n) for n in v.present)
        absent = sum(1 << names.index(n) for n in v.absent)
        variant_rows.append(f"    {{{_c(v.ge_op)}, {present}, {absent}, k{tag}{i}Inputs, std::size(k{tag}{i}Inputs), "
                            f"k{tag}{i}Attrs, std::size(k{tag}{i}Attrs), "
                            f"k{tag}{i}Outputs, std::size(k{tag}{i}Outputs)}},")
    lines += [f"inline constexpr VariantSpec k{tag}Variants[] = {{", *variant_rows, "};"]
    ref = (f"k{tag}Refused, std::size(k{tag}Refused)" if refused else "nullptr, 0")
    lines += [f"inline constexpr OpSpec k{tag} = {{{_c(name)}, {version}, nullptr, k{tag}OnnxInputs, "
              f"std::size(k{tag}OnnxInputs), k{tag}OnnxAttrs, std::size(k{tag}OnnxAttrs), {len(schema.outputs)}, "
              f"k{tag}Variants, std::size(k{tag}Variants), {ref}, {'true' if partitioned else 'false'}}};", ""]
    return lines


def generate() -> str:
    """The text of mapping.gen.h."""
    mapping.check_complete()
    lines = [
        "// The graph-engine plugin's tables, generated from the ONNX schemas (onnx_schemas), GE's recorded",
        "// operator IR (ge_plugin/ge_ir.py: names, order, types, defaults, source and commit) and the mapping",
        "// (ge_plugin/mapping.py). Do not edit: regenerate with",
        f"// `python -m {_MODULE}`; tests/test_ge_plugin.py fails when it is stale.",
        "#pragma once",
        "",
        "#include <cmath>",
        "#include <iterator>",
        "",
        '#include "mapping_types.h"',
        "",
        "namespace ascend_moe_ge {",
        "",
        f'inline constexpr const char* kDomain = "{mapping.DOMAIN}";',
        "",
    ]
    for version in mapping.DOMAIN_VERSIONS:
        for name in mapping.SCHEMAS:
            lines += _op_block(name, version)
    rows = [f"    &k{name}V{v}," for v in mapping.DOMAIN_VERSIONS for name in mapping.SCHEMAS]
    lines += ["// Every op and domain version the exporters write.", "inline constexpr const OpSpec* kOps[] = {",
              *rows, "};", "", "}  // namespace ascend_moe_ge", "",
              "// X(n) for every row n of kOps: the plugin's one registration per op and domain version.",
              "#define ASCEND_MOE_GE_FOR_EACH_OP(X) " + " ".join(f"X({n})" for n in range(len(rows)))]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the header (or, with --check, exit 1 when the checked-in one is stale)."""
    argv = sys.argv[1:] if argv is None else argv
    text = generate()
    if "--check" in argv:
        if HEADER_PATH.read_text() != text:
            print(f"{HEADER_PATH} is stale: run python -m {_MODULE}", file=sys.stderr)
            return 1
        return 0
    HEADER_PATH.write_text(text)
    print(f"wrote {HEADER_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
