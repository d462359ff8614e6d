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

from ascend_moe_onnx.onnx_schemas import DOMAIN, OPSET_VERSION, SCHEMAS

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
    fixed: dict[str, object] = field(default_factory=dict)  # GE attr -> value


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


def g_format(value: float) -> str:
    """A float32 as GE's parser prints it into the attribute JSON (C's ``%g``: 6 significant digits)."""
    return "%g" % float(value)
