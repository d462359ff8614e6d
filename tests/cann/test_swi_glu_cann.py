"""SwiGlu on the real onnxruntime-cann EP against the fake CANN runtime: placed on CANN,
bit-identical to the CPU EP (the fake computes as the CPU kernel does), aclnnSwiGlu where it
applies (host fallback past 8 dims or on a chip without the family's kernels), the CPU's messages
for bad calls, and ``moe-onnx info``'s prediction."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from ascend_moe_onnx.ort_custom_ops.cann import family_path, soc_name
from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnSwiGlu")  # each operator's chips (FAKE_ACL_SOC_NAME)
ON_310P = soc_name().lower().startswith("ascend310p")
TYPES = cann.FLOAT_TYPES


def node_model(x: np.ndarray, **attrs) -> bytes:
    return cann.model([helper.make_node("SwiGlu", ["x"], ["y"], domain="ascend.moe", **attrs)],
                      {"x": (x.dtype, list(x.shape))}, ["y"])


def swiglu(x: np.ndarray, **attrs):
    """(y on CANN, whether aclnnSwiGlu ran); y's bits equal the CPU EP's."""
    got, native = cann.compare_eps(node_model(x, **attrs), {"x": x}, "aclnnSwiGlu")
    return got[0], native


def test_placed_on_cann_and_native(tmp_path):
    x = np.random.default_rng(0).standard_normal((5, 8)).astype(np.float16)
    assert cann.placement(node_model(x), {"x": x}, tmp_path) == {"SwiGlu": {"CANNExecutionProvider"}}
    assert swiglu(x)[1] is NATIVE_SOC


@pytest.mark.parametrize("t", list(TYPES))
@pytest.mark.parametrize("shape,dim", [((7, 64), -1), ((6, 3, 5), 0), ((2, 4, 3), -2), ((10,), 0), ((3, 2, 2, 6), 3)])
def test_native_bit_identical(t, shape, dim):
    x = (np.random.default_rng(len(shape) + dim).standard_normal(shape) * 3).astype(np.float32).astype(TYPES[t])
    y, native = swiglu(x, dim=dim)
    assert native is (NATIVE_SOC and not (ON_310P and t == "bfloat16"))  # the 310p kernels: no bfloat16
    a, b = np.split(x.astype(np.float32), 2, axis=dim)
    np.testing.assert_allclose(y.astype(np.float32), (a / (1 + np.exp(-a)) * b).astype(TYPES[t]).astype(np.float32),
                               rtol=1e-2 if t != "float" else 1e-6, atol=1e-2 if t != "float" else 1e-6)


def test_empty_and_high_rank_fall_back_or_skip():
    assert swiglu(np.zeros((0, 6), np.float32))[1] is False  # nothing to compute
    x = np.random.default_rng(3).standard_normal((1, 2, 1, 2, 1, 2, 1, 2, 4)).astype(np.float32)
    assert swiglu(x)[1] is False  # 9 dims: more than an aclTensor holds


def test_bad_calls_give_the_cpu_message():
    x = np.ones((3, 5), np.float32)
    sess = cann.session(node_model(x), "cann")
    assert "SwiGlu: input 'x' must have an even size along dim -1, got shape [3, 5]" in cann.error_text(sess, {"x": x})
    sess = cann.session(node_model(np.ones((3, 4), np.float32), dim=2), "cann")
    assert "SwiGlu: attribute 'dim' must be in [-2, 2) (x has rank 2), got 2" in cann.error_text(
        sess, {"x": np.ones((3, 4), np.float32)})


def test_info_path():
    assert family_path("SwiGlu", {"rank": 3}, soc="Ascend910B1") == ("aclnnSwiGlu", "")
    call, reason = family_path("SwiGlu", {"rank": 9}, soc="Ascend910B1")
    assert call is None and "at most 8 dims" in reason
    assert family_path("SwiGlu", {"rank": 2}, soc="Ascend310P3") == ("aclnnSwiGlu", "")  # swi_glu_def.cpp: 310p
    call, reason = family_path("SwiGlu", {"rank": 2}, soc="Ascend910A")
    assert call is None and reason == ("the SoC Ascend910A has no kernels of aclnnSwiGlu (built for ascend910b, "
                                       "ascend910_93, ascend310p and ascend910_95 (950) only)")
