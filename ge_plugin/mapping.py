"""How each ascend.moe node becomes graph-engine (GE) operators: the mapping ge_plugin.generate turns
into the plugin's tables (src/mapping.gen.h), stated once here against the schemas (onnx_schemas) and
GE's recorded IR (ge_plugin.ge_ir).

GE's ONNX parser wires a node's inputs into the GE op's IR order by position, hands the plugin the
node's attributes as one JSON string (FLOATs printed with ``%g``), and knows element types only for
graph inputs. So per op:

- inputs map by name onto the GE op's IR inputs (every schema input is mapped or refused when
  present); a GE index input that takes fewer types than the schema allows gets a Cast to the GE
  type (the node becomes a small graph: ``PartitionedCall`` + ``ParseOpToGraphFn``);
- attributes map by name; an INT that GE declares Bool becomes a Bool; ``renames`` and ``combined``
  cover the rest (GroupedMatmul's output_dtype codes, MoeInitRoutingV3's active expert range);
- ``variants`` pick the GE op from the inputs a node has (MoeGatingTopKHash without the hash inputs
  runs GE's built-in MoeGatingTopK); ``fixed`` GE attributes the schema has no counterpart for;
- ``refused_inputs`` / ``refused_values`` / ``REFUSED_OPS``: what GE cannot express, with the reason
  the plugin logs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onnx.defs import OpSchema

from ascend_moe_onnx.onnx_schemas import DOMAIN, OPSET_VERSION, SCHEMAS

from . import ge_ir

# The domain versions the exporters write (the parser's lookup key is domain::<opset_import version>::Op).
DOMAIN_VERSIONS = (OPSET_VERSION,)


@dataclass(frozen=True)
class Variant:
    """A GE op a node maps to when every input of ``present`` is given and none of ``absent``."""
    ge_op: str
    present: tuple[str, ...] = ()
    absent: tuple[str, ...] = ()


@dataclass(frozen=True)
class OpMapping:
    variants: tuple[Variant, ...]
    refused_inputs: dict[str, str] = field(default_factory=dict)  # schema input -> reason
    refused_values: dict[str, tuple[int, str]] = field(default_factory=dict)  # INT attr -> (value, reason)
    renames: dict[str, str] = field(default_factory=dict)  # schema attr -> GE attr
    value_maps: dict[str, dict[int, int]] = field(default_factory=dict)  # schema INT attr -> {value: GE value}
    combined: dict[str, tuple[str, ...]] = field(default_factory=dict)  # GE ListInt attr -> schema INT attrs
    fixed: dict[str, int] = field(default_factory=dict)  # GE attr -> value


_HASH_ONLY = "GE's MoeGatingTopKHash has no {} input (its IR: x, bias, input_ids, tid2eid)"
# GroupedMatmul output_dtype (an ONNX element type, 0: x's type) -> GE's dtype attribute codes
# (ops-transformer grouped_matmul_infershape_common_util.h GMM_OUTPUT_DTYPE_MAP).
_GMM_DTYPE = {0: 0, 10: 0, 16: 1, 6: 2, 1: 3, 3: -1}

MAPPINGS: dict[str, OpMapping] = {
    "MoeGatingTopKHash": OpMapping(
        (Variant("MoeGatingTopKHash", present=("input_ids", "tid2eid")),
         Variant("MoeGatingTopK", absent=("input_ids", "tid2eid"))),
        refused_inputs={"additional_bias": _HASH_ONLY.format("additional_bias"),
                        "additional_token_mask": _HASH_ONLY.format("additional_token_mask")}),
    "MoeReRouting": OpMapping((Variant("MoeReRouting"),)),
    "GroupedMatmul": OpMapping(
        (Variant("GroupedMatmul"),),
        refused_values={"transpose_weight": (1, "GE's GroupedMatmul transpose_weight is reserved, not enabled: "
                                                "weights must be [E, K, N] (export with --target ge)")},
        renames={"output_dtype": "dtype"}, value_maps={"output_dtype": _GMM_DTYPE},
        # one x, one weight, one y (split_item 3), groups along M (group_type 0): the MoE form
        fixed={"split_item": 3, "group_type": 0}),
    "MoeInitRoutingV3": OpMapping(
        (Variant("MoeInitRoutingV3"),),
        combined={"active_expert_range": ("active_expert_start", "active_expert_end")}),
    "MoeInitRouting": OpMapping((Variant("MoeInitRouting"),)),
    "MoeTokenPermute": OpMapping((Variant("MoeTokenPermute"),)),
    "MoeFinalizeRoutingV2": OpMapping((Variant("MoeFinalizeRoutingV2"),)),
    "MoeTokenUnpermute": OpMapping((Variant("MoeTokenUnpermute"),)),
    "SwiGlu": OpMapping((Variant("SwiGlu"),)),
}

# Ops with no GE operator and no expansion, and why (logged by the plugin, raised by the ge target).
REFUSED_OPS = {
    "MoeRoutedExperts": "no GE operator computes it; export with --target ge, which writes the op family's "
                        "chain (MoeInitRoutingV3, GroupedMatmul, SwiGlu, GroupedMatmul, MoeFinalizeRoutingV2) "
                        "with [E, K, N] weights",
}


def check_complete() -> None:
    """A ValueError unless every schema op is mapped or refused (and nothing else is)."""
    names = set(MAPPINGS) | set(REFUSED_OPS)
    if names != set(SCHEMAS):
        raise ValueError(f"ge_plugin.mapping: ops mapped or refused {sorted(names)} != schemas {sorted(SCHEMAS)}")


def origin_type(op: str, version: int) -> str:
    """The key GE's ONNX parser looks a node up by: ``ascend.moe::<version>::<op>``."""
    return f"{DOMAIN}::{version}::{op}"


# GE's parser prints a FLOAT with sprintf_s(buf, 10, "%g"); when that does not fit in 9 characters
# the call fails and it writes the value itself (a JSON number).
_G_BUFFER = 10


def g_format(value: float) -> str:
    """A float32 attribute as GE's parser writes it into the attribute JSON: C's ``%g`` (6 significant
    digits) as a JSON string, or, when that takes 10 characters or more, the exact value as a number."""
    printed = f"{float(value):g}"
    if len(printed) < _G_BUFFER:
        return f'"{printed}"'
    return repr(float(value))


def g_value(value: float) -> float:
    """The float32 the plugin reads back from ``g_format(value)``."""
    import numpy as np

    return float(np.float32(float(g_format(value).strip('"'))))


def ge_attribute_json(attributes) -> str:
    """A node's attributes (onnx AttributeProto) as GE's ONNX parser hands them to the plugin: the
    node's ``attribute`` field through its protobuf-to-JSON conversion (proto3: zero values are
    left out; enums as numbers; keys sorted; indent 2)."""
    import json

    from onnx import AttributeProto

    items = []
    for a in attributes:
        fields = {"name": json.dumps(a.name), "type": str(int(a.type))}
        if a.type == AttributeProto.INT and a.i != 0:
            fields["i"] = str(a.i)
        elif a.type == AttributeProto.FLOAT and a.f != 0.0:
            fields["f"] = g_format(a.f)
        elif a.type not in (AttributeProto.INT, AttributeProto.FLOAT):
            raise ValueError(f"attribute {a.name!r}: only INT and FLOAT attributes are emulated")
        body = ",\n".join(f'      "{k}": {v}' for k, v in sorted(fields.items()))
        items.append("    {\n" + body + "\n    }")
    if not items:
        return "{}"
    return '{\n  "attribute": [\n' + ",\n".join(items) + "\n  ]\n}"


def _schema_types(schema: OpSchema, p: OpSchema.FormalParameter) -> set[str]:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    return {t[len("tensor("):-1] for t in constraints.get(p.type_str, [p.type_str])}


def index_cast(schema: OpSchema, p: OpSchema.FormalParameter, ge_input: ge_ir.GeInput) -> int:
    """The GE type code an index input is cast to (-1: none): an input both sides type as indices
    (int32 / int64 only) whose schema allows an index type the GE input does not take."""
    index = {"DT_INT32", "DT_INT64"}
    ours = {ge_ir.ONNX_TO_GE[t] for t in _schema_types(schema, p)}
    theirs = set(ge_input.types)
    if not ours <= index or not theirs <= index or ours <= theirs:
        return -1
    if len(theirs) != 1:
        raise ValueError(f"{schema.name}.{p.name}: GE takes {sorted(theirs)}, the schema {sorted(ours)}")
    return ge_ir.GE_DATA_TYPES[next(iter(theirs))]
