"""MoeGatingTopKHash in ONNX Runtime through the custom-op library: agreement with the NumPy
reference, worked behaviours, shape inference, threading, and every validation rule of docs/operators.md §1.3."""

from __future__ import annotations

import itertools
import re

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

ort = pytest.importorskip("onnxruntime")
from ascend_moe_onnx import ort_custom_ops  # noqa: E402
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import OP_TYPE as OP  # noqa: E402
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import reference  # noqa: E402
from tests import ort_values  # noqa: E402
from tests.cpu_isa import call_on_isa  # noqa: E402
from tests.op_table import node_model  # noqa: E402
from tests.ops.moe_gating_top_k_hash.gating_cases import (  # noqa: E402
    WEIGHT_RTOL,
    assert_routing_equal,
    make_inputs,
    seed_of,
    selection_scores,
)

DTYPE_NAMES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def make_model(attrs: dict, inputs: dict, x_dims: list | None = None, outputs: int = 3):
    """Single-node model (tests/op_table.node_model) with typed outputs and symbolic dims, E of x
    kept fixed unless ``x_dims`` says otherwise."""
    x = np.asarray(inputs["x"])
    if x_dims is None:
        x_dims = [f"x{i}" for i in range(x.ndim - 1)] + [x.shape[-1]]
    return node_model(OP, inputs, attrs, ranks=True, dims={"x": x_dims}, outputs=outputs,
                      typed_outputs=True, opset=18)


def session(model, threads: int | None = 1):
    return ort.InferenceSession(
        model.SerializeToString(), ort_custom_ops.session_options(threads), providers=["CPUExecutionProvider"]
    )


def run_ort(inputs: dict, attrs: dict, threads: int | None = 1):
    sess = session(make_model(attrs, inputs), threads)
    return ort_values.run(sess, inputs)


def check_against_reference(inputs: dict, attrs: dict, got):
    """Indices exactly the reference's, weights within a few ulp, out exact-ish."""
    y, idx, out = got
    ry, ridx, rout = reference(**inputs, **attrs)
    dtype = {np.dtype(v): k for k, v in DTYPE_NAMES.items()}[np.asarray(inputs["x"]).dtype]
    assert y.dtype == ry.dtype and y.shape == ry.shape
    assert idx.dtype == np.int32 and idx.shape == ridx.shape
    assert out.dtype == np.float32 and out.shape == rout.shape
    assert_routing_equal(idx, ridx, selection_scores(inputs, attrs))
    rtol = WEIGHT_RTOL[dtype]
    np.testing.assert_allclose(y.astype(np.float64), ry.astype(np.float64), rtol=rtol, atol=rtol * 1e-3)
    np.testing.assert_allclose(out, rout, rtol=4e-6, atol=1e-30)


# ---- sweep ---------------------------------------------------------------------------------------

NORMS = {"softmax": dict(norm_type=0), "softmax_renorm": dict(norm_type=0, renorm=1),
         "sigmoid": dict(norm_type=1), "sqrt_softplus": dict(norm_type=2)}
# grouping -> experts -> attributes
GROUPINGS = {
    "none": {16: dict(k=4), 256: dict(k=8)},
    "max": {16: dict(k=3, group_count=4, k_group=3, group_select_mode=0),
            256: dict(k=6, group_count=8, k_group=3, group_select_mode=0)},
    "top2": {16: dict(k=4, group_count=4, k_group=2, group_select_mode=1),
             256: dict(k=8, group_count=8, k_group=4, group_select_mode=1)},
}
LEADS = {2: [(0,), (1,), (7,), (64,)], 3: [(2, 0), (1, 1), (7, 1), (4, 16)]}
SWEEP = [
    (norm, grouping, bias_mode, hash_ids, experts)
    for norm, grouping, bias_mode, hash_ids, experts in itertools.product(
        NORMS, GROUPINGS, ("none", "bias", "additional"), (None, "int32/int64", "int64/int32"), (16, 256))
    if not (hash_ids and grouping != "none")
]


@pytest.mark.parametrize("norm,grouping,bias_mode,hash_ids,experts", SWEEP)
def test_sweep_matches_reference(norm, grouping, bias_mode, hash_ids, experts):
    attrs = dict(GROUPINGS[grouping][experts], **NORMS[norm], routed_scaling_factor=2.5,
                 out_flag=int(experts == 256))
    for dtype in DTYPE_NAMES:
        for _rank, leads in LEADS.items():
            sess = None
            for lead in leads:
                rng = np.random.default_rng(seed_of(norm, grouping, bias_mode, hash_ids, experts, dtype, lead))
                inputs = make_inputs(rng, attrs, bias_mode, hash_ids, dtype, lead, experts=experts)
                if sess is None:  # one session per rank: leading dims are symbolic
                    sess = session(make_model(attrs, inputs))
                got = ort_values.run(sess, inputs)
                check_against_reference(inputs, attrs, got)


def test_flat_ids_and_mask_with_3d_x():
    """input_ids and the mask may be [R] for x of rank 3."""
    attrs = dict(k=4, norm_type=2, routed_scaling_factor=1.5)
    rng = np.random.default_rng(1)
    inputs = make_inputs(rng, attrs, "additional", "int64/int32", "float", (3, 5), experts=32)
    inputs["input_ids"] = inputs["input_ids"].reshape(-1)
    inputs["additional_token_mask"] = inputs["additional_token_mask"].reshape(-1)
    check_against_reference(inputs, attrs, run_ort(inputs, attrs))


@pytest.mark.parametrize("experts,k", [(64, 1), (128, 8), (384, 8), (2048, 64), (1000, 40), (130, 6)])
def test_selection_sizes(experts, k):
    """Row sizes around the selection strategies (small rows, block bounds, large k)."""
    attrs = dict(k=k, norm_type=1)
    rng = np.random.default_rng(seed_of(experts, k))
    for dtype in ("float", "bfloat16"):
        inputs = make_inputs(rng, attrs, "bias", None, dtype, (33,), experts=experts)
        check_against_reference(inputs, attrs, run_ort(inputs, attrs))


@pytest.mark.parametrize("experts,groups,k_group,k", [(160, 8, 3, 6), (96, 3, 2, 8), (384, 8, 4, 8),
                                                      (2048, 16, 8, 64), (40, 20, 5, 5)])
@pytest.mark.parametrize("mode", [0, 1])
def test_group_sizes(experts, groups, k_group, k, mode):
    """Group sizes that are and are not multiples of the vector width."""
    attrs = dict(k=k, k_group=k_group, group_count=groups, group_select_mode=mode, norm_type=mode,
                 routed_scaling_factor=16.0)
    rng = np.random.default_rng(seed_of(experts, groups, k_group, k, mode))
    inputs = make_inputs(rng, attrs, "additional", None, "float", (40,), experts=experts)
    check_against_reference(inputs, attrs, run_ort(inputs, attrs))


# ---- kernel-specific behaviours (the semantic edge cases are samples of tests/op_table.py) -------


def test_sigmoid_saturation_ulps_and_subnormals():
    x = np.array([[100, -100, 1000, -1000, 0, 88, -88, 20]], np.float32)
    _, _, out = run_ort({"x": x}, dict(k=8, norm_type=1, out_flag=1, renorm=0))
    # saturated: within the kernel's stated 4 ulp of 1 (docs/kernel.md; the AVX2 path's reciprocal,
    # vrcpps + one Newton step, gives 0.99999994 on some CPUs, the other paths exactly 1), never above
    np.testing.assert_array_max_ulp(out[0, [0, 2]], np.ones(2, np.float32), maxulp=4)
    assert (out[0, [0, 2]] <= 1.0).all() and out[0, 3] == 0.0
    assert out[0, 1] == np.float32(np.exp(-100.0))  # subnormal e^-100, not flushed to 0


ORT_VERSION = tuple(int(p) for p in ort.__version__.split(".")[:2])


def test_two_output_node():
    """`out` is optional: a node may emit only y and expert_idx (on every supported runtime:
    below 1.32 the shape inference leaves out alone, since those runtimes abort when it sets an
    output the node lacks)."""
    x = np.random.default_rng(0).standard_normal((5, 16)).astype(np.float32)
    sess = session(make_model(dict(k=4, norm_type=1), {"x": x}, outputs=2))
    y, idx = ort_values.run(sess, {"x": x})
    ry, ridx, _ = reference(x, k=4, norm_type=1)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_allclose(y, ry, rtol=4e-6)


def test_out_omitted_with_an_empty_name():
    """outputs ["y", "expert_idx", ""] (valid ONNX): the empty slot is counted but not produced;
    it used to be written through a null value (SIGSEGV)."""
    x = np.random.default_rng(1).standard_normal((5, 16)).astype(np.float32)
    for out_flag in (0, 1):
        model = make_model(dict(k=4, out_flag=out_flag), {"x": x})
        model.graph.node[0].output[2] = ""
        del model.graph.output[2]
        y, idx = ort_values.run(session(model), {"x": x})
        ry, ridx, _ = reference(x, k=4, out_flag=out_flag)
        np.testing.assert_array_equal(idx, ridx)
        np.testing.assert_allclose(y, ry, rtol=4e-6)


def test_shape_inference_keeps_symbolic_dims():
    x = np.zeros((2, 3, 16), np.float32)
    sess = session(make_model(dict(k=4, out_flag=1), {"x": x}, x_dims=["batch", "seq", 16]))
    shapes = {o.name: (o.type, o.shape) for o in sess.get_outputs()}
    assert shapes["y"] == ("tensor(float)", ["batch", "seq", 4])
    assert shapes["expert_idx"] == ("tensor(int32)", ["batch", "seq", 4])
    # Below ORT 1.32 the library leaves the optional out's shape to ORT (those runtimes abort when
    # shape inference sets an output a two-output node lacks).
    if ORT_VERSION >= (1, 32):
        assert shapes["out"] == ("tensor(float)", ["batch", "seq", 16])
    sess = session(make_model(dict(k=4), {"x": x.astype(np.float16)}, x_dims=["batch", "seq", 16]))
    shapes = {o.name: (o.type, o.shape) for o in sess.get_outputs()}
    assert shapes["y"] == ("tensor(float16)", ["batch", "seq", 4])
    if ORT_VERSION >= (1, 32):
        assert shapes["out"] == ("tensor(float)", [0])


# ---- threading -----------------------------------------------------------------------------------

DEEPSEEK_V3 = dict(k=8, k_group=4, group_count=8, group_select_mode=1, norm_type=1,
                   routed_scaling_factor=2.5, out_flag=1)


@pytest.mark.parametrize("attrs", [DEEPSEEK_V3, dict(k=6, norm_type=2, routed_scaling_factor=1.5)])
def test_two_threads_equal_one_thread(attrs):
    rng = np.random.default_rng(7)
    inputs = make_inputs(rng, attrs, "bias", None, "float", (1500,), experts=256)
    one = run_ort(inputs, attrs, threads=1)
    two = run_ort(inputs, attrs, threads=2)
    for a, b in zip(one, two):
        np.testing.assert_array_equal(a, b)
    check_against_reference(inputs, attrs, one)


def test_data_error_names_the_first_bad_row_with_threads():
    rng = np.random.default_rng(8)
    inputs = make_inputs(rng, dict(k=4), "none", "int64/int32", "float", (3000,), experts=32, table_rows=50)
    inputs["input_ids"][[2900, 1700]] = [50, -1]
    with pytest.raises(Exception, match=r"input 'input_ids' value at row 1700 is out of range \[0, 50\), got -1"):
        run_ort(inputs, dict(k=4), threads=2)


def test_bad_token_ids_are_reported_before_bad_table_entries():
    """As in the NumPy reference: a bad id in a later row wins over a bad entry in an earlier one."""
    table = np.zeros((10, 2), np.int32)
    table[3, 1] = 8
    ids = np.zeros(3000, np.int64)
    ids[[5, 2500]] = [3, 10]
    inputs = {"x": np.zeros((3000, 8), np.float32), "input_ids": ids, "tid2eid": table}
    for threads in (1, 2):
        with pytest.raises(Exception, match=r"'input_ids' value at row 2500 is out of range \[0, 10\), got 10"):
            run_ort(inputs, dict(k=2), threads=threads)
    with pytest.raises(ValueError, match=r"'input_ids' value at row 2500"):
        reference(**inputs, k=2)


def test_empty_table_made_by_the_graph_is_still_hash_routing():
    """A table ``[0, k]`` that another node produces (ONNX Runtime allocates it empty, data pointer
    null) still means hash routing: every id is out of range, never a silent top-k."""
    from onnx import numpy_helper

    fill = helper.make_node("ConstantOfShape", ["table_shape"], ["tid2eid"],
                            value=numpy_helper.from_array(np.zeros(1, np.int32)))
    node = helper.make_node("MoeGatingTopKHash", ["x", "", "input_ids", "tid2eid"], ["y", "expert_idx", "out"],
                            domain="ascend.moe", k=2)
    graph = helper.make_graph(
        [fill, node], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["R", 8]),
         helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["R"])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("y", TensorProto.FLOAT), ("expert_idx", TensorProto.INT32), ("out", TensorProto.FLOAT))],
        [numpy_helper.from_array(np.array([0, 2], np.int64), "table_shape")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                    helper.make_opsetid("ascend.moe", 1)], ir_version=10)
    sess = session(model)
    feeds = {"x": np.zeros((3, 8), np.float32), "input_ids": np.zeros(3, np.int64)}
    with pytest.raises(Exception, match=r"input 'input_ids' value at row 0 is out of range \[0, 0\), got 0$"):
        sess.run(None, feeds)
    y, idx, _ = sess.run(None, {"x": np.zeros((0, 8), np.float32), "input_ids": np.zeros(0, np.int64)})
    assert y.shape == idx.shape == (0, 2)


def isa_outputs() -> list:
    """Outputs of a few configurations, as lists (compared across instruction-set builds)."""
    results = []
    for attrs, bias_mode, dtype, experts in [
        (DEEPSEEK_V3, "bias", "float", 256),
        (dict(k=6, norm_type=2, routed_scaling_factor=1.5, out_flag=1), "additional", "bfloat16", 384),
        (dict(k=8, norm_type=0, renorm=1, out_flag=1), "none", "float16", 128),
        (dict(k=6, k_group=3, group_count=8, norm_type=0, routed_scaling_factor=16.0, out_flag=1),
         "none", "float", 160),
    ]:
        rng = np.random.default_rng(experts)
        inputs = make_inputs(rng, attrs, bias_mode, None, dtype, (70,), experts=experts)
        y, idx, out = run_ort(inputs, attrs)
        results.append([y.astype(np.float32).view(np.uint32).tolist(), idx.tolist(), out.view(np.uint32).tolist()])
    return results


def test_baseline_and_default_builds_agree():
    """ASCEND_MOE_CPU_ISA=baseline forces the baseline build: the same experts as the default
    (AVX2 / AVX-512) build, scores and weights within a few ulp (FMA, reciprocal estimate;
    tests/ops/moe_gating_top_k_hash/test_gating_kernel.py checks every path against the reference)."""
    baseline = call_on_isa("baseline", "tests.ops.moe_gating_top_k_hash.test_gating_ort:isa_outputs", timeout=120)
    for base, default in zip(baseline, isa_outputs()):
        assert base[1] == default[1]
        for a, b in ((base[0], default[0]), (base[2], default[2])):
            a = np.asarray(a, np.uint32).view(np.int32).astype(np.int64)
            b = np.asarray(b, np.uint32).view(np.int32).astype(np.int64)
            assert np.abs(a - b).max(initial=0) <= 16  # positive floats: ulp = integer distance


# ---- validation (docs/operators.md §1.3): the bad-case table is run by tests/test_op_table.py ---------------

from tests.ops.moe_gating_top_k_hash.gating_cases import _hash as _hash_inputs  # noqa: E402


def test_group_count_without_effective_grouping_allows_hash_and_mode_1():
    """group_count = k_group (no effective grouping) is no error with a hash table or P = 1."""
    attrs = dict(k=2, group_count=8, k_group=8, group_select_mode=1)
    _, idx, _ = run_ort(_hash_inputs(ids=np.array([1, 2, 3]), table=np.arange(8, dtype=np.int32).reshape(4, 2)), attrs)
    np.testing.assert_array_equal(idx, [[2, 3], [4, 5], [6, 7]])


@pytest.mark.parametrize("extra", ["none", "hash", "mask"])
def test_x_of_unknown_rank_is_refused_at_session_creation(extra):
    """x of unknown rank: the C API cannot declare y as "x's type, unknown rank", and ORT types
    an output the library leaves unset like the node's last input (int32 with a hash table, bool
    with a mask), so a graph declaring y's true type failed with ORT's "Type Error" or the
    kernel found y typed bool at run time. The library types y itself and refuses the node when
    the session is created, naming x."""
    rows, experts = 3, 8
    inputs = {"x": np.random.default_rng(0).standard_normal((rows, experts)).astype(np.float32)}
    if extra == "hash":
        inputs.update(input_ids=np.zeros(rows, np.int64), tid2eid=np.zeros((4, 2), np.int32))
    if extra == "mask":
        inputs.update(additional_bias=np.zeros(experts, np.float32),
                      additional_token_mask=np.zeros(rows, np.bool_))
    model = make_model(dict(k=2), inputs, outputs=2)
    del model.graph.input[0].type.tensor_type.shape.dim[:]
    model.graph.input[0].type.tensor_type.ClearField("shape")
    with pytest.raises(Exception, match=re.escape(
            "MoeGatingTopKHash: input 'x' must have rank >= 2, got rank 0 or an unknown rank in the graph")):
        session(model)


def test_x_of_rank_1_fails_with_the_validation_message_not_a_type_error():
    """A rank-1 x (invalid) still gets typed outputs, so the run reports the contract's message."""
    inputs = {"x": np.zeros(8, np.float32), "input_ids": np.zeros(1, np.int64),
              "tid2eid": np.zeros((4, 2), np.int32)}
    with pytest.raises(Exception, match=re.escape(
            "MoeGatingTopKHash: input 'x' must have rank >= 2, got shape [8]")):
        ort_values.run(session(make_model(dict(k=2), inputs, outputs=2)), inputs)


def test_wrong_input_type_with_typed_graph_outputs_gets_the_library_message():
    """Shape inference declares the outputs even when it refuses an input's type: ORT used to
    type y like the node's last input (the int32 mask) and fail with its own "Type Error" on
    the graph's float y before the library could name the mask."""
    x = np.zeros((4, 8), np.float32)
    inputs = {"x": x, "additional_bias": np.zeros(8, np.float32),
              "additional_token_mask": np.zeros(4, np.int32)}
    with pytest.raises(Exception, match=re.escape(
            "MoeGatingTopKHash: input 'additional_token_mask' must be bool, got int32")):
        session(make_model(dict(k=2), inputs))


def test_routing_comparison_excuses_no_near_tie():
    """Two experts one float32 ulp apart in the selection scores, swapped: a mismatch, reported with
    the gap, never excused as rounding (the tie rule makes the reference's order exact)."""
    b = np.array([[1.0, np.nextafter(np.float32(1.0), np.float32(2.0)), 0.0]], np.float32)
    with pytest.raises(AssertionError, match=r"experts \[0, 1\].*1 float32 ulp apart"):
        assert_routing_equal([[0, 1]], [[1, 0]], b)
    assert_routing_equal([[1, 0]], [[1, 0]], b)
