"""MoeFinalizeRoutingV2 on the real onnxruntime-cann EP against the fake CANN runtime: placed on
CANN, bit-identical to the CPU EP (the fake computes with the CPU kernel), aclnnMoeFinalizeRoutingV2
where its dtype combinations and limits allow (host fallback elsewhere), bad indices fail with the
CPU's message."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnMoeFinalizeRoutingV2")  # each operator's chips (FAKE_ACL_SOC_NAME)

OP = "aclnnMoeFinalizeRoutingV2"
TYPES = cann.FLOAT_TYPES
NAMES = ["expanded_x", "expanded_row_idx", "x1", "x2", "bias", "scales", "expert_idx"]


def finalize_model(feeds, **attrs) -> bytes:
    inputs = {n: (feeds[n].dtype, list(feeds[n].shape)) for n in NAMES if n in feeds}
    names = [n if n in feeds else "" for n in NAMES]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MoeFinalizeRoutingV2", names, ["y"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["y"])


def case(rng, mode=0, n=5, k=2, h=16, e=4, c=3, x="float", scales="float", skips=0, bias=False, itype=np.int32):
    t = TYPES[x]
    if mode in (1, 3):
        ex = rng.standard_normal((e, c, h))
        idx = rng.integers(-1, e * c, n * k)
    else:
        ex = rng.standard_normal((n * k, h))
        idx = rng.permutation(n * k)
    feeds = {"expanded_x": ex.astype(np.float32).astype(t), "expanded_row_idx": idx.astype(itype)}
    for name in ("x1", "x2")[:skips]:
        feeds[name] = rng.standard_normal((n, h)).astype(np.float32).astype(t)
    if bias:
        feeds["bias"] = rng.standard_normal((e, h)).astype(np.float32).astype(t)
        feeds["expert_idx"] = rng.integers(0, e, (n, k)).astype(itype)
    if scales:
        feeds["scales"] = rng.random((n, k)).astype(np.float32).astype(TYPES[scales])
    return feeds


def compare(feeds, **attrs):
    """Run on CANN and CPU (bit-equal); returns (y, whether aclnnMoeFinalizeRoutingV2 ran)."""
    got, native = cann.compare_eps(finalize_model(feeds, **attrs), feeds, OP)
    return got[0], native


def test_placed_on_cann_and_native(tmp_path):
    feeds = case(np.random.default_rng(0))
    assert cann.placement(finalize_model(feeds), feeds, tmp_path) == {"MoeFinalizeRoutingV2": {"CANNExecutionProvider"}}
    assert compare(feeds)[1] is NATIVE_SOC


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("x", list(TYPES))
def test_native_bit_identical_to_cpu(mode, x):
    rng = np.random.default_rng(mode + 4 * len(x))
    # without scales K is 1
    for k, skips, bias, itype, scales in ((2, 0, False, np.int32, x), (2, 2, True, np.int64, x),
                                          (1, 1, False, np.int32, None)):
        feeds = case(rng, mode, k=k, x=x, scales=scales, skips=skips, bias=bias, itype=itype)
        assert compare(feeds, drop_pad_mode=mode)[1] is NATIVE_SOC


FALLBACK = [("float16", "float"), ("float", "bfloat16"), ("bfloat16", "float16")]


@pytest.mark.parametrize("x,scales", FALLBACK)
def test_scale_type_mismatch_falls_back(x, scales):
    feeds = case(np.random.default_rng(1), x=x, scales=scales)
    assert compare(feeds)[1] is False


def test_bfloat16_with_float_scales_is_native():
    assert compare(case(np.random.default_rng(2), x="bfloat16", scales="float"))[1] is NATIVE_SOC


def test_bias_with_fewer_experts_than_k_falls_back():
    feeds = case(np.random.default_rng(3), k=3, e=2, bias=True)
    assert compare(feeds)[1] is False


@pytest.mark.parametrize("mode", [0, 2])
def test_row_minus_one_in_the_dropless_modes_is_a_zero_row_natively(mode):
    # init routing's experts outside active_expert_range come back as -1: a zero row, bias still added
    feeds = case(np.random.default_rng(6), mode, bias=True)
    feeds["expanded_row_idx"][[1, 4]] = -1
    y, native = compare(feeds, drop_pad_mode=mode)
    assert native is NATIVE_SOC
    feeds["expanded_row_idx"][[1, 4]] = 0
    assert not np.array_equal(y, compare(feeds, drop_pad_mode=mode)[0])


def test_zero_tokens():
    feeds = case(np.random.default_rng(4), n=0)
    y, _ = compare(feeds)
    assert y.shape == (0, 16)


@pytest.mark.parametrize("mode,bad", [(0, 10), (2, -2), (1, -2), (3, 12)])
def test_bad_index_same_message_as_cpu(mode, bad):
    feeds = case(np.random.default_rng(5), mode)
    feeds["expanded_row_idx"][3] = bad
    data = finalize_model(feeds, drop_pad_mode=mode)
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeFinalizeRoutingV2: input 'expanded_row_idx' must")
