"""MoeGatingTopKHash in ONNX Runtime through the custom-op library: agreement with the NumPy
reference, worked behaviours, shape inference, threading, and every validation rule of docs/operators.md §1.3."""

from __future__ import annotations

import itertools
import re
import json
import os
import subprocess
import sys

import ml_dtypes
import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper  # noqa: E402

from ascend_moe_onnx import ort_custom_ops  # noqa: E402
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import INPUT_NAMES, reference  # noqa: E402
from tests import ort_values  # noqa: E402
from tests.gating_cases import (  # noqa: E402
    WEIGHT_RTOL, assert_routing_equal, make_inputs, seed_of, selection_scores,
)

ELEM_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
}
DTYPE_NAMES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


def make_model(attrs: dict, inputs: dict, x_dims: list | None = None, outputs: int = 3):
    """Single-node model; graph inputs named like the op inputs, with symbolic dims (E of x kept
    fixed unless ``x_dims`` says otherwise)."""
    node_inputs = [name if name in inputs else "" for name in INPUT_NAMES]
    while node_inputs[-1] == "":
        node_inputs.pop()
    graph_inputs = []
    for name in INPUT_NAMES:
        if name not in inputs:
            continue
        a = np.asarray(inputs[name])
        if name == "x":
            dims = x_dims if x_dims is not None else [f"x{i}" for i in range(a.ndim - 1)] + [a.shape[-1]]
        else:
            dims = [f"{name}{i}" for i in range(a.ndim)]
        graph_inputs.append(helper.make_tensor_value_info(name, ELEM_TYPES[a.dtype], dims))
    out_names = ["y", "expert_idx", "out"][:outputs]
    node = helper.make_node("MoeGatingTopKHash", node_inputs, out_names, domain="ascend.moe", **attrs)
    x_type = ELEM_TYPES[np.asarray(inputs["x"]).dtype]
    graph_outputs = [
        helper.make_tensor_value_info(n, t, None)
        for n, t in zip(out_names, [x_type, TensorProto.INT32, TensorProto.FLOAT])
    ]
    graph = helper.make_graph([node], "gating", graph_inputs, graph_outputs)
    return helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("ascend.moe", 1)],
        ir_version=10,
    )


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
        for rank, leads in LEADS.items():
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


# ---- worked behaviours ---------------------------------------------------------------------------


def test_ties_go_to_the_lower_index():
    x = np.array([[1, 3, 3, 2, 3, 0], [0, 0, 0, 0, 0, 0]], np.float32)
    _, idx, _ = run_ort({"x": x}, dict(k=3, norm_type=1))
    np.testing.assert_array_equal(idx, [[1, 2, 4], [0, 1, 2]])


@pytest.mark.parametrize("experts", [256, 2048])
def test_ties_in_long_rows(experts):
    """All-equal rows and rows with many equal maxima take the lowest indices."""
    rng = np.random.default_rng(experts)
    x = np.zeros((4, experts), np.float32)
    x[1, ::7] = 1.0                          # many equal maxima
    x[2] = rng.integers(0, 3, experts)       # few distinct values
    x[3, [5, 100, 200]] = [2.0, 2.0, 1.0]    # a tie among the top few
    attrs = dict(k=8, norm_type=1)
    y, idx, _ = run_ort({"x": x}, attrs)
    ry, ridx, _ = reference(x, **attrs)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(idx[0], np.arange(8))
    np.testing.assert_array_equal(idx[1], np.arange(0, 56, 7))
    np.testing.assert_allclose(y, ry, rtol=4e-6)


def test_nan_ranks_below_minus_infinity():
    nan, inf = np.nan, np.inf
    x = np.array([[nan, 0, nan, 1, 0, -1]], np.float32)
    bias = np.array([0, -inf, 0, 0, -inf, 0], np.float32)
    attrs = dict(k=6, norm_type=1)
    y, idx, _ = run_ort({"x": x, "bias": bias}, attrs)
    np.testing.assert_array_equal(idx, [[3, 5, 1, 4, 0, 2]])
    ry, ridx, _ = reference(x, bias, **attrs)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_array_equal(np.isnan(y), np.isnan(ry))


def test_nan_in_long_rows():
    """NaN logits in the block-bounded selection: NaN scores are picked last, lowest index first."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 256)).astype(np.float32)
    x[0, :250] = np.nan                      # only 6 numbers: 2 NaN experts fill k = 8
    x[1, ::2] = np.nan
    x[2, 10] = -np.inf
    attrs = dict(k=8, norm_type=2, out_flag=1)
    got = run_ort({"x": x}, attrs)
    _, ridx, _ = reference(x, **attrs)
    np.testing.assert_array_equal(got[1], ridx)
    np.testing.assert_array_equal(got[1][0, 6:], [0, 1])


def test_softmax_with_nan_gives_nan_scores():
    x = np.array([[0.5, np.nan, 1.0, 2.0]], np.float32)
    y, idx, out = run_ort({"x": x}, dict(k=2, norm_type=0, out_flag=1))
    assert np.isnan(out).all() and np.isnan(y).all()
    np.testing.assert_array_equal(idx, [[0, 1]])


def test_sigmoid_saturation():
    x = np.array([[100, -100, 1000, -1000, 0, 88, -88, 20]], np.float32)
    attrs = dict(k=8, norm_type=1, out_flag=1, renorm=0)
    y, idx, out = run_ort({"x": x}, attrs)
    ry, ridx, rout = reference(x, **attrs)
    np.testing.assert_array_equal(idx, ridx)
    # saturated: within the kernel's stated 4 ulp of 1 (docs/kernel.md; the AVX2 path's reciprocal,
    # vrcpps + one Newton step, gives 0.99999994 on some CPUs, the other paths exactly 1), never above
    np.testing.assert_array_max_ulp(out[0, [0, 2]], np.ones(2, np.float32), maxulp=4)
    assert (out[0, [0, 2]] <= 1.0).all() and out[0, 3] == 0.0
    assert out[0, 1] == np.float32(np.exp(-100.0))  # subnormal e^-100, not flushed to 0
    np.testing.assert_allclose(out, rout, rtol=4e-6, atol=1e-37)
    np.testing.assert_allclose(y, ry, rtol=4e-6, atol=1e-37)


def test_sqrt_softplus_extremes():
    x = np.array([[100, -100, 1e30, -1e30, 0, 17, -17, -120]], np.float32)
    attrs = dict(k=8, norm_type=2, out_flag=1)
    y, idx, out = run_ort({"x": x}, attrs)
    ry, ridx, rout = reference(x, **attrs)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_allclose(out, rout, rtol=4e-6, atol=1e-37)
    assert out[0, 3] == 0.0 and np.isclose(out[0, 2], np.sqrt(np.float32(1e30)))


@pytest.mark.parametrize("group_size", [2, 32])
def test_group_top2_counts_equal_maxima_twice(group_size):
    """Group A holds two equal maxima (score 2a), group B one larger maximum with a small second:
    mode 1 keeps A, mode 0 keeps B."""
    G = 4
    E = G * group_size
    bias = np.full(E, -0.45, np.float32)     # b = 0.5 + bias with x = 0 (sigmoid)
    a0 = 0 * group_size
    b0 = 2 * group_size
    bias[a0 + group_size - 2] = bias[a0 + group_size - 1] = 0.0   # A: 0.5, 0.5 -> 1.0
    bias[b0] = 0.4                                                # B: 0.9, 0.05 -> 0.95
    bias[b0 + 1] = -0.45
    x = np.zeros((1, E), np.float32)
    base = dict(k=2, k_group=1, group_count=G, norm_type=1)
    _, idx1, _ = run_ort({"x": x, "bias": bias}, dict(base, group_select_mode=1))
    _, idx0, _ = run_ort({"x": x, "bias": bias}, dict(base, group_select_mode=0))
    np.testing.assert_array_equal(idx1, [[a0 + group_size - 2, a0 + group_size - 1]])
    assert idx0[0, 0] == b0
    for mode, got in ((1, idx1), (0, idx0)):
        _, ridx, _ = reference(x, bias, **base, group_select_mode=mode)
        np.testing.assert_array_equal(got, ridx)


def test_equal_group_scores_keep_the_lower_group():
    x = np.zeros((1, 16), np.float32)
    bias = np.zeros(16, np.float32)
    bias[[2, 6, 10, 14]] = 0.25              # every group has the same score
    attrs = dict(k=2, k_group=2, group_count=4, group_select_mode=1, norm_type=1)
    _, idx, _ = run_ort({"x": x, "bias": bias}, attrs)
    np.testing.assert_array_equal(idx, [[2, 6]])


def test_weights_come_from_unbiased_scores():
    x = np.array([[2.0, 1.0, 0.0, -1.0]], np.float32)
    bias = np.array([0, 0, 0, 10], np.float32)
    attrs = dict(k=2, norm_type=1, routed_scaling_factor=2.0)
    y, idx, _ = run_ort({"x": x, "bias": bias}, attrs)
    np.testing.assert_array_equal(idx, [[3, 0]])
    s = 1 / (1 + np.exp(-x[0, [3, 0]].astype(np.float64)))
    np.testing.assert_allclose(y[0], 2.0 * s / s.sum(), rtol=4e-6)


def test_softmax_without_and_with_renorm():
    x = np.array([[1.0, 2.0, 3.0, 4.0]], np.float32)
    p = np.exp(x[0] - 4.0) / np.exp(x[0] - 4.0).sum()
    y0, idx, _ = run_ort({"x": x}, dict(k=2, norm_type=0, routed_scaling_factor=1.5))
    np.testing.assert_array_equal(idx, [[3, 2]])
    np.testing.assert_allclose(y0[0], 1.5 * p[[3, 2]], rtol=4e-6)     # Ascend: no renormalisation
    y1, _, _ = run_ort({"x": x}, dict(k=2, norm_type=0, renorm=1, routed_scaling_factor=1.5))
    np.testing.assert_allclose(y1[0], 1.5 * p[[3, 2]] / p[[3, 2]].sum(), rtol=4e-6)


def test_hash_rows_keep_table_order_and_duplicates():
    x = np.random.default_rng(0).standard_normal((3, 8)).astype(np.float32)
    tid2eid = np.array([[3, 3, 1, 0], [7, 6, 5, 4], [0, 0, 0, 0]], np.int32)
    ids = np.array([2, 0, 1], np.int64)
    attrs = dict(k=4, norm_type=2, routed_scaling_factor=1.5, out_flag=1)
    inputs = {"x": x, "input_ids": ids, "tid2eid": tid2eid}
    y, idx, out = run_ort(inputs, attrs)
    np.testing.assert_array_equal(idx, tid2eid[ids])
    w = out[np.arange(3)[:, None], idx].astype(np.float64)
    np.testing.assert_allclose(y, 1.5 * w / w.sum(-1, keepdims=True), rtol=4e-6)
    check_against_reference(inputs, attrs, (y, idx, out))


def test_masked_rows_on_hash_layers_use_top_k_with_additional_bias():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 8)).astype(np.float32)
    tid2eid = np.tile(np.array([[0, 1]], np.int64), (5, 1))
    ids = np.array([1, -7, 2, 99], np.int32)        # invalid ids on masked rows are never used
    mask = np.array([False, True, False, True])
    abias = np.zeros(8, np.float32)
    abias[[5, 6]] = 100.0
    attrs = dict(k=2, norm_type=1)
    inputs = {"x": x, "input_ids": ids, "tid2eid": tid2eid, "additional_bias": abias,
              "additional_token_mask": mask}
    y, idx, out = run_ort(inputs, attrs)
    np.testing.assert_array_equal(idx[[0, 2]], [[0, 1], [0, 1]])
    assert set(idx[1]) == {5, 6} and set(idx[3]) == {5, 6}
    assert out.shape == (0,)
    ry, ridx, _ = reference(**inputs, **attrs)
    np.testing.assert_array_equal(idx, ridx)
    np.testing.assert_allclose(y, ry, rtol=4e-6)


def test_additional_bias_only_on_masked_rows():
    x = np.zeros((2, 4), np.float32)
    bias = np.array([0, 0, 0, 1], np.float32)
    abias = np.array([1, 0, 0, 0], np.float32)
    mask = np.array([True, False])
    _, idx, _ = run_ort({"x": x, "bias": bias, "additional_bias": abias, "additional_token_mask": mask},
                        dict(k=1, norm_type=1))
    np.testing.assert_array_equal(idx, [[0], [3]])
    # additional_bias without a mask has no effect
    _, idx, _ = run_ort({"x": x, "bias": bias, "additional_bias": abias}, dict(k=1, norm_type=1))
    np.testing.assert_array_equal(idx, [[3], [3]])


def test_out_is_empty_unless_out_flag():
    x = np.random.default_rng(0).standard_normal((2, 3, 8)).astype(np.float16)
    _, _, out = run_ort({"x": x}, dict(k=2))
    assert out.shape == (0,) and out.dtype == np.float32
    _, _, out = run_ort({"x": x}, dict(k=2, out_flag=1))
    assert out.shape == (2, 3, 8) and out.dtype == np.float32


def test_empty_input():
    for lead in [(0,), (3, 0)]:
        x = np.zeros((*lead, 16), ml_dtypes.bfloat16)
        y, idx, out = run_ort({"x": x}, dict(k=4, out_flag=1))
        assert y.shape == (*lead, 4) and y.dtype == x.dtype
        assert idx.shape == (*lead, 4) and out.shape == (*lead, 16)


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


_ISA_SCRIPT = """
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from tests.test_gating_ort import isa_outputs
print(json.dumps(isa_outputs()))
"""


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
    tests/test_gating_kernel.py checks every path against the reference)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, ASCEND_MOE_CPU_ISA="baseline",
               ASCEND_MOE_ORT_LIBRARY=ort_custom_ops.get_library_path())
    proc = subprocess.run([sys.executable, "-c", _ISA_SCRIPT.format(root=root)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    for base, default in zip(json.loads(proc.stdout.strip().splitlines()[-1]), isa_outputs()):
        assert base[1] == default[1]
        for a, b in ((base[0], default[0]), (base[2], default[2])):
            a = np.asarray(a, np.uint32).view(np.int32).astype(np.int64)
            b = np.asarray(b, np.uint32).view(np.int32).astype(np.int64)
            assert np.abs(a - b).max(initial=0) <= 16  # positive floats: ulp = integer distance


# ---- validation (docs/operators.md §1.3): the bad-case table is run by tests/test_op_table.py ---------------

from tests.gating_cases import _hash as _hash_inputs  # noqa: E402


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
