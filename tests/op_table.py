"""The per-op test table (in the manner of onnxscript's OpInfo): one entry per ascend.moe op feeds
the generic tests of tests/test_op_table.py (schema vs the C++ manifest, bad cases through every
layer, ...). A new op is one OpInfo here plus its own semantic tests."""

from __future__ import annotations

from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable

import numpy as np
import onnx
from onnx import helper

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash, moe_re_routing, moe_routed_experts


@dataclass(frozen=True)
class BadCase:
    """Inputs (ONNX input name -> array; None or missing = absent) and attributes that break one
    rule; ``message`` is the exact text after "<op>: " in every layer. ``ort`` False: the ORT
    custom-op API cannot see the fault (docs/contributing.md says why); ``torch`` False: the
    torch front end's own signature typing rejects the call before the op's validation;
    ``body`` False: the op's function body (standard ONNX, run without the library) cannot see
    the fault: element types (a body is type-generic), shapes that broadcast or that the body
    never reads, and limits of the kernels (docs/operators.md, "What a function body checks")."""

    id: str
    inputs: dict
    attrs: dict
    message: str
    ort: bool = True
    torch: bool = True
    body: bool = True
    # What the ORT kernel says instead of ``message`` where the custom-op API cannot see the
    # whole fault (attribute kinds it cannot read; docs/contributing.md); the project's session
    # (check_nodes) still gives ``message``.
    ort_message: str | None = None


@dataclass(frozen=True)
class OpInfo:
    """What the generic tests need to know of one op."""

    name: str
    spec: ModuleType  # onnx_schemas.<op>: SCHEMA, INPUT_NAMES, OUTPUT_NAMES, reference, <Op>Ref
    bad_cases: Callable[[], list]
    # Calls the torch front end with torch tensors keyed by input name (None = absent); None: the
    # op has no torch front end (MoeRoutedExperts: an export-time op of the ``ort`` formulation).
    torch_call: Callable[[dict, dict], tuple] | None = field(repr=False)
    # Valid (inputs, attributes) with every optional input present: the generic agreement and
    # type tests run on them.
    samples: Callable[[], list] = field(repr=False, default=lambda: [])
    rtol: float = 2e-6  # agreement of the kernels with the NumPy reference (float outputs)
    atol: float = 1e-30


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


def _gating_samples():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 5, 16)).astype(np.float32)
    bias = (rng.standard_normal(16) * 0.1).astype(np.float32)
    full = {"x": x, "bias": bias, "input_ids": rng.integers(0, 9, (2, 5)).astype(np.int64),
            "tid2eid": rng.integers(0, 16, (9, 3)).astype(np.int32),
            "additional_bias": (rng.standard_normal(16) * 0.1).astype(np.float32),
            "additional_token_mask": rng.random((2, 5)) < 0.5}
    return [
        (full, dict(k=3, norm_type=2, routed_scaling_factor=1.5, out_flag=1)),
        ({"x": x, "bias": bias}, dict(k=4, group_count=4, k_group=2, group_select_mode=1, norm_type=1)),
        ({"x": x}, dict(k=2, renorm=1)),
    ]


def _rerouting_samples():
    rng = np.random.default_rng(13)
    counts = np.array([[1, 0, 2], [2, 1, 0]], np.int64)
    tokens = rng.integers(-128, 128, (6, 4)).astype(np.int8)
    scales = rng.standard_normal((6, 2)).astype(np.float32)
    return [
        ({"tokens": tokens, "expert_token_num_per_rank": counts, "per_token_scales": scales},
         dict(idx_type=1, expert_token_num_type=0)),
        ({"tokens": tokens.astype(np.float32), "expert_token_num_per_rank": counts.astype(np.int32)}, {}),
    ]


def _experts_inputs(rng, T=3, H=20, E=5, I=6, k=2, idx_type=np.int64):
    return {"x": rng.standard_normal((T, H)).astype(np.float32),
            "expert_idx": rng.integers(0, E, (T, k)).astype(idx_type),
            "routing_weights": rng.random((T, k)).astype(np.float32),
            "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) * 0.3).astype(np.float32),
            "down_weights": (rng.standard_normal((E, H, I)) * 0.3).astype(np.float32)}


def _experts_samples():
    rng = np.random.default_rng(14)
    return [
        (_experts_inputs(rng), {}),
        (_experts_inputs(rng, T=9, H=37, E=3, I=5, k=3, idx_type=np.int32), dict(swiglu_limit=0.5)),
        (_experts_inputs(rng, T=0), {}),
        (_experts_inputs(rng, H=0), {}),  # valid: y is [T, 0]
    ]


def _experts_cases():
    from tests.gating_cases import attribute_kind_cases

    rng = np.random.default_rng(15)
    good = _experts_inputs(rng)

    def with_(**changes):
        return {**good, **changes}

    B = BadCase
    return [
        B("index-high", with_(expert_idx=np.array([[0, 1], [5, 2], [1, 1]])), {},
          "input 'expert_idx' must be in [0, E) = [0, 5), got 5 at [1, 0]"),
        B("index-negative", with_(expert_idx=np.array([[0, 1], [2, 2], [1, -1]], np.int32)), {},
          "input 'expert_idx' must be in [0, E) = [0, 5), got -1 at [2, 1]"),
        B("x-rank", with_(x=good["x"][None]), {}, "input 'x' must be 2-D [T, H], got shape [1, 3, 20]"),
        B("idx-rows", with_(expert_idx=good["expert_idx"][:2]), {},
          "input 'expert_idx' must be 2-D [T, k] with T = 3 (x.shape[0]), got shape [2, 2]"),
        B("weights-shape", with_(routing_weights=good["routing_weights"][:, :1]), {},
          "input 'routing_weights' must have the shape of expert_idx [3, 2], got shape [3, 1]", body=False),
        B("gate-up-odd", with_(gate_up_weights=good["gate_up_weights"][:, :11]), {},
          "input 'gate_up_weights' must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = 20 "
          "(x.shape[1]), got shape [5, 11, 20]"),
        B("gate-up-hidden", with_(gate_up_weights=good["gate_up_weights"][:, :, :19]), {},
          "input 'gate_up_weights' must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and H = 20 "
          "(x.shape[1]), got shape [5, 12, 19]"),
        B("down-shape", with_(down_weights=good["down_weights"][:4]), {},
          "input 'down_weights' must be [E, H, I] = [5, 20, 6] (from gate_up_weights), got shape [4, 20, 6]",
          body=False),
        B("limit-negative", good, dict(swiglu_limit=-1.0),
          "attribute 'swiglu_limit' must be finite and >= 0 (0 = no clamp), got -1"),
        B("limit-kind", good, dict(swiglu_limit=1),
          "attribute 'swiglu_limit' must be FLOAT, got INT 1"),
        *attribute_kind_cases(good, "swiglu_limit", "FLOAT", k={})[:1],
        B("gate-up-absent", with_(gate_up_weights=None), {}, "input 'gate_up_weights' is required, got none",
          ort=False),
        B("unknown-attribute", good, dict(limit=1.0),
          "attribute 'limit' is not an attribute of MoeRoutedExperts (known: swiglu_limit)", ort=False),
    ]


OPS = [
    OpInfo("MoeGatingTopKHash", moe_gating_top_k_hash, _gating_cases, _gating_torch, _gating_samples),
    OpInfo("MoeReRouting", moe_re_routing, _rerouting_cases, _rerouting_torch, _rerouting_samples),
    OpInfo("MoeRoutedExperts", moe_routed_experts, _experts_cases, None, _experts_samples, rtol=2e-5, atol=1e-6),
]


def bad_case_params():
    """``(op, case)`` pairs for pytest.mark.parametrize, with ids ``<op>-<case>``."""
    return [(op, case) for op in OPS for case in op.bad_cases()]


def torch_bad_case_params():
    """The bad cases of the ops that have a torch front end."""
    return [(op, case) for op, case in bad_case_params() if case.torch and op.torch_call is not None]


def bad_case_id(value) -> str:
    return value.name if isinstance(value, OpInfo) else value.id


def present(inputs: dict) -> dict:
    """The inputs that are given."""
    return {n: a for n, a in inputs.items() if a is not None}


def node_model(op: OpInfo, inputs: dict, attrs: dict, opset_version: int | None = None,
               ranks: bool = False, constants: bool = False) -> onnx.ModelProto:
    """A one-node model: graph inputs named like the op's inputs, of unknown shape (element types
    known) or, with ``ranks``, of known rank with symbolic dims; absent middle inputs as "";
    every output named and left to shape inference. ``constants``: every input but the first is
    an initializer holding its value (ONNX Runtime hands a kernel an empty initializer with a
    null data pointer), so only the first is fed."""
    from tests.rerouting_cases import TYPES, type_name

    given = present(inputs)
    names = [n if n in given else "" for n in op.spec.INPUT_NAMES]
    while names and names[-1] == "":
        names.pop()
    def dims(name):
        return [f"{name}_{i}" for i in range(np.ndim(given[name]))] if ranks else None

    fixed = [n for n in names[1:] if n] if constants else []
    initializers = [helper.make_tensor(n, TYPES[type_name(given[n])][1], np.shape(given[n]),
                                       np.ascontiguousarray(given[n]).tobytes(), raw=True) for n in fixed]
    graph_inputs = [helper.make_tensor_value_info(n, TYPES[type_name(given[n])][1], dims(n))
                    for n in names if n and n not in fixed]
    outputs = [helper.make_value_info(n, onnx.TypeProto()) for n in op.spec.OUTPUT_NAMES]
    protos = {n: a for n, a in attrs.items() if isinstance(a, onnx.AttributeProto)}  # kinds make_node cannot
    node = helper.make_node(op.name, names, list(op.spec.OUTPUT_NAMES), domain=onnx_schemas.DOMAIN,
                            **{n: a for n, a in attrs.items() if n not in protos})
    node.attribute.extend(onnx.AttributeProto(**{**{f.name: v for f, v in a.ListFields()}, "name": n})
                          for n, a in protos.items())
    return helper.make_model(
        helper.make_graph([node], op.name, graph_inputs, outputs, initializers),
        opset_imports=[helper.make_opsetid("", 20),
                       helper.make_opsetid(onnx_schemas.DOMAIN, opset_version or onnx_schemas.OPSET_VERSION)],
        ir_version=10)
