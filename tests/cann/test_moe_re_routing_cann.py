"""MoeReRouting on the real onnxruntime-cann EP against the fake CANN runtime: the node is placed on
CANN, its outputs are bit-identical to the CPU EP's for every token / count / scale type and
attribute, aclnnMoeReRouting runs exactly where its documented limits allow (copy fallback
elsewhere, logged once with the reason), 0 tokens work, and bad counts fail with the CPU's
message."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from ascend_moe_onnx.ort_custom_ops.cann import rerouting_path
from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnMoeReRouting")  # each operator's chips (FAKE_ACL_SOC_NAME)

TOKEN_TYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int8": np.int8,
               "uint8": np.uint8, "float8e4m3fn": ml_dtypes.float8_e4m3fn, "float8e5m2": ml_dtypes.float8_e5m2}
SCALE_TYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
WORKED = np.array([[1, 0, 2], [2, 1, 0]])  # docs/operators.md §2.2


def rerouting_model(tokens, counts, scales=None, **attrs) -> bytes:
    inputs = {"tokens": (tokens.dtype, ["A", tokens.shape[1]]), "counts": (counts.dtype, list(counts.shape))}
    if scales is not None:
        inputs["scales"] = (scales.dtype, ["A", *scales.shape[1:]])
    node = helper.make_node("MoeReRouting", list(inputs), ["pt", "ps", "pi", "en"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["pt", "ps", "pi", "en"])


def random_case(rng, token_type, count_type=np.int64, scales=None, a=None, n=3, e=4, h=16):
    if a is None:
        counts = rng.integers(0, 4, (n, e)).astype(count_type)
        a = int(counts.sum())
    else:
        counts = np.zeros((n, e), count_type)
        for _ in range(a):
            counts[rng.integers(n), rng.integers(e)] += 1
    bits = rng.integers(0, 256, (a, h * np.dtype(token_type).itemsize), dtype=np.uint8)
    tokens = bits.view(token_type).reshape(a, h)
    feeds = {"tokens": tokens, "counts": counts}
    if scales is not None:
        dtype, rank = scales
        feeds["scales"] = rng.standard_normal((a, 3)[:rank]).astype(np.float32).astype(dtype)
    return feeds


def compare(feeds, **attrs):
    """Run on CANN and CPU; returns (CANN outputs, whether aclnnMoeReRouting ran)."""
    data = rerouting_model(feeds["tokens"], feeds["counts"], feeds.get("scales"), **attrs)
    return cann.compare_eps(data, feeds, "aclnnMoeReRouting")


def test_worked_example_runs_natively_on_cann(tmp_path):
    tokens = np.arange(6 * 8, dtype=np.float16).reshape(6, 8)
    feeds = {"tokens": tokens, "counts": WORKED.astype(np.int64)}
    data = rerouting_model(tokens, feeds["counts"])
    assert cann.placement(data, feeds, tmp_path) == {"MoeReRouting": {"CANNExecutionProvider"}}
    (pt, ps, pi, en), native = compare(feeds)
    assert native == NATIVE_SOC
    assert pi.tolist() == [0, 3, 4, 5, 1, 2] and en.tolist() == [3, 1, 2] and ps.shape == (0,)
    assert (pt == tokens[pi]).all()


# (token type, count type, scales (dtype, rank) or None, attrs) -> native expected
CASES = [(t, c, None, {}) for t in TOKEN_TYPES for c in (np.int32, np.int64)]
CASES += [("int8", np.int64, (s, r), {}) for s in SCALE_TYPES for r in (1, 2)]
CASES += [("bfloat16", np.int32, None, dict(expert_token_num_type=et, idx_type=it))
          for et, it in itertools.product((0, 1), (0, 1))]
CASES += [("float8e4m3fn", np.int64, ("bfloat16", 2), dict(expert_token_num_type=0, idx_type=1))]


def native_expected(token_type, scales, attrs) -> bool:
    return NATIVE_SOC and (token_type in ("float16", "bfloat16", "int8") and (scales is None or scales == ("float", 1))
            and attrs.get("expert_token_num_type", 1) == 1 and attrs.get("idx_type", 0) == 0)


@pytest.mark.parametrize("token_type,count_type,scales,attrs", CASES,
                         ids=[f"{t}-{np.dtype(c).name}-{s}-{a}" for t, c, s, a in CASES])
def test_bit_identical_to_cpu_and_native_where_allowed(token_type, count_type, scales, attrs):
    rng = np.random.default_rng(len(token_type) + 7 * len(attrs))
    sc = None if scales is None else (SCALE_TYPES[scales[0]], scales[1])
    for _trial in range(2):
        feeds = random_case(rng, TOKEN_TYPES[token_type], count_type, sc)
        _, native = compare(feeds, **attrs)
        assert native == native_expected(token_type, scales, attrs)
    # moe-onnx info predicts the same path
    predicted, _ = rerouting_path({"expert_token_num_type": 1, "idx_type": 0, **attrs}, token_type=token_type,
                                  scale_type=scales and scales[0], scale_rank=scales and scales[1], hidden=16)
    assert (predicted is not None) == native


def test_large_hidden_falls_back_to_copies():
    rng = np.random.default_rng(3)
    feeds = random_case(rng, np.float16, h=16384, a=5)
    assert compare(feeds)[1] is False
    feeds = random_case(rng, np.float16, h=16383, a=5)
    assert compare(feeds)[1] is NATIVE_SOC


@pytest.mark.parametrize("token_type", ["float16", "float"])
def test_zero_tokens(token_type):
    feeds = random_case(np.random.default_rng(0), TOKEN_TYPES[token_type], a=0)
    (pt, ps, pi, en), _ = compare(feeds)
    assert pt.shape == (0, 16) and pi.shape == (0,) and en.tolist() == [0] * 4


def test_fallback_logged_once_with_reason(capfd):
    rng = np.random.default_rng(5)
    feeds = random_case(rng, np.float32)
    err = cann.fallback_log(capfd, rerouting_model(feeds["tokens"], feeds["counts"], idx_type=1), feeds)
    assert err.count("MoeReRouting runs on the CANN copy fallback") == 1, err
    _, why = rerouting_path({"expert_token_num_type": 1, "idx_type": 1}, token_type="float", hidden=16)
    assert why.startswith("tokens must be float16" if NATIVE_SOC else "the SoC Ascend310P3 has no kernels of aclnnMoeReRouting")
    assert f"MoeReRouting runs on the CANN copy fallback: {why}" in err


BAD_COUNTS = [
    np.array([[1, 0, 2], [2, 1, 1]]),   # sum 7 != A = 6
    np.array([[1, 0, 2], [2, 2, -1]]),  # negative
]


@pytest.mark.parametrize("count_type", [np.int32, np.int64])
@pytest.mark.parametrize("counts", BAD_COUNTS, ids=["sum", "negative"])
@pytest.mark.parametrize("token_type", ["float16", "float"])
def test_bad_counts_same_message_as_cpu(counts, count_type, token_type):
    feeds = {"tokens": np.zeros((6, 4), TOKEN_TYPES[token_type]), "counts": counts.astype(count_type)}
    data = rerouting_model(feeds["tokens"], feeds["counts"])
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeReRouting: input 'expert_token_num_per_rank' must")


# Copy-fallback cases whose rows start at offsets that are not multiples of 64 bytes: float16 rows
# of 32 bytes, [A] / [A, 3] scales of 4 / 12 bytes; one rank (one contiguous run) and several.
UNALIGNED = [(np.float16, 1, ("float", 1), dict(idx_type=1)), (np.float16, 3, ("float", 2), {}),
             (np.float32, 3, ("bfloat16", 1), dict(expert_token_num_type=0)), (np.int8, 2, None, dict(idx_type=1))]


@pytest.mark.parametrize("token_type,ranks,scales,attrs", UNALIGNED)
def test_copy_fallback_within_strict_alignment_and_pinned_memory(monkeypatch, token_type, ranks, scales, attrs):
    """Device-to-device copies at 64-byte aligned addresses only (acl_rt.h, aclrtMemcpyAsync) and
    asynchronous copies from aclrtMallocHost memory only: the fake refuses anything else."""
    monkeypatch.setenv("FAKE_ACL_D2D_ALIGN", "64")
    monkeypatch.setenv("FAKE_ACL_PINNED_ONLY", "1")
    rng = np.random.default_rng(11)
    sc = None if scales is None else (SCALE_TYPES[scales[0]], scales[1])
    for _ in range(2):
        feeds = random_case(rng, token_type, np.int32, sc, n=ranks, e=5)
        _, native = compare(feeds, **attrs)
        assert not native


@pytest.mark.parametrize("status", [561002, 161002])
def test_phase1_rejection_falls_back_once_per_node(monkeypatch, capfd, status):
    if not NATIVE_SOC:
        pytest.skip("no native calls on this SoC")
    feeds = random_case(np.random.default_rng(12), np.float16)
    data = rerouting_model(feeds["tokens"], feeds["counts"])
    monkeypatch.setenv("FAKE_ACLNN_REJECT", f"aclnnMoeReRouting={status}")
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = {c: cann.calls(c) for c in ("aclnnMoeReRoutingGetWorkspaceSize", "aclnnMoeReRouting")}
    for _ in range(3):
        cann.assert_bits_equal(cann.run(s, feeds), cann.run(cann.session(data, "cpu"), feeds))
    assert cann.calls("aclnnMoeReRoutingGetWorkspaceSize") == before["aclnnMoeReRoutingGetWorkspaceSize"] + 1
    assert cann.calls("aclnnMoeReRouting") == before["aclnnMoeReRouting"]
    err = capfd.readouterr().err
    assert err.count(f"MoeReRouting runs on the CANN copy fallback: aclnnMoeReRoutingGetWorkspaceSize failed with "
                     f"ACL/ACLNN status {status}") == 1, err
