"""MoeTokenPermute and MoeTokenUnpermute on the real onnxruntime-cann EP against the fake CANN
runtime: placed on CANN, bit-identical to the CPU EP, aclnnMoeTokenPermute / aclnnMoeTokenUnpermute
where their limits allow (host fallback elsewhere), bad ids / indices fail with the CPU's message."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascend_moe_onnx.ort_custom_ops.cann import soc_name
from tests.cann import helpers as cann

# Each operator's chips (FAKE_ACL_SOC_NAME); on Ascend310P the unpermute kernels take no bfloat16.
NATIVE_PERMUTE = cann.moe_kernels_on_this_soc("aclnnMoeTokenPermute")
NATIVE_UNPERMUTE = cann.moe_kernels_on_this_soc("aclnnMoeTokenUnpermute")
NATIVE_INIT_ROUTING = cann.moe_kernels_on_this_soc("aclnnMoeInitRouting")
ON_310P = soc_name().lower().startswith("ascend310p")

TYPES = {**cann.FLOAT_TYPES, "int8": np.int8}


def node_model(op, feeds, names, outputs, **attrs) -> bytes:
    inputs = {n: (feeds[n].dtype, list(feeds[n].shape)) for n in names if n in feeds}
    used = [n if n in feeds else "" for n in names]
    while used[-1] == "":
        used.pop()
    return cann.model([helper.make_node(op, used, outputs, domain="ascend.moe", **attrs)], inputs, outputs)


def compare(op, acl, feeds, names, outputs, **attrs):
    return cann.compare_eps(node_model(op, feeds, names, outputs, **attrs), feeds, acl)


def permute(feeds, **attrs):
    return compare("MoeTokenPermute", "aclnnMoeTokenPermute", feeds, ["tokens", "indices"], ["pt", "si"], **attrs)


def unpermute(feeds, **attrs):
    return compare("MoeTokenUnpermute", "aclnnMoeTokenUnpermute", feeds, ["pt", "si", "probs"], ["y"], **attrs)


def tokens(rng, n, h, t):
    if t == "int8":
        return rng.integers(-128, 128, (n, h)).astype(np.int8)
    return rng.standard_normal((n, h)).astype(np.float32).astype(TYPES[t])


def test_placed_on_cann_and_native(tmp_path):
    rng = np.random.default_rng(0)
    feeds = {"tokens": tokens(rng, 6, 16, "float16"), "indices": rng.integers(0, 4, (6, 2))}
    data = node_model("MoeTokenPermute", feeds, ["tokens", "indices"], ["pt", "si"])
    assert cann.placement(data, feeds, tmp_path) == {"MoeTokenPermute": {"CANNExecutionProvider"}}
    (pt, si), native = permute(feeds)
    assert native is NATIVE_PERMUTE
    feeds = {"pt": pt, "si": si, "probs": rng.random((6, 2)).astype(np.float16)}
    data = node_model("MoeTokenUnpermute", feeds, ["pt", "si", "probs"], ["y"])
    assert cann.placement(data, feeds, tmp_path) == {"MoeTokenUnpermute": {"CANNExecutionProvider"}}
    assert unpermute(feeds)[1] is NATIVE_UNPERMUTE


@pytest.mark.parametrize("num_out_tokens", [0, 5, -3, 100])
@pytest.mark.parametrize("t", list(TYPES))
def test_permute_native_bit_identical(t, num_out_tokens):
    rng = np.random.default_rng(len(t) + num_out_tokens)
    for itype, shape in ((np.int64, (7, 3)), (np.int32, (7,))):
        feeds = {"tokens": tokens(rng, 7, 16, t), "indices": rng.integers(0, 9, shape).astype(itype)}
        assert permute(feeds, num_out_tokens=num_out_tokens)[1] is NATIVE_PERMUTE


def test_permute_fallbacks():
    rng = np.random.default_rng(1)
    feeds = {"tokens": tokens(rng, 2, 4, "float"), "indices": rng.integers(0, 9, (2, 513))}
    assert permute(feeds)[1] is False  # K > 512
    feeds = {"tokens": tokens(rng, 4, 4, "float"), "indices": rng.integers(0, 9, (4, 2))}
    assert permute(feeds, num_out_tokens=-8)[1] is False  # no rows
    feeds = {"tokens": tokens(rng, 0, 4, "float"), "indices": np.zeros((0, 2), np.int64)}
    (pt, si), _ = permute(feeds)
    assert pt.shape == (0, 4) and si.shape == (0,)


def test_permute_bad_id_same_message_as_cpu():
    rng = np.random.default_rng(2)
    feeds = {"tokens": tokens(rng, 4, 8, "float16"), "indices": rng.integers(0, 9, (4, 2))}
    feeds["indices"][2, 1] = -5
    data = node_model("MoeTokenPermute", feeds, ["tokens", "indices"], ["pt", "si"])
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeTokenPermute: input 'indices' must hold expert ids")


def unpermute_case(rng, t, pt_type, n=6, k=2, p=None, itype=np.int32, probs=True):
    p = n * k if p is None else p
    feeds = {"pt": tokens(rng, p, 16, t), "si": rng.permutation(n * k).astype(itype)}
    if probs:
        feeds["probs"] = rng.random((n, k)).astype(np.float32).astype(TYPES[pt_type])
    return feeds


@pytest.mark.parametrize("probs_type", ["float", "float16", "bfloat16"])
@pytest.mark.parametrize("t", ["float", "float16", "bfloat16"])
def test_unpermute_native_bit_identical(t, probs_type):
    rng = np.random.default_rng(len(t) + 3 * len(probs_type))
    native = NATIVE_UNPERMUTE and not (ON_310P and t == "bfloat16")
    assert unpermute(unpermute_case(rng, t, probs_type))[1] is native
    assert unpermute(unpermute_case(rng, t, probs_type, itype=np.int64, p=7))[1] is native  # rows [7, 12) add nothing
    feeds = unpermute_case(rng, t, probs_type)
    feeds["probs"][1, 0] = 0
    feeds["si"][2] = -1  # a slot of probability 0 is not read (expert-parallel paths mark it -1)
    assert unpermute(feeds)[1] is native


def test_unpermute_without_probs_and_fallbacks():
    rng = np.random.default_rng(4)
    assert unpermute(unpermute_case(rng, "float16", "float", k=1, probs=False))[1] is NATIVE_UNPERMUTE
    assert unpermute(unpermute_case(rng, "float", "float", n=1, k=513))[1] is False  # K > 512


def test_unpermute_bad_index_same_message_as_cpu():
    feeds = unpermute_case(np.random.default_rng(5), "float16", "float16")
    feeds["si"][4] = 12
    data = node_model("MoeTokenUnpermute", feeds, ["pt", "si", "probs"], ["y"])
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeTokenUnpermute: input 'sorted_indices' must")


def init_routing(feeds, **attrs):
    return compare("MoeInitRouting", "aclnnMoeInitRouting", feeds, ["x", "row_idx", "expert_idx"],
                   ["ex", "eri", "eei"], **attrs)


def init_case(rng, t, n=5, k=3, h=16):
    return {"x": tokens(rng, n, h, t), "row_idx": (np.arange(n * k).reshape(k, n).T).astype(np.int32),
            "expert_idx": rng.integers(0, 6, (n, k)).astype(np.int32)}


@pytest.mark.parametrize("active_num", [5, 2, 100])
@pytest.mark.parametrize("t", ["float", "float16", "bfloat16"])
def test_init_routing_native_bit_identical(t, active_num, tmp_path):
    feeds = init_case(np.random.default_rng(len(t) + active_num), t)
    if active_num == 5 and t == "float":
        data = node_model("MoeInitRouting", feeds, ["x", "row_idx", "expert_idx"], ["ex", "eri", "eei"],
                          active_num=active_num)
        assert cann.placement(data, feeds, tmp_path) == {"MoeInitRouting": {"CANNExecutionProvider"}}
    assert init_routing(feeds, active_num=active_num)[1] is NATIVE_INIT_ROUTING


def test_init_routing_no_rows_falls_back_and_bad_row_idx_same_message_as_cpu():
    rng = np.random.default_rng(6)
    assert init_routing(init_case(rng, "float"), active_num=0)[1] is False
    feeds = init_case(rng, "float16")
    feeds["row_idx"][1, 1] = feeds["row_idx"][0, 0]
    data = node_model("MoeInitRouting", feeds, ["x", "row_idx", "expert_idx"], ["ex", "eri", "eei"], active_num=5)
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeInitRouting: input 'row_idx' must be a permutation")
