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
from tests.cann import helpers as cann
from tests.ops.moe_gating_top_k_hash.gating_cases import BIAS_MODES, CONFIGS, NP_DTYPES, make_inputs

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnMoeGatingTopK", "aclnnMoeGatingTopKHash")  # each operator's chips (FAKE_ACL_SOC_NAME)

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
    return cann.model([node], graph_inputs, ["y", "expert_idx", "out"], inits)


def compare(feeds: dict, attrs: dict, constant_table: bool = False):
    """Run on CANN and CPU (bit-identical); returns (CANN outputs, the ACLNN call made or None)."""
    data = gating_model(feeds, attrs, constant_table)
    run_feeds = {n: a for n, a in feeds.items() if not (constant_table and n == "tid2eid")}
    before = {c: cann.calls(c) for c in CALLS}
    got = cann.run(cann.session(data, "cann"), run_feeds)
    made = [c for c in CALLS if cann.calls(c) > before[c]]
    assert len(made) <= 1
    cann.assert_bits_equal(got, cann.run(cann.session(data, "cpu"), run_feeds))
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
    if bias_mode != "additional" and attrs.get("renorm", 0) == 0:
        assert (call is not None) == NATIVE_SOC  # these combinations are native on Ascend 910B/93/950


def test_placed_on_cann(tmp_path):
    feeds = make_inputs(np.random.default_rng(0), CONFIGS["sigmoid_groups_top2"], "bias", None, "bfloat16", (4,))
    data = gating_model(feeds, CONFIGS["sigmoid_groups_top2"])
    assert cann.placement(data, feeds, tmp_path) == {"MoeGatingTopKHash": {"CANNExecutionProvider"}}


# (E, group_count, k_group, group_select_mode, k, native expected), by the operators' tiling
# (CheckAttr): E <= 2048; E / group_count >= 1, >= 2 with group_select_mode 1;
# align32(E / group_count) * group_count <= 2048 only where groups are selected.
LIMITS = [(2048, 1, 1, 0, 8, True), (2048, 8, 4, 0, 8, True),
          (4, 2, 2, 0, 2, True), (4, 2, 1, 0, 2, True), (4, 4, 2, 0, 2, True), (4, 4, 4, 1, 2, False),
          (8, 4, 2, 1, 2, True), (1980, 20, 4, 0, 8, False), (1980, 20, 20, 0, 8, True),
          (2040, 8, 4, 0, 8, True), (3, 1, 1, 0, 2, True), (2, 1, 1, 0, 2, True)]


@pytest.mark.parametrize("experts,group_count,k_group,mode,k,native", LIMITS)
def test_ascend_limits_choose_native_or_fallback(experts, group_count, k_group, mode, k, native):
    attrs = dict(k=k, k_group=k_group, group_count=group_count, group_select_mode=mode, norm_type=1)
    feeds = {"x": np.random.default_rng(experts).standard_normal((5, experts)).astype(np.float32)}
    before = cann.calls("aclnnMoeGatingTopKGetWorkspaceSize")
    _, call = compare(feeds, attrs)
    assert (call == "aclnnMoeGatingTopK") == (native and NATIVE_SOC)
    assert expected_call(feeds, attrs) == call
    # a fallback chosen by the rules never asks the operator (the fake's tiling agrees)
    assert (cann.calls("aclnnMoeGatingTopKGetWorkspaceSize") > before) == (native and NATIVE_SOC)


@pytest.mark.parametrize("k_group,group_count", [(1, 2), (2, 2), (4, 8)])
def test_sqrt_softplus_with_groups_falls_back_without_asking(k_group, group_count):
    """The hash operator's tiling rejects norm_type 2 unless group_count == 1: never sent to it."""
    attrs = dict(k=2, k_group=k_group, group_count=group_count, norm_type=2)
    feeds = {"x": np.random.default_rng(7).standard_normal((5, 16)).astype(np.float32)}
    before = cann.calls("aclnnMoeGatingTopKHashGetWorkspaceSize")
    _, call = compare(feeds, attrs)
    assert call is None and cann.calls("aclnnMoeGatingTopKHashGetWorkspaceSize") == before
    _, why = gating_path({**DEFAULTS, **attrs}, experts=16, soc="Ascend910B1")
    assert why == f"aclnnMoeGatingTopKHash supports norm_type=2 (sqrt-softplus) only with group_count=1, got " \
                  f"group_count={group_count}"
    assert gating_path({**DEFAULTS, **attrs, "group_count": 1, "k_group": 1}, experts=16,
                       soc="Ascend910B1") == ("aclnnMoeGatingTopKHash", "")


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
@pytest.mark.parametrize("table_dtype", [np.int32, np.int64])
def test_constant_and_input_table_native(constant_table, table_dtype):
    _, call = compare(hash_feeds([0, 3, 9, 2], table_dtype), dict(k=2, norm_type=2), constant_table)
    assert call == ("aclnnMoeGatingTopKHash" if NATIVE_SOC else None)


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
    got = cann.error_text(cann.session(data, "cann"), run_feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), run_feeds)
    assert ("input_ids" if fault != "entry" else "tid2eid") in got


@pytest.mark.parametrize("constant_table", [False, True])
def test_empty_table_fails_like_cpu(constant_table):
    """A table [0, k] is still hash routing (every id out of range), never plain top-k."""
    feeds = hash_feeds([0, 1, 2])
    feeds["tid2eid"] = np.zeros((0, 2), np.int32)
    data = gating_model(feeds, dict(k=2, norm_type=1), constant_table)
    run_feeds = {n: a for n, a in feeds.items() if not (constant_table and n == "tid2eid")}
    got = cann.error_text(cann.session(data, "cann"), run_feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), run_feeds)
    assert got.endswith("input 'input_ids' value at row 0 is out of range [0, 0), got 0")


def test_out_of_range_entry_in_an_unused_row_is_fine():
    feeds = hash_feeds([0, 1])
    feeds["tid2eid"][7, 0] = -1
    _, call = compare(feeds, dict(k=2, norm_type=1), constant_table=True)
    assert call == ("aclnnMoeGatingTopKHash" if NATIVE_SOC else None)


def test_rank_3_input():
    feeds = make_inputs(np.random.default_rng(2), CONFIGS["softmax"], "bias", None, "float16", lead=(2, 3, 4))
    (y, idx, _), call = compare(feeds, CONFIGS["softmax"])
    assert call == ("aclnnMoeGatingTopK" if NATIVE_SOC else None) and y.shape == (2, 3, 4, 4)


def test_fallback_logged_once_with_reason(capfd):
    attrs = CONFIGS["softmax_renorm"]
    feeds = make_inputs(np.random.default_rng(4), attrs, "none", None, "float", (6,))
    err = cann.fallback_log(capfd, gating_model(feeds, attrs), feeds)
    _, why = gating_path({**DEFAULTS, **attrs}, experts=feeds["x"].shape[-1])
    assert why.startswith("renorm=1" if NATIVE_SOC else "the SoC Ascend310P3 has no kernels of aclnnMoeGatingTopK")
    assert err.count(f"MoeGatingTopKHash runs on the CANN host fallback (CPU kernel): {why}") == 1, err


SOC_TABLE = [("Ascend910B1", True), ("Ascend910B4", True), ("Ascend910B2C", True), ("Ascend910_9391", True),
             ("Ascend910_9599", True), ("Ascend950PR_9579", True), ("Ascend910B", False), ("Ascend910A", False),
             ("Ascend910ProB", False), ("Ascend310P3", False), ("Ascend310B1", False)]


@pytest.mark.parametrize("soc,native", SOC_TABLE)
def test_soc_decides(soc, native):
    attrs = {**DEFAULTS, "k": 2, "norm_type": 1}
    call, why = gating_path(attrs, experts=16, soc=soc)
    assert (call == "aclnnMoeGatingTopK") == native
    assert why == ("" if native else f"the SoC {soc} has no kernels of aclnnMoeGatingTopK (built for "
                   "ascend910b, ascend910_93 and ascend910_95 (950) only)")


@pytest.mark.parametrize("status", [561002, 161002, 561003])
def test_phase1_rejection_falls_back_once_per_node(monkeypatch, capfd, status):
    """A CANN whose limits differ rejects the call in phase 1: the node falls back, remembers it
    (phase 1 is not asked again) and says why once."""
    if not NATIVE_SOC:
        pytest.skip("no native calls on this SoC")
    attrs = dict(k=2, norm_type=1)
    feeds = {"x": np.random.default_rng(8).standard_normal((5, 16)).astype(np.float32)}
    data = gating_model(feeds, attrs)
    monkeypatch.setenv("FAKE_ACLNN_REJECT", f"aclnnMoeGatingTopK={status}")
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = {c: cann.calls(c) for c in ("aclnnMoeGatingTopKGetWorkspaceSize", "aclnnMoeGatingTopK")}
    ref = cann.run(cann.session(data, "cpu"), feeds)
    for _ in range(3):
        cann.assert_bits_equal(cann.run(s, feeds), ref)
    assert cann.calls("aclnnMoeGatingTopKGetWorkspaceSize") == before["aclnnMoeGatingTopKGetWorkspaceSize"] + 1
    assert cann.calls("aclnnMoeGatingTopK") == before["aclnnMoeGatingTopK"]
    err = capfd.readouterr().err
    said = f"MoeGatingTopKHash runs on the CANN host fallback (CPU kernel): aclnnMoeGatingTopKGetWorkspaceSize " \
           f"failed with ACL/ACLNN status {status}: fake CANN: aclnnMoeGatingTopKGetWorkspaceSize: rejected by " \
           f"FAKE_ACLNN_REJECT"
    assert err.count(said) == 1, err


def test_other_phase1_failures_still_fail(monkeypatch):
    if not NATIVE_SOC:
        pytest.skip("no native calls on this SoC")
    feeds = {"x": np.random.default_rng(9).standard_normal((5, 16)).astype(np.float32)}
    monkeypatch.setenv("FAKE_ACLNN_REJECT", "aclnnMoeGatingTopK=361001")
    got = cann.error_text(cann.fresh_session(gating_model(feeds, dict(k=2, norm_type=1))), feeds)
    assert "aclnnMoeGatingTopKGetWorkspaceSize failed with ACL/ACLNN status 361001" in got
