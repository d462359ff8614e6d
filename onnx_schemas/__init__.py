"""ONNX schemas of the ascend.moe operators: the single source of their names, inputs, outputs,
attributes, defaults and type constraints; shape inference; NumPy references usable as
``onnx.reference`` ops; and pure-ONNX function bodies (see :mod:`onnx_schemas.functions`).
"""

from __future__ import annotations

import threading

import onnx.defs

from . import moe_gating_top_k_hash, moe_re_routing
from ._common import DOMAIN, OPSET_VERSION, attribute_defaults

# One entry per op module; each module defines SCHEMA, OP_TYPE, INPUT_NAMES, OUTPUT_NAMES,
# DEFAULTS, reference() and an onnx.reference OpRun class.
OP_MODULES = [moe_gating_top_k_hash, moe_re_routing]

SCHEMAS = {m.OP_TYPE: m.SCHEMA for m in OP_MODULES}
REFERENCE_OPS = [moe_gating_top_k_hash.MoeGatingTopKHashRef, moe_re_routing.MoeReRoutingRef]

_lock = threading.Lock()

__all__ = ["DOMAIN", "OPSET_VERSION", "SCHEMAS", "REFERENCE_OPS", "OP_MODULES", "register",
           "attribute_defaults", "opset_import"]


def register() -> None:
    """Register every ascend.moe schema with ``onnx.defs`` (idempotent, thread-safe)."""
    with _lock:
        for schema in SCHEMAS.values():
            if not onnx.defs.has(schema.name, schema.domain):
                onnx.defs.register_schema(schema)


def opset_import() -> onnx.OperatorSetIdProto:
    """The ``opset_import`` entry a model using these ops needs."""
    return onnx.helper.make_opsetid(DOMAIN, OPSET_VERSION)
