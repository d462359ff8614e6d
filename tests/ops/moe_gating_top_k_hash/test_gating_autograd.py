"""Backward of the MoeGatingTopKHash torch ops (docs/operators.md §1.5): gradients of y and out
with respect to x, checked against finite differences for every norm type, with and without
renormalisation, grouping and hash routing.

The ops accept float32 at most (T excludes double), so torch.autograd.gradcheck runs in float32:
central differences with eps = 1e-3 carry a rounding error of about 1e-7 / 1e-3 = 1e-4 relative to
the weights (<= 1) and a truncation error of about eps^2 = 1e-6, hence atol = 1e-3, rtol = 1e-2; a
wrong formula (a missing renormalisation term, a wrong derivative of the scores) is off by 1e-2 or
more. The inputs keep every selection far from a tie, so no perturbation changes the experts."""

from __future__ import annotations

import warnings

import pytest
import torch

from ascend_moe_onnx import exporters  # noqa: F401  (defines the torch ops)

TOL = dict(eps=1e-3, atol=1e-3, rtol=1e-2)
# gradcheck warns on every float32 input; the tolerance above is chosen for float32.
pytestmark = pytest.mark.filterwarnings("ignore:Input #0 requires gradient and is not a double")
R, E = 3, 16


def _x(seed: int, scale: float = 2.0, shift: float = 0.0) -> torch.Tensor:
    """Rows of distinct logits at least 4 / E apart: a random permutation of an even grid."""
    g = torch.Generator().manual_seed(seed)
    grid = torch.linspace(-scale, scale, E)
    x = torch.stack([grid[torch.randperm(E, generator=g)] for _ in range(R)]) + shift
    return x.requires_grad_()


HASH = dict(input_ids=torch.tensor([0, 2, 1]),
            tid2eid=torch.tensor([[3, 7, 7], [0, 15, 4], [9, 1, 2]], dtype=torch.int32))  # row 0 names 7 twice
CASES = {
    "softmax": dict(k=4, norm_type=0),
    "softmax_renorm": dict(k=4, norm_type=0, renorm=1, routed_scaling_factor=1.5),
    "sigmoid": dict(k=4, norm_type=1, routed_scaling_factor=2.5),
    "sigmoid_renorm_eps": dict(k=4, norm_type=1, renorm=1, eps=0.1),
    "sqrt_softplus": dict(k=6, norm_type=2, routed_scaling_factor=1.5),
    "softmax_groups_max": dict(k=3, norm_type=0, group_count=4, k_group=2, group_select_mode=0),
    "sigmoid_groups_top2": dict(k=4, norm_type=1, group_count=4, k_group=2, group_select_mode=1),
    "sqrt_softplus_groups_renorm": dict(k=4, norm_type=2, group_count=2, k_group=1, renorm=1),
    "softmax_hash": dict(k=3, norm_type=0, **HASH),
    "softmax_renorm_hash": dict(k=3, norm_type=0, renorm=1, **HASH),
    "sigmoid_hash": dict(k=3, norm_type=1, **HASH),
    "sqrt_softplus_hash_masked": dict(k=3, norm_type=2, additional_bias=torch.linspace(0, 1, E),
                                      additional_token_mask=torch.tensor([False, True, False]), **HASH),
}


def _gating(x, kw):
    kw = dict(kw)
    return torch.ops.custom.npu_moe_gating_top_k(x, kw.pop("k"), **kw)


@pytest.mark.parametrize("case", CASES)
def test_gradient_of_y_matches_finite_differences(case):
    x = _x(len(case))
    assert torch.autograd.gradcheck(lambda x: _gating(x, CASES[case])[0], (x,), **TOL)


@pytest.mark.parametrize("case", ["softmax", "sigmoid_renorm_eps", "sqrt_softplus_groups_renorm"])
def test_gradient_of_y_and_out_matches_finite_differences(case):
    def y_and_out(x):
        y, _, out = _gating(x, {**CASES[case], "out_flag": True})
        return y, out

    assert torch.autograd.gradcheck(y_and_out, (_x(7),), **TOL)


@pytest.mark.parametrize("norm_type", [1, 2])
def test_gradient_in_the_underflow_tail(norm_type):
    """Logits around -40 (sigmoid ~ e^x, sqrt-softplus = e^(x/2)): renormalised weights keep an
    O(1) gradient that the stable score forms must carry."""
    x = _x(3, scale=1.0, shift=-40.0)
    assert torch.autograd.gradcheck(lambda x: _gating(x, dict(k=4, norm_type=norm_type))[0], (x,), **TOL)


def test_npu_front_end_and_router_op_have_the_same_gradient():
    x = _x(5)
    g1, = torch.autograd.grad(torch.ops.npu.npu_moe_gating_top_k(x, 4, norm_type=1, renorm=1)[0].sum(), x)
    kw = dict(k=4, norm_type=1, renorm=1)
    g2, = torch.autograd.grad(_gating(x, kw)[0].sum(), x)
    torch.testing.assert_close(g1, g2)


def test_backward_needs_no_fallback_and_leaves_selection_inputs_without_gradient():
    """No "autograd kernel was not registered" warning; the biases only steer the selection."""
    x = _x(11)
    bias = torch.zeros(E, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, idx, _ = _gating(x, dict(k=4, norm_type=1, bias=bias))
        y.sum().backward()
    assert not idx.requires_grad and x.grad is not None and bias.grad is None


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_gradient_in_half_types_follows_float32(dtype):
    x = _x(13).detach()
    g32, = torch.autograd.grad(_gating(x.requires_grad_(), dict(k=4, norm_type=2))[0].sum(), x)
    xh = x.detach().to(dtype).requires_grad_()
    gh, = torch.autograd.grad(_gating(xh, dict(k=4, norm_type=2))[0].sum(), xh)
    assert gh.dtype == dtype
    torch.testing.assert_close(gh.float(), g32, atol=2e-2, rtol=2e-2)


def test_opcheck_of_the_router_op_with_gradients():
    x = _x(17).detach().requires_grad_()
    attrs = (4, 2, 4, 1.5, 1e-20, 1, 1, 1, 1)  # k, then the custom front end's attribute order
    torch.library.opcheck(torch.ops.ascend_moe.moe_gating_top_k_hash.default,
                          (x, torch.zeros(E), None, None, None, None, *attrs))
