"""MoeGatingTopKHash torch ops: agreement with the NumPy reference, opcheck, validation errors."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

from ascend_moe_onnx import exporters  # noqa: F401  (defines the torch ops)
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import reference
from tests.ops.moe_gating_top_k_hash.gating_cases import (
    BIAS_MODES,
    CONFIGS,
    assert_routing_equal,
    assert_weights_close,
    make_inputs,
    seed_of,
    selection_scores,
)
from tests.ops.moe_re_routing.rerouting_cases import to_numpy, to_torch  # bit-exact, every element type

TORCH_DTYPES = {"float": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def run_custom(inputs: dict, attrs: dict):
    kw = {n: to_torch(a) for n, a in inputs.items() if n != "x"}
    attrs = dict(attrs)
    k = attrs.pop("k")
    if "out_flag" in attrs:
        attrs["out_flag"] = bool(attrs["out_flag"])
    return [to_numpy(t) for t in torch.ops.custom.npu_moe_gating_top_k(to_torch(inputs["x"]), k, **kw, **attrs)]


CASES = [
    (cfg, bias, hash_ids, dtype, lead)
    for cfg, bias, hash_ids, dtype, lead in itertools.product(
        CONFIGS, BIAS_MODES, (None, "int64/int32"), ("float", "bfloat16"), ((0, ), (1,), (7,), (2, 5)))
    if not (hash_ids and "groups" in cfg)
]


@pytest.mark.parametrize("cfg,bias_mode,hash_ids,dtype,lead", CASES)
def test_custom_op_matches_reference(cfg, bias_mode, hash_ids, dtype, lead):
    rng = np.random.default_rng(seed_of(cfg, bias_mode, hash_ids, dtype, lead))
    attrs = CONFIGS[cfg]
    inputs = make_inputs(rng, attrs, bias_mode, hash_ids, dtype, lead)
    y, idx, out = run_custom(inputs, attrs)
    ry, ridx, rout = reference(**inputs, **attrs)
    assert y.dtype == ry.dtype and y.shape == ry.shape and idx.dtype == np.int32
    assert_routing_equal(idx, ridx, selection_scores(inputs, attrs))
    assert_weights_close(y, ry, dtype)
    assert out.shape == rout.shape
    np.testing.assert_allclose(out, rout, rtol=2e-6, atol=1e-7)


@pytest.mark.parametrize("dtype", ["float", "float16"])
def test_npu_op_matches_reference(dtype):
    rng = np.random.default_rng(1)
    attrs = dict(k=4, k_group=2, group_count=4, group_select_mode=1, norm_type=1, out_flag=1,
                 routed_scaling_factor=2.5)
    inputs = make_inputs(rng, attrs, "bias", None, dtype, (9,))
    y, idx, out = torch.ops.npu.npu_moe_gating_top_k(
        to_torch(inputs["x"]), 4, bias=to_torch(inputs["bias"]), k_group=2, group_count=4,
        group_select_mode=1, norm_type=1, out_flag=True, routed_scaling_factor=2.5)
    ry, ridx, rout = reference(**inputs, **attrs)
    np.testing.assert_array_equal(idx.numpy(), ridx)
    assert_weights_close(y.numpy(), ry, dtype)
    np.testing.assert_allclose(out.numpy(), rout, rtol=2e-6)


def test_opcheck_custom_and_npu():
    x = torch.randn(5, 16)
    bias = torch.randn(16)
    torch.library.opcheck(torch.ops.custom.npu_moe_gating_top_k.default, (x, 4),
                          dict(bias=bias, k_group=2, group_count=4, norm_type=1, out_flag=True))
    torch.library.opcheck(
        torch.ops.custom.npu_moe_gating_top_k.default, (x, 4),
        dict(input_ids=torch.randint(0, 10, (5,)), tid2eid=torch.randint(0, 16, (10, 4), dtype=torch.int32),
             additional_bias=bias, additional_token_mask=torch.rand(5) < 0.5, norm_type=2))
    torch.library.opcheck(torch.ops.npu.npu_moe_gating_top_k.default, (x.half(), 4),
                          dict(bias=bias.half(), norm_type=0, renorm=1))


# ---- validation: every rule of docs/operators.md §1.3 ---------------------------------------------------------

X = torch.zeros(4, 8)
B = torch.zeros(8)
IDS = torch.zeros(4, dtype=torch.int64)
TBL = torch.zeros(10, 2, dtype=torch.int32)
MASK = torch.zeros(4, dtype=torch.bool)

# The bad-case table (tests/ops/moe_gating_top_k_hash/gating_cases.py) is run through the torch op by tests/test_op_table.py.


def test_npu_op_rejects_sqrt_softplus():
    with pytest.raises(ValueError, match=r"attribute 'norm_type' .* got 2"):
        torch.ops.npu.npu_moe_gating_top_k(X, 2, norm_type=2)


# ---- devices, fake validation ----------------------------------------------------------


def test_ops_are_registered_for_every_device():
    """Not for the CPU key only: the implementation moves data to the host and back; the gating
    front ends are composites of the router op, whatever the device."""
    for op in (torch.ops.ascend_moe.moe_gating_top_k_hash.default, torch.ops.npu.npu_moe_re_routing.default):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeExplicitAutograd"), op
    for op in (torch.ops.custom.npu_moe_gating_top_k.default, torch.ops.npu.npu_moe_gating_top_k.default):
        assert torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CompositeImplicitAutograd"), op


def test_fake_kernel_validates():
    """Under FakeTensorMode (export tracing) a bad call fails like the eager one."""
    from torch._subclasses.fake_tensor import FakeTensorMode

    with FakeTensorMode():
        x = torch.empty(4, 8)
        with pytest.raises(ValueError, match=re.escape("MoeGatingTopKHash: attribute 'k' must be <= E (8), got 9")):
            torch.ops.custom.npu_moe_gating_top_k(x, 9)
        with pytest.raises(ValueError, match=re.escape("input 'bias' must have shape [E] = [8], got [7]")):
            torch.ops.custom.npu_moe_gating_top_k(x, 2, bias=torch.empty(7))
