"""MoeGatingTopKHash torch ops: agreement with the NumPy reference, opcheck, validation errors."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
import torch

from ascend_moe_onnx import exporters  # noqa: F401  (defines the torch ops)
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import reference
from tests.gating_cases import (
    BIAS_MODES, CONFIGS, assert_routing_equal, assert_weights_close, make_inputs, seed_of, selection_scores,
)
from tests.rerouting_cases import to_numpy, to_torch  # bit-exact, every element type

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


# ---- worked behaviours of docs/operators.md §1.2 -------------------------------------------------------------


def custom(x, k, **kw):
    return torch.ops.custom.npu_moe_gating_top_k(torch.as_tensor(x), k, **kw)


def test_ties_pick_lower_index_and_nan_ranks_last():
    x = torch.tensor([[1.0, 3.0, 3.0, float("nan"), -float("inf"), 3.0]])
    _, idx, _ = custom(x, 6, norm_type=1)
    assert idx.tolist() == [[1, 2, 5, 0, 4, 3]]
    x = torch.tensor([[float("nan"), float("nan"), -float("inf"), 0.0]])
    _, idx, _ = custom(x, 4, norm_type=1)
    assert idx.tolist() == [[3, 2, 0, 1]]


def test_sigmoid_saturation_keeps_order_by_index():
    x = torch.tensor([[100.0, 200.0, 50.0, -200.0]])  # sigmoid = 1, 1, 1, 0 in float32
    y, idx, _ = custom(x, 3, norm_type=1)
    assert idx.tolist() == [[0, 1, 2]]
    np.testing.assert_allclose(y.numpy(), [[1 / 3, 1 / 3, 1 / 3]], rtol=1e-6)


def test_group_top2_with_equal_maxima():
    # group 0 has two equal maxima: mode 1 scores it 2*max and keeps it; mode 0 keeps group 1.
    x = torch.tensor([[2.0, 2.0, -9.0, -9.0, 2.5, -9.0, -9.0, -9.0]])
    _, idx1, _ = custom(x, 2, k_group=1, group_count=2, group_select_mode=1, norm_type=1)
    assert idx1[0].tolist() == [0, 1]
    _, idx0, _ = custom(x, 2, k_group=1, group_count=2, group_select_mode=0, norm_type=1)
    assert idx0[0].tolist() == [4, 5]


def test_weights_come_from_unbiased_scores():
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    bias = torch.tensor([10.0, 0.0, 0.0, 0.0])
    y, idx, out = custom(x, 2, bias=bias, norm_type=1, out_flag=True)
    assert idx.tolist() == [[0, 3]]
    s = torch.sigmoid(x)[0]
    np.testing.assert_allclose(y.numpy()[0], [s[0] / (s[0] + s[3]), s[3] / (s[0] + s[3])], rtol=1e-6)
    np.testing.assert_allclose(out.numpy(), torch.sigmoid(x).numpy(), rtol=1e-6)


def test_softmax_is_not_renormalised_unless_renorm():
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0]])
    p = torch.softmax(x, -1)[0]
    y, _, _ = custom(x, 2)
    np.testing.assert_allclose(y.numpy()[0], [p[3], p[2]], rtol=1e-6)
    y, _, _ = custom(x, 2, renorm=1)
    np.testing.assert_allclose(y.numpy()[0], torch.softmax(torch.tensor([3.0, 2.0]), -1).numpy(), rtol=1e-6)


def test_hash_rows_keep_table_order_and_masked_rows_select():
    table = torch.tensor([[3, 3, 0], [1, 2, 0]], dtype=torch.int32)
    x = torch.tensor([[0.0, 1.0, 2.0, 3.0]] * 3)
    ids = torch.tensor([1, 0, 1])
    mask = torch.tensor([False, False, True])
    add_bias = torch.tensor([5.0, 0.0, 0.0, 0.0])
    _, idx, _ = custom(x, 3, input_ids=ids, tid2eid=table, additional_bias=add_bias,
                       additional_token_mask=mask, norm_type=2)
    assert idx.tolist() == [[1, 2, 0], [3, 3, 0], [0, 3, 2]]


def test_out_is_empty_without_out_flag():
    _, _, out = custom(torch.randn(3, 8), 2)
    assert out.shape == (0,) and out.dtype == torch.float32


# ---- validation: every rule of docs/operators.md §1.3 ---------------------------------------------------------

X = torch.zeros(4, 8)
B = torch.zeros(8)
IDS = torch.zeros(4, dtype=torch.int64)
TBL = torch.zeros(10, 2, dtype=torch.int32)
MASK = torch.zeros(4, dtype=torch.bool)

# The bad-case table (tests/gating_cases.py) is run through the torch op by tests/test_op_table.py.


def test_unused_table_entries_and_masked_ids_are_not_checked():
    # Masked rows do not read the table; entries of rows that are never looked up are free.
    table = torch.tensor([[0, 1], [99, 99]], dtype=torch.int32)
    _, idx, _ = torch.ops.custom.npu_moe_gating_top_k(
        X, 2, input_ids=torch.tensor([0, 0, 1000, 0]), tid2eid=table, additional_bias=B,
        additional_token_mask=torch.tensor([False, False, True, False]))
    assert idx[0].tolist() == [0, 1]


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
