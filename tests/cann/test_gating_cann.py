"""MoeGatingTopKHash on the real onnxruntime-cann EP against the fake CANN runtime: placed on CANN,
bit-identical to the CPU EP for every configuration, dtype, bias mode and hash-id type of the CPU
tests; aclnnMoeGatingTopK / aclnnMoeGatingTopKHash run exactly where the Ascend limits allow (host
fallback elsewhere); token ids and table entries are checked on the host with the CPU's
messages (a constant tid2eid once)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper

from ascend_moe_onnx.ort_custom_ops.cann import gating_path
from tests.cann.helpers import assert_bits_equal, calls, error_text, model, placement, run, session, skip_without_cann
from tests.gating_cases import BIAS_MODES, CONFIGS, NP_DTYPES, make_inputs

skip_without_cann()

INPUTS = ("x", "bias", "input_ids", "tid2eid", "additional_bias", "additional_token_mask")
DEFAULTS = dict(k_group=1, group_count=1, group_select_mode=0, renorm=0, norm_type=0, out_flag=0,
                routed_scaling_factor=1.0, eps=1e-20)
CALLS = ("aclnnMoeGatingTopK", "aclnnMoeGatingTopKHash")


def gating_model(feeds: dict, attrs: dict, constant_table: bool = False) -> bytes:
    names = [n if n in feeds else "" for n in INPUTS]
    while names and not names[-1]:
        names.pop()
    graph_inputs = {n: (feeds[n].dtype, list(feeds[n].shape)) for n in names if n}
    inits = []
    if constant_table:
        inits = [numpy_helper.from_array(feeds["tid2eid"], "tid2eid")]
        del graph_inputs["tid2eid"]
    node = helper.make_node("MoeGatingTopKHash", names, ["y", "expert_idx", "out"], domain="ascend.moe", **attrs)
    return model([node], graph_inputs, ["y", "expert_idx", "out"], inits)


def compare(feeds: dict, attrs: dict, constant_table: bool = False):
    """Run on CANN and CPU (bit-identical); returns (CANN outputs, the ACLNN call made or None)."""
    data = gating_model(feeds, attrs, constant_table)
    run_feeds = {n: a for n, a in feeds.items() if not (constant_table and n == "tid2eid")}
    before = {c: calls(c) for c in CALLS}
    got = run(session(data, "cann"), run_feeds)
    made = [c for c in CALLS if calls(c) > before[c]]
    assert len(made) <= 1
    assert_bits_equal(got, run(session(data, "cpu"), run_feeds))
    return got, (made[0] if made else None)


def expected_call(feeds, attrs):
    call, _ = gating_path({**DEFAULTS, **attrs}, experts=feeds["x"].shape[-1], hash_routing="tid2eid" in feeds,
                          table_type=str(feeds["tid2eid"].dtype) if "tid2eid" in feeds else None,
                          additional="additional_token_mask" in feeds)
    return call


CASES = [(c, b, h, d) for c in CONFIGS for b in BIAS_MODES for h in (None, "int64/int32", "int32/int64")
         for d in NP_DTYPES if not (h and "groups" in c)]


@pytest.mark.parametrize("config,bias_mode,hash_ids,dtype", CASES,
                         ids=[f"{c}-{b}-{h}-{d}" for c, b, h, d in CASES])
def test_bit_identical_to_cpu(config, bias_mode, hash_ids, dtype):
    rng = np.random.default_rng(abs(hash((config, bias_mode, hash_ids, dtype))) % 2**32)
    attrs = CONFIGS[config]
    feeds = make_inputs(rng, attrs, bias_mode, hash_ids, dtype, lead=(3, 5))
    _, call = compare(feeds, attrs)
    assert call == expected_call(feeds, attrs)
    if bias_mode != "additional" and attrs.get("renorm", 0) == 0 and hash_ids != "int32/int64":
        assert call is not None  # these combinations are native on Ascend


def test_placed_on_cann(tmp_path):
    feeds = make_inputs(np.random.default_rng(0), CONFIGS["sigmoid_groups_top2"], "bias", None, "bfloat16", (4,))
    data = gating_model(feeds, CONFIGS["sigmoid_groups_top2"])
    assert placement(data, feeds, tmp_path) == {"MoeGatingTopKHash": {"CANNExecutionProvider"}}


# (E, group_count, k_group, k, native expected)
LIMITS = [(2048, 1, 1, 8, True), (2048, 8, 4, 8, True), (4, 2, 2, 2, False), (6, 2, 2, 2, True),
          (1980, 20, 4, 8, False), (2040, 8, 4, 8, True), (3, 1, 1, 2, True), (2, 1, 1, 2, False)]


@pytest.mark.parametrize("experts,group_count,k_group,k,native", LIMITS)
def test_ascend_limits_choose_native_or_fallback(experts, group_count, k_group, k, native):
    attrs = dict(k=k, k_group=k_group, group_count=group_count, norm_type=1)
    feeds = {"x": np.random.default_rng(experts).standard_normal((5, experts)).astype(np.float32)}
    _, call = compare(feeds, attrs)
    assert (call == "aclnnMoeGatingTopK") == native
    assert expected_call(feeds, attrs) == call


def test_zero_tokens():
    attrs = dict(k=2, norm_type=1, out_flag=1)
    (y, idx, out), _ = compare({"x": np.zeros((0, 8), np.float16)}, attrs)
    assert y.shape == (0, 2) and idx.shape == (0, 2) and out.shape == (0, 8)


def hash_feeds(ids, table_dtype=np.int32, experts=8):
    rng = np.random.default_rng(1)
    table = rng.integers(0, experts, (10, 2)).astype(table_dtype)
    return {"x": rng.standard_normal((len(ids), experts)).astype(np.float32),
            "input_ids": np.array(ids, np.int64), "tid2eid": table}


@pytest.mark.parametrize("constant_table", [False, True])
def test_constant_and_input_table_native(constant_table):
    _, call = compare(hash_feeds([0, 3, 9, 2]), dict(k=2, norm_type=2), constant_table)
    assert call == "aclnnMoeGatingTopKHash"


@pytest.mark.parametrize("constant_table", [False, True])
@pytest.mark.parametrize("table_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("fault", ["id", "entry", "both"])
def test_bad_ids_and_entries_same_message_as_cpu(fault, table_dtype, constant_table):
    feeds = hash_feeds([0, 3, 9, 2], table_dtype)
    if fault in ("id", "both"):
        feeds["input_ids"][2] = 10
    if fault in ("entry", "both"):
        feeds["tid2eid"][3, 1] = 8
    data = gating_model(feeds, dict(k=2, norm_type=1), constant_table)
    run_feeds = {n: a for n, a in feeds.items() if not (constant_table and n == "tid2eid")}
    got = error_text(session(data, "cann"), run_feeds)
    assert got == error_text(session(data, "cpu"), run_feeds)
    assert ("input_ids" if fault != "entry" else "tid2eid") in got


@pytest.mark.parametrize("constant_table", [False, True])
def test_empty_table_fails_like_cpu(constant_table):
    """A table [0, k] is still hash routing (every id out of range), never plain top-k."""
    feeds = hash_feeds([0, 1, 2])
    feeds["tid2eid"] = np.zeros((0, 2), np.int32)
    data = gating_model(feeds, dict(k=2, norm_type=1), constant_table)
    run_feeds = {n: a for n, a in feeds.items() if not (constant_table and n == "tid2eid")}
    got = error_text(session(data, "cann"), run_feeds)
    assert got == error_text(session(data, "cpu"), run_feeds)
    assert got.endswith("input 'input_ids' value at row 0 is out of range [0, 0), got 0")


def test_out_of_range_entry_in_an_unused_row_is_fine():
    feeds = hash_feeds([0, 1])
    feeds["tid2eid"][7, 0] = -1
    _, call = compare(feeds, dict(k=2, norm_type=1), constant_table=True)
    assert call == "aclnnMoeGatingTopKHash"


def test_rank_3_input():
    feeds = make_inputs(np.random.default_rng(2), CONFIGS["softmax"], "bias", None, "float16", lead=(2, 3, 4))
    (y, idx, _), call = compare(feeds, CONFIGS["softmax"])
    assert call == "aclnnMoeGatingTopK" and y.shape == (2, 3, 4, 4)


def test_fallback_logged_once_with_reason(capfd):
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    attrs = CONFIGS["softmax_renorm"]
    feeds = make_inputs(np.random.default_rng(4), attrs, "none", None, "float", (6,))
    so = ort_custom_ops.session_options()
    so.log_severity_level = 2
    s = ort.InferenceSession(gating_model(feeds, attrs), so,
                             providers=[ort_custom_ops.cann_provider(), "CPUExecutionProvider"])
    capfd.readouterr()
    for _ in range(3):
        run(s, feeds)
    err = capfd.readouterr().err
    assert err.count("MoeGatingTopKHash runs on the CANN host fallback (CPU kernel): renorm=1") == 1, err
