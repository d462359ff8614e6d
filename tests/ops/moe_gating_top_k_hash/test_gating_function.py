"""MoeGatingTopKHash function bodies (onnx_schemas.functions) run in plain ONNX Runtime, without the
custom-op library, against the NumPy reference."""

from __future__ import annotations

import warnings
from collections import Counter

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import functions
from ascend_moe_onnx.onnx_schemas.functions import attach_functions, specialisation_key, strip_functions
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import INPUT_NAMES, reference
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash_function import build_function
from ascend_moe_onnx.ort_custom_ops import version_tuple
from tests import ort_values
from tests.op_table import node_model
from tests.ops.moe_gating_top_k_hash.gating_cases import assert_routing_equal, selection_scores

DOMAIN = onnx_schemas.DOMAIN
OP = "MoeGatingTopKHash"

DTYPES = {  # name -> (ONNX element type, numpy dtype, mantissa bits, min normal exponent)
    "float": (TensorProto.FLOAT, np.dtype(np.float32), 23, -126),
    "float16": (TensorProto.FLOAT16, np.dtype(np.float16), 10, -14),
    "bfloat16": (TensorProto.BFLOAT16, np.dtype(ml_dtypes.bfloat16), 7, -126),
}
NP_TO_ONNX = {np.dtype(np.int32): TensorProto.INT32, np.dtype(np.int64): TensorProto.INT64,
              np.dtype(bool): TensorProto.BOOL}
for _t, _d, _, _ in DTYPES.values():
    NP_TO_ONNX[_d] = _t


@pytest.fixture(scope="module", autouse=True)
def _registered():
    onnx_schemas.register()


# ---- model building and running ----------------------------------------------------------------


def _vi(name, arr_or_type, dims):
    elem = arr_or_type if isinstance(arr_or_type, int) else NP_TO_ONNX[np.asarray(arr_or_type).dtype]
    return helper.make_tensor_value_info(name, elem, dims)


def _node(attrs, present, outputs=("y", "expert_idx", "out"), prefix=""):
    names = [prefix + n if p else "" for n, p in zip(INPUT_NAMES, present)]
    while names and not names[-1]:
        names.pop()  # trailing absent inputs are dropped, as the exporter does
    return helper.make_node(OP, names, [prefix + o for o in outputs], domain=DOMAIN, **attrs)


def make_model(attrs, feeds, lead_dims, E, opset=18, ir_version=10):
    """One MoeGatingTopKHash node whose present inputs are the keys of ``feeds`` (numpy arrays),
    with symbolic dims (tests/op_table.node_model)."""
    dims = {"x": lead_dims + [E], "bias": [E], "input_ids": lead_dims, "tid2eid": ["n", attrs["k"]],
            "additional_bias": [E], "additional_token_mask": lead_dims}
    k = attrs["k"]
    out_dims = {"y": lead_dims + [k], "expert_idx": lead_dims + [k],
                "out": lead_dims + [E] if attrs.get("out_flag") else [0]}
    return node_model(OP, feeds, attrs, dims=dims, typed_outputs=True, output_dims=out_dims, opset=opset,
                      ir_version=ir_version)


def session(model) -> ort.InferenceSession:
    """A plain CPU session: no custom-op library, so ORT must inline the model-local function."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


# ---- comparisons -------------------------------------------------------------------------------


def ulp(v: np.ndarray, dtype_name: str) -> np.ndarray:
    """Spacing of ``dtype_name`` numbers at |v| (subnormal spacing below the normal range)."""
    _, _, mant, min_exp = DTYPES[dtype_name]
    v = np.abs(np.asarray(v, np.float64))
    with np.errstate(divide="ignore"):
        exp = np.floor(np.log2(np.where(v > 0, v, 1.0)))
    return np.exp2(np.maximum(exp, min_exp) - mant)


def assert_close_ulp(got, want, dtype_name, ulps, context, what):
    """Equal NaN positions, and finite values within ``ulps`` spacings of ``dtype_name``."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"{context}: {what} shape {g.shape} != {w.shape}"
    assert np.array_equal(np.isnan(g), np.isnan(w)), f"{context}: {what} NaN positions differ"
    ok = ~np.isnan(w)
    same_inf = np.isinf(w) & (g == w)
    err = np.where(same_inf | ~ok, 0.0, np.abs(g - w) / ulp(w, dtype_name))
    worst = float(err.max(initial=0.0))
    assert worst <= ulps, f"{context}: {what} off by {worst:.2f} {dtype_name} ulp (allowed {ulps})"


def float64_expected(x, idx, attrs):
    """docs/operators.md §1.2 steps 1 and 6 in float64 for the given indices: the yardstick for s and y."""
    E, k = x.shape[-1], idx.shape[-1]
    x64 = x.reshape(-1, E).astype(np.float32).astype(np.float64)
    nt = attrs.get("norm_type", 0)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if nt == 0:
            # x - max is rounded to float32 as in every float32 implementation; exp amplifies that
            # rounding (|x - max| * 2^-24 relative), so the yardstick takes it over too.
            x32 = x64.astype(np.float32)
            e = np.exp((x32 - x32.max(axis=-1, keepdims=True)).astype(np.float64))
            s = e / e.sum(axis=-1, keepdims=True)
        elif nt == 1:
            s = 1 / (1 + np.exp(-x64))
        else:
            s = np.sqrt(np.maximum(x64, 0) + np.log1p(np.exp(-np.abs(x64))))
        w = np.take_along_axis(s, idx.reshape(-1, k).astype(np.int64), axis=-1)
        if nt != 0 or attrs.get("renorm", 0):
            w = w / (w.sum(axis=-1, keepdims=True) + float(np.float32(attrs.get("eps", 1e-20))))
        w = w * float(np.float32(attrs.get("routed_scaling_factor", 1.0)))
    return s.reshape(x.shape), w.reshape(idx.shape)


def check_against_reference(sess, feeds, attrs, context):
    """Indices exactly as the NumPy reference; s and y within a few ulp of a float64 evaluation."""
    x = feeds["x"]
    res = ort_values.run_named(sess, feeds)
    _, want_idx, want_out = reference(*(feeds.get(n) for n in INPUT_NAMES), **attrs)
    dtype_name = next(n for n, v in DTYPES.items() if v[1] == x.dtype)
    assert res["expert_idx"].shape == want_idx.shape
    try:
        assert_routing_equal(res["expert_idx"], want_idx, selection_scores(feeds, attrs))
    except AssertionError as e:
        pytest.fail(f"{context}: {e}")
    s64, w64 = float64_expected(x, want_idx, attrs)
    # Against float64, not the float32 reference: NumPy's own float32 exp is up to ~2.4 ulp off.
    # float32 weights: a few ulp; narrower types: the float64 value rounded, give or take one step.
    assert_close_ulp(res["y"], w64, dtype_name, 4 if dtype_name == "float" else 1, context, "y")
    assert res["out"].shape == want_out.shape, f"{context}: out shape"
    if attrs.get("out_flag"):
        assert_close_ulp(res["out"], s64, "float", 4, context, "out")
    return res


# ---- the sweep ---------------------------------------------------------------------------------

E, K, GROUPS, KEEP, N_IDS = 32, 4, 4, 2, 50
NORMS = {"softmax": dict(norm_type=0), "softmax-renorm": dict(norm_type=0, renorm=1),
         "sigmoid": dict(norm_type=1, routed_scaling_factor=2.5),
         "sqrt-softplus": dict(norm_type=2, routed_scaling_factor=1.5)}
ROUTING = {"topk": {}, "group-max": dict(group_count=GROUPS, k_group=KEEP, group_select_mode=0),
           "group-top2": dict(group_count=GROUPS, k_group=KEEP, group_select_mode=1),
           "hash-i32-t64": "hash", "hash-i64-t32": "hash"}
BIASES = ("none", "bias", "additional", "bias+additional")
TOKENS = (0, 1, 7, 33)
LEAD_SHAPES = {2: {0: (0,), 1: (1,), 7: (7,), 33: (33,)}, 3: {0: (2, 0), 1: (1, 1), 7: (1, 7), 33: (3, 11)}}


def make_feeds(rng, lead, dtype, routing, biases, norm):
    x = (rng.standard_normal(lead + (E,)) * 2).astype(np.float32)
    feeds = {"x": x.astype(dtype)}
    bias_scale = 0.05 if norm.startswith("softmax") else 0.2
    if biases in ("bias", "bias+additional"):
        feeds["bias"] = (rng.standard_normal(E) * bias_scale).astype(dtype)
    if routing.startswith("hash"):
        ids_t, table_t = (np.int32, np.int64) if routing == "hash-i32-t64" else (np.int64, np.int32)
        feeds["input_ids"] = rng.integers(0, N_IDS, lead).astype(ids_t)
        feeds["tid2eid"] = rng.integers(0, E, (N_IDS, K)).astype(table_t)
    if biases in ("additional", "bias+additional"):
        feeds["additional_bias"] = (rng.standard_normal(E) * bias_scale).astype(dtype)
        mask = rng.random(lead) < 0.4
        feeds["additional_token_mask"] = mask
        if "input_ids" in feeds:
            # masked (image) rows carry no meaningful id: the body must not look them up
            feeds["input_ids"][mask] = -1
    return feeds


@pytest.mark.parametrize("rank", [2, 3])
@pytest.mark.parametrize("dtype", list(DTYPES))
@pytest.mark.parametrize("biases", BIASES)
@pytest.mark.parametrize("routing", list(ROUTING))
@pytest.mark.parametrize("norm", list(NORMS))
def test_sweep_matches_reference(norm, routing, biases, dtype, rank):
    attrs = dict(k=K, **NORMS[norm], out_flag=int(rank == 3))
    if ROUTING[routing] != "hash":
        attrs.update(ROUTING[routing])
    # a fixed seed per case (str hash() varies between runs)
    seed = sum(ord(c) * 31**i for i, c in enumerate(f"{norm}|{routing}|{biases}|{dtype}|{rank}")) % 2**32
    rng = np.random.default_rng(seed)
    lead_dims = ["R"] if rank == 2 else ["B", "S"]
    feeds0 = make_feeds(rng, LEAD_SHAPES[rank][1], DTYPES[dtype][1], routing, biases, norm)
    opset = 18 if rank == 2 else 21  # the model's default-domain opset decides the body's
    sess = session(attach_functions(make_model(attrs, feeds0, lead_dims, E, opset=opset)))
    for tokens in TOKENS:
        feeds = make_feeds(rng, LEAD_SHAPES[rank][tokens], DTYPES[dtype][1], routing, biases, norm)
        check_against_reference(sess, feeds, attrs, f"{norm}/{routing}/{biases}/{dtype}/rank{rank}/R={tokens}")


# ---- hash-routing guards -----------------------------------------------------------------------


@pytest.mark.parametrize("bad", ["id-too-large", "id-negative", "entry-too-large", "entry-negative"])
def test_out_of_range_hash_values_fail(bad):
    """The body cannot raise a pretty error, but ORT's Gather / GatherElements bounds checks must fire."""
    attrs = dict(k=2, norm_type=1)
    feeds = {"x": np.zeros((3, 8), np.float32), "input_ids": np.array([0, 1, 2], np.int64),
             "tid2eid": np.array([[0, 1], [2, 3], [4, 5]], np.int32)}
    if bad == "id-too-large":
        feeds["input_ids"][1] = 3
    elif bad == "id-negative":
        feeds["input_ids"][1] = -1  # Gather would count from the end: the body must turn it into an error
    elif bad == "entry-too-large":
        feeds["tid2eid"][2, 1] = 8
    else:
        feeds["tid2eid"][2, 1] = -1
    sess = session(attach_functions(make_model(attrs, feeds, ["R"], 8)))
    with pytest.raises(Exception, match="(?i)out of|bounds|range"):
        sess.run(None, feeds)
    with pytest.raises(ValueError):
        reference(feeds["x"], None, feeds["input_ids"], feeds["tid2eid"], **attrs)


def test_wrong_table_width_fails():
    attrs = dict(k=2, norm_type=1)
    feeds = {"x": np.zeros((3, 8), np.float32), "input_ids": np.array([0, 1, 2], np.int64),
             "tid2eid": np.zeros((3, 3), np.int64)}
    model = make_model(attrs, feeds, ["R"], 8)
    model.graph.input[2].type.tensor_type.shape.dim[1].dim_param = "w"
    sess = session(attach_functions(model))
    # The body has no message of its own: the table's rows cannot be reshaped to [n, k].
    with pytest.raises(Exception, match=r"cannot be reshaped to the requested shape.*\{3,3\}.*\{3,2\}"):
        sess.run(None, feeds)


# ---- attaching: specialisations, overloads, checker ---------------------------------------------


def two_node_model(attrs_a, attrs_b, opset=21):
    """x feeds two MoeGatingTopKHash nodes: a (x, bias) and b (x only)."""
    nodes = [_node(attrs_a, [True, True], prefix="a_"), _node(attrs_b, [True], prefix="b_")]
    for n in nodes:
        n.input[0] = "x"
        if len(n.input) > 1:
            n.input[1] = "bias"
    outs = []
    for p, attrs in (("a_", attrs_a), ("b_", attrs_b)):
        outs += [_vi(p + "y", TensorProto.FLOAT16, ["R", attrs["k"]]),
                 _vi(p + "expert_idx", TensorProto.INT32, ["R", attrs["k"]]),
                 _vi(p + "out", TensorProto.FLOAT, ["R", 16] if attrs.get("out_flag") else [0])]
    graph = helper.make_graph(nodes, "g", [_vi("x", TensorProto.FLOAT16, ["R", 16]),
                                           _vi("bias", TensorProto.FLOAT16, [16])], outs)
    return helper.make_model(graph, ir_version=9, opset_imports=[
        helper.make_opsetid("", opset), helper.make_opsetid(DOMAIN, 1)])


def test_two_specialisations_become_overloads():
    attrs_a = dict(k=4, norm_type=1, group_count=4, k_group=2, group_select_mode=1, routed_scaling_factor=2.5)
    attrs_b = dict(k=3, norm_type=0, out_flag=1)
    with pytest.warns(UserWarning, match="overload"):
        model = attach_functions(two_node_model(attrs_a, attrs_b))
    onnx.checker.check_model(model, full_check=True)
    assert model.ir_version >= 10
    keys = sorted(f.overload for f in model.functions)
    assert len(keys) == 2 and all(keys)
    assert sorted(n.overload for n in model.graph.node) == keys
    if version_tuple(ort.__version__) < version_tuple(functions.OVERLOADS_MIN_ORT):
        return  # older runtimes inline the wrong overload (the warning above says so)
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((9, 16)).astype(np.float16),
             "bias": (rng.standard_normal(16) * 0.2).astype(np.float16)}
    got = session(model).run(None, feeds)
    want = reference(feeds["x"], feeds["bias"], **attrs_a) + reference(feeds["x"], **attrs_b)
    assert [g.shape for g in got] == [w.shape for w in want]
    for i, (g, w) in enumerate(zip(got, want)):
        if g.dtype == np.int32:
            np.testing.assert_array_equal(g, w, err_msg=f"output {i}")
        else:
            assert_close_ulp(g, w, "float16" if g.dtype == np.float16 else "float", 4, "overloads", f"output {i}")


def test_same_specialisation_gets_one_plain_function():
    # the same resolved attributes, one node spelling a default out
    attrs = dict(k=2, norm_type=1)
    model = two_node_model(dict(attrs, k_group=1), attrs)
    model.graph.node[1].input.append("bias")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        attached = attach_functions(model)
    assert len(attached.functions) == 1
    assert attached.functions[0].overload == ""
    assert all(n.overload == "" for n in attached.graph.node)
    assert attached.ir_version == 9  # no overloads: the model's IR version is kept
    onnx.checker.check_model(attached, full_check=True)
    feeds = {"x": np.random.default_rng(4).standard_normal((5, 16)).astype(np.float16),
             "bias": np.zeros(16, np.float16)}
    got = session(attached).run(None, feeds)
    np.testing.assert_array_equal(got[1], got[4])


def test_reattach_replaces_and_strip_removes():
    attrs_a = dict(k=4, norm_type=1)
    attrs_b = dict(k=3, norm_type=0)
    with pytest.warns(UserWarning):
        once = attach_functions(two_node_model(attrs_a, attrs_b))
    with pytest.warns(UserWarning):
        twice = attach_functions(once)
    assert len(twice.functions) == 2
    assert [f.SerializeToString() for f in twice.functions] == [f.SerializeToString() for f in once.functions]
    # after making both nodes alike, re-attaching collapses to one plain function
    same = onnx.ModelProto()
    same.CopyFrom(twice)
    node_b = same.graph.node[1]
    del node_b.attribute[:]
    node_b.attribute.extend(helper.make_node("X", [], [], **attrs_a).attribute)
    node_b.input.append("bias")
    for out in same.graph.output[3:5]:
        out.type.tensor_type.shape.dim[1].dim_value = 4
    collapsed = attach_functions(same)
    assert len(collapsed.functions) == 1 and not collapsed.functions[0].overload
    assert all(n.overload == "" for n in collapsed.graph.node)
    stripped = strip_functions(twice)
    assert len(stripped.functions) == 0 and all(n.overload == "" for n in stripped.graph.node)
    assert len(twice.functions) == 2  # inputs are not modified


def test_nodes_in_subgraphs_get_bodies():
    attrs = dict(k=2, norm_type=1, out_flag=1)
    inner_out = [_vi("y", TensorProto.FLOAT, ["R", 2]), _vi("expert_idx", TensorProto.INT32, ["R", 2]),
                 _vi("out", TensorProto.FLOAT, ["R", 8])]
    branch = helper.make_graph([_node(attrs, [True])], "then", [], inner_out)
    other = helper.make_graph([_node(dict(attrs, norm_type=0), [True])], "else", [], inner_out)
    cond = helper.make_node("If", ["c"], ["y", "expert_idx", "out"], then_branch=branch, else_branch=other)
    graph = helper.make_graph([cond], "g", [_vi("c", TensorProto.BOOL, []), _vi("x", TensorProto.FLOAT, ["R", 8])],
                              inner_out)
    model = helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 18), helper.make_opsetid(DOMAIN, 1)])
    with pytest.warns(UserWarning):
        model = attach_functions(model)
    assert len(model.functions) == 2
    onnx.checker.check_model(model, full_check=True)
    if version_tuple(ort.__version__) < version_tuple(functions.OVERLOADS_MIN_ORT):
        return  # two specialisations are overloads: older runtimes inline the wrong one
    x = np.random.default_rng(5).standard_normal((4, 8)).astype(np.float32)
    sess = session(model)
    for c, nt in ((True, 1), (False, 0)):
        got = sess.run(None, {"c": np.array(c), "x": x})
        want = reference(x, **dict(attrs, norm_type=nt))
        np.testing.assert_array_equal(got[1], want[1])
        assert_close_ulp(got[0], want[0], "float", 4, f"If branch {c}", "y")


@pytest.mark.parametrize("opset", range(18, onnx.defs.onnx_opset_version() + 1))
def test_checker_and_ort_accept_every_opset(opset):
    attrs = dict(k=4, norm_type=1, group_count=4, k_group=2, group_select_mode=1, out_flag=1,
                 routed_scaling_factor=2.5)
    rng = np.random.default_rng(opset)
    feeds = {"x": rng.standard_normal((3, 16)).astype(np.float16),
             "bias": (rng.standard_normal(16) * 0.2).astype(np.float16),
             "additional_bias": (rng.standard_normal(16) * 0.2).astype(np.float16),
             "additional_token_mask": np.array([True, False, True])}
    model = attach_functions(make_model(attrs, feeds, ["R"], 16, opset=opset))
    onnx.checker.check_model(model, full_check=True)
    try:
        sess = session(model)
    except ort.capi.onnxruntime_pybind11_state.Fail as e:
        if f"Opset {opset} is under development" in str(e):
            pytest.skip(f"onnxruntime {ort.__version__} does not run opset {opset} yet")
        raise
    check_against_reference(sess, feeds, attrs, f"opset {opset}")
    hashed = {"x": rng.standard_normal((3, 16)).astype(np.float32),
              "input_ids": np.array([1, -1, 2], np.int64),
              "tid2eid": rng.integers(0, 16, (3, 4)).astype(np.int32),
              "additional_bias": (rng.standard_normal(16) * 0.2).astype(np.float32),
              "additional_token_mask": np.array([False, True, False])}
    model = attach_functions(make_model(dict(k=4, norm_type=2), hashed, ["R"], 16, opset=opset))
    onnx.checker.check_model(model, full_check=True)
    check_against_reference(session(model), hashed, dict(k=4, norm_type=2), f"opset {opset} hash")


def test_attach_rejects_old_opset_and_bad_nodes():
    feeds = {"x": np.zeros((2, 8), np.float32)}
    with pytest.raises(ValueError, match="opset >= 18"):
        attach_functions(make_model(dict(k=2), feeds, ["R"], 8, opset=17, ir_version=8))
    mask_only = {"x": np.zeros((2, 8), np.float32), "additional_token_mask": np.zeros(2, bool)}
    with pytest.raises(ValueError, match="additional_bias"):
        attach_functions(make_model(dict(k=2), mask_only, ["R"], 8))
    hash_grouped = {"x": np.zeros((2, 8), np.float32), "input_ids": np.zeros(2, np.int64),
                    "tid2eid": np.zeros((3, 2), np.int32)}
    with pytest.raises(ValueError, match="group"):
        attach_functions(make_model(dict(k=2, group_count=4, k_group=2), hash_grouped, ["R"], 8))
    with pytest.raises(ValueError, match="norm_type"):
        attach_functions(make_model(dict(k=2, norm_type=3), feeds, ["R"], 8))


def test_specialisation_key():
    node = _node(dict(k=8, k_group=4, group_count=8, group_select_mode=1, norm_type=1,
                      routed_scaling_factor=2.5), [True, True])
    assert specialisation_key(node) == "e1em20_gc8_gsm1_k8_kg4_nt1_of0_r0_rsf2p5_i110000"
    spelled = _node(dict(k=8, k_group=4, group_count=8, group_select_mode=1, norm_type=1, renorm=0,
                         routed_scaling_factor=2.5, eps=1e-20), [True, True])
    assert specialisation_key(spelled) == specialisation_key(node)
    assert specialisation_key(_node(dict(k=8), [True, False, False, False, True, True])).endswith("_i100011")
    assert OP in functions.BUILDERS


def test_deepseek_v3_body_size():
    func = build_function(dict(k=8, k_group=4, group_count=8, group_select_mode=1, norm_type=1,
                               routed_scaling_factor=2.5), [True, True])
    counts = Counter(n.op_type for n in func.node)
    assert counts["TopK"] == 3  # top-2 per group, k_group groups, k experts
    # 69 nodes of routing, 31 of shape checks (x's rank, the bias's dims, k against E:
    # BodyBuilder.require), which only read shapes
    assert len(func.node) < 102, counts


# ---- independent cross-check of the body ---------------------------------------------------------


@pytest.mark.parametrize("case", ["deepseek-v3", "hash+mask", "sqrt-softplus"])
def test_reference_evaluator_runs_the_function(case):
    """onnx.reference inlines model-local functions: checks the body independently of ORT."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 32)).astype(np.float32)
    if case == "deepseek-v3":
        attrs = dict(k=4, group_count=4, k_group=2, group_select_mode=1, norm_type=1,
                     routed_scaling_factor=2.5, out_flag=1)
        feeds = {"x": x, "bias": (rng.standard_normal(32) * 0.2).astype(np.float32)}
    elif case == "hash+mask":
        attrs = dict(k=4, norm_type=0, renorm=1)
        mask = rng.random((2, 5)) < 0.5
        ids = rng.integers(0, 20, (2, 5)).astype(np.int64)
        ids[mask] = -1
        feeds = {"x": x, "input_ids": ids, "tid2eid": rng.integers(0, 32, (20, 4)).astype(np.int32),
                 "additional_bias": (rng.standard_normal(32) * 0.05).astype(np.float32),
                 "additional_token_mask": mask}
    else:
        attrs = dict(k=4, norm_type=2, routed_scaling_factor=1.5, out_flag=1)
        feeds = {"x": x * 10}
    model = attach_functions(make_model(attrs, feeds, ["B", "S"], 32))
    # onnx.reference wants as many node inputs as the function has (ORT accepts fewer): spell the
    # dropped trailing inputs out as "" (absent).
    node = model.graph.node[0]
    node.input.extend([""] * (len(INPUT_NAMES) - len(node.input)))
    with np.errstate(divide="ignore", invalid="ignore"):  # both Where branches are evaluated
        got = ReferenceEvaluator(model).run(None, feeds)
    want = reference(*(feeds.get(n) for n in INPUT_NAMES), **attrs)
    np.testing.assert_array_equal(got[1], want[1])
    assert_close_ulp(got[0], want[0], "float", 4, case, "y")
    assert_close_ulp(got[2], want[2], "float", 4, case, "out")
