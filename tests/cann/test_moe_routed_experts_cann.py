"""MoeRoutedExperts on the real onnxruntime-cann EP against the fake CANN runtime: the node is placed
on CANN and runs as the chain aclnnMoeInitRoutingV3 -> aclnnGroupedMatmulV4 -> aclnnPermute -> aclnnSwiGlu ->
aclnnGroupedMatmulV4 -> aclnnMoeFinalizeRoutingV2 where the operators' limits allow (host
fallback elsewhere, logged once with the reason), equal to the CPU EP within the stated tolerance
(the chain sums in another order: docs/ascend.md), and bad expert ids fail with the CPU's message."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc("aclnnMoeInitRoutingV3", "aclnnGroupedMatmulV4", "aclnnPermute", "aclnnSwiGlu", "aclnnMoeFinalizeRoutingV2")  # each operator's chips (FAKE_ACL_SOC_NAME)

# aclnnPermute splits each row's interleaved (gate, up) pairs into gates, then ups, so that
# aclnnSwiGlu halves whole rows (its aligned tiling)
CHAIN = ["aclnnMoeInitRoutingV3", "aclnnGroupedMatmulV4", "aclnnPermute", "aclnnSwiGlu", "aclnnMoeFinalizeRoutingV2"]
# The chain and the CPU kernel both sum in float32, in other orders (grouped matmul k order, the
# slots in slot order rather than experts in ascending order): |cann - cpu| <= RTOL * max|y| + ATOL.
RTOL, ATOL = 2e-6, 1e-6
CHAIN_RAN = [1, 2, 1, 1, 1] if NATIVE_SOC else [0, 0, 0, 0, 0]  # calls of each operator per run


def experts_model(feeds, **attrs) -> bytes:
    names = ["x", "idx", "w", "gu", "down"]
    inputs = {n: (feeds[n].dtype, ["T", *feeds[n].shape[1:]] if n in ("x", "idx", "w") else list(feeds[n].shape))
              for n in names}
    node = helper.make_node("MoeRoutedExperts", names, ["y"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["y"])


def case(rng, t=7, h=32, k=3, e=5, i=8, itype=np.int64):
    return {"x": rng.standard_normal((t, h)).astype(np.float32),
            "idx": rng.integers(0, e, (t, k)).astype(itype),
            "w": rng.random((t, k)).astype(np.float32),
            "gu": (rng.standard_normal((e, 2 * i, h)) / np.sqrt(h)).astype(np.float32),
            "down": (rng.standard_normal((e, h, i)) / np.sqrt(i)).astype(np.float32)}


def chain_calls() -> list:
    return [cann.calls(op) for op in CHAIN]


def compare(feeds, **attrs):
    """Run on CANN and CPU; returns (y, the chain's call counts during the CANN run)."""
    data = experts_model(feeds, **attrs)
    before = chain_calls()
    (got,) = cann.run(cann.session(data, "cann"), feeds)
    ran = [a - b for a, b in zip(chain_calls(), before)]
    (ref,) = cann.run(cann.session(data, "cpu"), feeds)
    assert got.dtype == ref.dtype and got.shape == ref.shape
    bound = RTOL * float(np.abs(ref).max(initial=0.0)) + ATOL
    assert float(np.abs(got - ref).max(initial=0.0)) <= bound
    return got, ran


def test_placed_on_cann_as_the_operator_chain(tmp_path):
    feeds = case(np.random.default_rng(0))
    assert cann.placement(experts_model(feeds), feeds, tmp_path) == {"MoeRoutedExperts": {"CANNExecutionProvider"}}
    _, ran = compare(feeds)
    assert ran == CHAIN_RAN


@pytest.mark.parametrize("tokens", [1, 16, 256])
@pytest.mark.parametrize("itype", [np.int32, np.int64])
def test_equal_to_cpu_within_tolerance(tokens, itype):
    rng = np.random.default_rng(tokens)
    _, ran = compare(case(rng, t=tokens, e=8, k=2, itype=itype))
    assert ran == CHAIN_RAN


def test_repeated_experts_and_unused_experts():
    feeds = case(np.random.default_rng(1), e=6)
    feeds["idx"][:] = 4
    feeds["idx"][0, 1] = 4  # hash routing may name an expert twice: each slot counts
    _, ran = compare(feeds)
    assert ran == CHAIN_RAN


def test_swiglu_limit_falls_back_to_the_host_bit_identical():
    feeds = case(np.random.default_rng(2))
    data = experts_model(feeds, swiglu_limit=0.5)
    before = chain_calls()
    got = cann.run(cann.session(data, "cann"), feeds)
    assert chain_calls() == before
    cann.assert_bits_equal(got, cann.run(cann.session(data, "cpu"), feeds))


def test_more_than_1024_experts_fall_back():
    feeds = case(np.random.default_rng(3), t=4, h=4, i=2, e=1025)
    assert compare(feeds)[1] == [0] * len(CHAIN)


@pytest.mark.parametrize("shape", [(0, 8, 2), (3, 0, 2), (3, 8, 0)], ids=["T0", "H0", "k0"])
def test_empty_shapes(shape):
    t, h, k = shape
    feeds = case(np.random.default_rng(4), t=t, h=h, k=k)
    got, _ = compare(feeds)
    assert got.shape == (t, h) and not got.any()


def test_fallback_logged_once_with_reason(capfd):
    feeds = case(np.random.default_rng(5))
    err = cann.fallback_log(capfd, experts_model(feeds, swiglu_limit=1.0), feeds)
    assert err.count("MoeRoutedExperts runs on the host fallback") == 1, err
    assert "swiglu_limit > 0 (the clamp) has no CANN operator" in err


@pytest.mark.parametrize("bad", [5, -1])
def test_bad_expert_id_same_message_as_cpu(bad):
    feeds = case(np.random.default_rng(6))
    feeds["idx"][2, 1] = bad
    data = experts_model(feeds)
    got = cann.error_text(cann.session(data, "cann"), feeds)
    assert got == cann.error_text(cann.session(data, "cpu"), feeds)
    assert got.startswith("MoeRoutedExperts: input 'expert_idx' must be in [0, E)")


def quant_case(rng, bits, block):
    """int8 / int4 expert weights with scales per row (block 0) or per block (weight_quant's layout)."""
    from ascend_moe_onnx.onnx_schemas.weight_quant import quantize

    feeds = case(rng, h=32, i=8)
    feeds["gu"], feeds["gus"] = quantize(feeds["gu"], bits, block)
    feeds["down"], feeds["dns"] = quantize(feeds["down"], bits, block)
    return feeds


@pytest.mark.parametrize("bits,block", [(8, 0), (8, 4), (4, 0), (4, 8)])
def test_quantized_experts_run_on_the_host_bit_identical(capfd, bits, block):
    """Quantized experts take the host fallback: aclnnGroupedMatmulV4's antiquant needs float16 /
    bfloat16 activations and the op's are float32. Placed on CANN, no operator of the chain runs,
    the result is the CPU EP's bit for bit, and the log says why."""
    feeds = quant_case(np.random.default_rng(7 + bits + block), bits, block)
    data = node_model(feeds, ["x", "idx", "w", "gu", "down", "gus", "dns"], weight_bits=bits, block_size=block)
    runs_on_host(capfd, data, feeds, f"quantized expert weights (weight_bits {bits}) run on the host")


def node_model(feeds, names, **attrs) -> bytes:
    """One MoeRoutedExperts node over ``names`` (absent middle inputs as "")."""
    inputs = {n: (feeds[n].dtype, ["T", *feeds[n].shape[1:]] if n in ("x", "idx", "w") else list(feeds[n].shape))
              for n in names if n}
    node = helper.make_node("MoeRoutedExperts", names, ["y"], domain="ascend.moe", **attrs)
    return cann.model([node], inputs, ["y"])


def runs_on_host(capfd, data: bytes, feeds, reason: str) -> None:
    """Placed on CANN, no operator of the chain runs, the result is the CPU EP's bit for bit, and the
    log names ``reason``."""
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = chain_calls()
    got = cann.run(s, feeds)
    assert chain_calls() == before
    cann.assert_bits_equal(got, cann.run(cann.session(data, "cpu"), feeds))
    if NATIVE_SOC:
        err = capfd.readouterr().err
        assert reason in err, err


GPT_OSS = dict(swiglu_limit=7.0, activation_alpha=1.702, activation_beta=1.0)


@pytest.mark.parametrize("names,attrs,reason", [
    (["x", "idx", "w", "gu", "down", "", "", "gub", "dnb"], GPT_OSS, "swiglu_limit > 0"),  # the first reason
    (["x", "idx", "w", "gu", "down", "", "", "", "dnb"], {}, "expert biases (gate_up_bias / down_bias)"),
    (["x", "idx", "w", "gu", "down"], dict(activation_alpha=1.702), "activation_alpha / activation_beta"),
    (["x", "idx", "w", "gu", "down"], dict(activation_beta=1.0), "activation_alpha / activation_beta"),
], ids=["gpt-oss", "down-bias", "alpha", "beta"])
def test_biases_and_activation_constants_run_on_the_host_bit_identical(capfd, names, attrs, reason):
    """Expert biases and an activation other than SiLU have no operator in the chain (aclnnSwiGlu
    computes silu(g) * u): placed on CANN, no operator of the chain runs, the result is the CPU EP's
    bit for bit, and the log says why."""
    rng = np.random.default_rng(8)
    feeds = case(rng)
    feeds["gub"] = rng.standard_normal((5, 16)).astype(np.float32)
    feeds["dnb"] = rng.standard_normal((5, 32)).astype(np.float32)
    feeds = {n: v for n, v in feeds.items() if n in names}
    runs_on_host(capfd, node_model(feeds, names, **attrs), feeds, reason)
