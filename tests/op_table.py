"""The per-op test table (in the manner of onnxscript's OpInfo): one entry per ascend.moe op feeds
the generic tests of tests/test_op_table.py (schema vs the C++ manifest, bad cases through every
layer, ...). A new op is one OpInfo here plus its own semantic tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

import onnx
from onnx import helper

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash, moe_re_routing


@dataclass(frozen=True)
class BadCase:
    """Inputs (ONNX input name -> array; None or missing = absent) and attributes that break one
    rule; ``message`` is the exact text after "<op>: " in every layer. ``ort`` False: the ORT
    custom-op API cannot see the fault (docs/contributing.md says why); ``torch`` False: the
    torch front end's own signature typing rejects the call before the op's validation."""

    id: str
    inputs: dict
    attrs: dict
    message: str
    ort: bool = True
    torch: bool = True


@dataclass(frozen=True)
class OpInfo:
    """What the generic tests need to know of one op."""

    name: str
    spec: ModuleType  # onnx_schemas.<op>: SCHEMA, INPUT_NAMES, OUTPUT_NAMES, reference, <Op>Ref
    bad_cases: Callable[[], list]
    # Calls the torch front end with torch tensors keyed by input name (None = absent).
    torch_call: Callable[[dict, dict], tuple] = field(repr=False)


def _gating_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    attrs = dict(attrs)
    tensors = {n: t for n, t in inputs.items() if n != "x" and t is not None}
    return torch.ops.custom.npu_moe_gating_top_k(inputs["x"], attrs.pop("k"), **tensors, **attrs)


def _rerouting_torch(inputs: dict, attrs: dict):
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)

    return torch.ops.npu.npu_moe_re_routing(inputs["tokens"], inputs["expert_token_num_per_rank"],
                                           per_token_scales=inputs.get("per_token_scales"), **attrs)


def _gating_cases():
    from tests.gating_cases import bad_cases

    return bad_cases()


def _rerouting_cases():
    from tests.rerouting_cases import bad_cases

    return bad_cases()


OPS = [
    OpInfo("MoeGatingTopKHash", moe_gating_top_k_hash, _gating_cases, _gating_torch),
    OpInfo("MoeReRouting", moe_re_routing, _rerouting_cases, _rerouting_torch),
]


def bad_case_params():
    """``(op, case)`` pairs for pytest.mark.parametrize, with ids ``<op>-<case>``."""
    return [(op, case) for op in OPS for case in op.bad_cases()]


def bad_case_id(value) -> str:
    return value.name if isinstance(value, OpInfo) else value.id


def present(inputs: dict) -> dict:
    """The inputs that are given."""
    return {n: a for n, a in inputs.items() if a is not None}


def node_model(op: OpInfo, inputs: dict, attrs: dict, opset_version: int | None = None) -> onnx.ModelProto:
    """A one-node model: graph inputs of unknown shape (element types known) named like the op's
    inputs, absent middle inputs as "", every output named and left to shape inference."""
    from tests.rerouting_cases import TYPES, type_name

    given = present(inputs)
    names = [n if n in given else "" for n in op.spec.INPUT_NAMES]
    while names and names[-1] == "":
        names.pop()
    graph_inputs = [helper.make_tensor_value_info(n, TYPES[type_name(given[n])][1], None)
                    for n in names if n]
    outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in op.spec.OUTPUT_NAMES]
    node = helper.make_node(op.name, names, list(op.spec.OUTPUT_NAMES), domain=onnx_schemas.DOMAIN, **attrs)
    return helper.make_model(
        helper.make_graph([node], op.name, graph_inputs, outputs),
        opset_imports=[helper.make_opsetid("", 20),
                       helper.make_opsetid(onnx_schemas.DOMAIN, opset_version or onnx_schemas.OPSET_VERSION)],
        ir_version=10)
