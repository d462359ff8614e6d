"""MoeInitRoutingV3 on the real onnxruntime-cann EP against the fake CANN runtime: the node is placed
on CANN, its four outputs are bit-identical to the CPU EP's, aclnnMoeInitRoutingV3 runs where its
documented limits allow (the fake poisons what the operator leaves undefined: rows and scales past
the kept pairs, the scatter index past them, the scales without a scale input, so the kernel's
fixes are checked), the host fallback elsewhere, and bad expert ids fail with the CPU's message."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import helper

from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnMoeInitRoutingV3")  # each operator's chips (FAKE_ACL_SOC_NAME)

OP = "aclnnMoeInitRoutingV3"
X_TYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int8": np.int8}


def v3_model(feeds, **attrs) -> bytes:
    inputs = {n: (a.dtype, ["N", *a.shape[1:]] if n != "offset" else list(a.shape)) for n, a in feeds.items()}
    names = [n if n in feeds else "" for n in ("x", "expert_idx", "scale", "offset")]
    while names[-1] == "":
        names.pop()
    node = helper.make_node("MoeInitRoutingV3", names, ["ex", "ri", "cnt", "es"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["ex", "ri", "cnt", "es"])


def case(rng, n=7, h=16, k=3, e=6, x_type="float", idx_type=np.int32, scale=False):
    x = (rng.integers(-128, 128, (n, h)) if x_type == "int8" else rng.standard_normal((n, h)))
    feeds = {"x": x.astype(np.float32).astype(X_TYPES[x_type]) if x_type != "int8" else x.astype(np.int8),
             "expert_idx": rng.integers(0, e, (n, k)).astype(idx_type)}
    if scale:
        feeds["scale"] = rng.random(n).astype(np.float32) + 0.5
    return feeds


def compare(feeds, **attrs):
    """Run on CANN and CPU (bit-equal); returns (outputs, whether aclnnMoeInitRoutingV3 ran)."""
    return cann.compare_eps(v3_model(feeds, **attrs), feeds, OP)


def test_placed_on_cann_and_native(tmp_path):
    feeds = case(np.random.default_rng(0))
    data = v3_model(feeds, expert_num=6)
    assert cann.placement(data, feeds, tmp_path) == {"MoeInitRoutingV3": {"CANNExecutionProvider"}}
    assert compare(feeds, expert_num=6)[1] is NATIVE_SOC


NATIVE = [
    dict(), dict(expert_tokens_num_type=1), dict(expert_tokens_num_type=2), dict(row_idx_type=1),
    dict(active_expert_start=2, active_expert_end=5), dict(active_expert_start=1, row_idx_type=1),
    dict(active_num=10), dict(active_num=10, active_expert_end=4, expert_tokens_num_type=1),
]


@pytest.mark.parametrize("attrs", NATIVE, ids=[str(a) for a in NATIVE])
@pytest.mark.parametrize("x_type", list(X_TYPES))
def test_native_bit_identical_to_cpu(x_type, attrs):
    rng = np.random.default_rng(len(x_type) + len(attrs))
    for idx_type, scale in ((np.int32, False), (np.int64, True)):
        feeds = case(rng, x_type=x_type, idx_type=idx_type, scale=scale and x_type != "int8")
        assert compare(feeds, expert_num=6, **attrs)[1] is NATIVE_SOC


FALLBACK = [
    (dict(quant_mode=1), "float16"),
    (dict(drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1), "float"),
    (dict(expert_num=10241), "bfloat16"),
    (dict(expert_num=5121, expert_tokens_num_type=2), "float"),
]


@pytest.mark.parametrize("attrs,x_type", FALLBACK, ids=[str(a) for a, _ in FALLBACK])
def test_fallback_bit_identical_to_cpu(attrs, x_type):
    feeds = case(np.random.default_rng(3), x_type=x_type)
    attrs = {"expert_num": 6, **attrs}
    assert compare(feeds, **attrs)[1] is False


def test_zero_tokens():
    feeds = case(np.random.default_rng(4), n=0)
    (ex, ri, cnt, es), _ = compare(feeds, expert_num=6, expert_tokens_num_type=1)
    assert ex.shape == (0, 16) and ri.shape == (0,) and cnt.tolist() == [0] * 6


@pytest.mark.parametrize("bad", [6, -1])
def test_bad_expert_id_same_message_as_cpu(bad):
    feeds = case(np.random.default_rng(5))
    feeds["expert_idx"][1, 2] = bad
    data = v3_model(feeds, expert_num=6)
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeInitRoutingV3: input 'expert_idx' must hold expert ids")
