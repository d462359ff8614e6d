"""MoeReRouting schema, shape inference, NumPy reference and onnx.reference op (docs/operators.md §2)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx.reference import ReferenceEvaluator

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec
from ascend_moe_onnx.onnx_schemas.moe_re_routing_function import build_function
from tests.ops.moe_re_routing.rerouting_cases import (
    WORKED_COUNTS,
    assert_outputs_same,
    make_model,
    random_bits,
)


@pytest.fixture(autouse=True, scope="module")
def _registered():
    onnx_schemas.register()


def test_block_offsets_of_the_worked_example():
    src, dst = spec.block_offsets(WORKED_COUNTS)
    assert src.tolist() == [[0, 1, 1], [3, 5, 6]]
    assert dst.tolist() == [[0, 3, 4], [1, 3, 6]]


@pytest.mark.parametrize("counts, gather", [
    (np.zeros((2, 3), np.int64), []),                # A = 0
    (np.array([[0, 0], [2, 1]]), [0, 1, 2]),         # empty source rank
    (np.array([[0, 2], [0, 1]]), [0, 1, 2]),         # expert without tokens
    (np.array([[2, 1, 3]]), [0, 1, 2, 3, 4, 5]),     # N = 1: identity
    (np.array([[2], [1], [3]]), [0, 1, 2, 3, 4, 5]),  # E = 1: identity
    (np.array([[1, 2], [3, 0], [0, 1]]), [0, 3, 4, 5, 1, 2, 6]),
])
def test_gather_index_edge_cases(counts, gather):
    assert spec.gather_index(counts).tolist() == gather
    A = len(gather)
    tokens = np.arange(A * 3, dtype=np.int8).reshape(A, 3)
    pt, _, idx, etn = spec.reference(tokens, counts)
    np.testing.assert_array_equal(pt, tokens[gather])
    assert etn.tolist() == counts.sum(axis=0).tolist()
    _, _, inv, _ = spec.reference(tokens, counts, idx_type=1)
    np.testing.assert_array_equal(pt[inv], tokens)  # scatter index inverts the permutation


def test_int32_index_limit_is_checked_on_shapes():
    with pytest.raises(ValueError, match=re.escape(
            "input 'tokens' must have at most 2147483647 rows (permute_token_idx is int32), got A = 2147483648")):
        spec.validate_inputs(((2**31, 1), "int8"), ((1, 1), "int64"), None, dict(spec.DEFAULTS))


def test_schema_declares_the_spec_signature():
    assert spec.SCHEMA.domain == "ascend.moe" and spec.SCHEMA.since_version == 1
    assert [i.name for i in spec.SCHEMA.inputs] == list(spec.INPUT_NAMES)
    assert [o.name for o in spec.SCHEMA.outputs] == list(spec.OUTPUT_NAMES)
    assert spec.DEFAULTS == {"expert_token_num_type": 1, "idx_type": 0}
    constraints = {c.type_param_str: set(c.allowed_type_strs) for c in spec.SCHEMA.type_constraints}
    assert constraints["TT"] == {f"tensor({t})" for t in spec.TOKEN_TYPES}
    assert constraints["TC"] == {"tensor(int32)", "tensor(int64)"}
    assert constraints["TS"] == {"tensor(float)", "tensor(float16)", "tensor(bfloat16)"}


def _inferred(model):
    out = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    onnx.checker.check_model(out, full_check=True)
    return [(o.type.tensor_type.elem_type, [d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim])
            for o in out.graph.output]


@pytest.mark.parametrize("scale_type, scale_rank", [(None, 1), ("bfloat16", 1), ("float16", 2)])
def test_shape_inference(scale_type, scale_rank):
    P = onnx.TensorProto
    model = make_model("float8e4m3fn", "int32", scale_type, scale_rank)
    scales = {None: (P.FLOAT, [0]), "bfloat16": (P.BFLOAT16, ["A"]), "float16": (P.FLOAT16, ["A", "S"])}
    assert _inferred(model) == [(P.FLOAT8E4M3FN, ["A", "H"]), scales[scale_type], (P.INT32, ["A"]),
                                (P.INT32, ["E"])]


def test_shape_inference_rejects_bad_attributes():
    with pytest.raises(onnx.shape_inference.InferenceError, match="'idx_type'.*got 2"):
        _inferred(make_model(attrs={"idx_type": 2}))


def test_checker_rejects_a_disallowed_type():
    with pytest.raises(onnx.checker.ValidationError):
        onnx.checker.check_model(make_model("double"), full_check=True)


@pytest.mark.parametrize("attrs", [{}, {"idx_type": 1, "expert_token_num_type": 0}])
def test_onnx_reference_evaluator_runs_the_op_and_the_function_body(attrs):
    rng = np.random.default_rng(0)
    c = np.array([[3, 0, 1], [0, 2, 2]], np.int32)
    feeds = {"tokens": random_bits(rng, (8, 5), "float16"), "expert_token_num_per_rank": c,
             "per_token_scales": rng.random((8, 2)).astype(np.float32)}
    expected = spec.reference(feeds["tokens"], c, feeds["per_token_scales"], **attrs)
    model = make_model("float16", "int32", "float", 2, attrs=attrs, functions=True)
    got = ReferenceEvaluator(model, new_ops=onnx_schemas.REFERENCE_OPS).run(None, feeds)
    assert_outputs_same(got, expected, "OpRun")
    got = ReferenceEvaluator(model).run(None, feeds)  # the model-local function body
    assert_outputs_same(got, expected, "function body", function_body=True)


def test_function_builder_checks_its_arguments():
    with pytest.raises(ValueError, match="opset"):
        build_function({}, [True, True], opset=17)
    with pytest.raises(ValueError, match="'expert_token_num_per_rank' is required"):
        build_function({}, [True, False])
    with pytest.raises(ValueError, match="'idx_type'.*got 5"):
        build_function({"idx_type": 5}, [True, True])
    body = build_function({"idx_type": 1}, [True, True, True], opset=20)
    assert {n.domain for n in body.node} == {""}  # standard ops only
