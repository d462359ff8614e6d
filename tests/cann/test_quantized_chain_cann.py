"""Quantized experts exported for the CANN target (``moe-onnx export PRESET --dtype D --weights-quant
... --target cann``: exporters.quantized_chain) on the real CANN EP with the fake runtime: every node
of the op chain (MoeInitRoutingV3 -> GroupedMatmul -> SwiGlu -> GroupedMatmul ->
MoeFinalizeRoutingV2, for the routed experts and for the shared expert's slices) placed on CANN and
run natively (the fake's counters see each operator's call; a host fallback calls none), nothing on
the CPU EP but shape bookkeeping and what cann_host_nodes names outside the chain, and the outputs
equal to the CPU EP's for the same graph."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest

from ascend_moe_onnx.onnx_schemas import DOMAIN
from ascend_moe_onnx.ort_custom_ops import cann_placement
from ascend_moe_onnx.ort_custom_ops.cann import soc_name
from tests.cann import helpers as cann

NATIVE_SOC = cann.moe_kernels_on_this_soc()  # FAKE_ACL_SOC_NAME=Ascend310P3: every call falls back
ON_310P = soc_name().lower().startswith("ascend310p")

# key -> (export arguments, hidden states' NumPy type, chains: routed + the shared expert's)
CASES = {
    "deepseek-v3-bf16-int4": (["deepseek-v3", "--dtype", "bfloat16", "--weights-quant", "int4",
                               "--quant-block-size", "16"], ml_dtypes.bfloat16, 2),
    "qwen3-moe-fp16-int8": (["qwen3-moe", "--dtype", "float16", "--weights-quant", "int8"], np.float16, 1),
}
OPERATORS = {"aclnnMoeInitRoutingV3": 1, "aclnnGroupedMatmulV4": 2, "aclnnSwiGlu": 1, "aclnnMoeFinalizeRoutingV2": 1}
HIDDEN = 64  # the tiny presets' hidden size


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, bytes]:
    return cann.cli_exports({k: [*argv, "--target", "cann"] for k, (argv, _, _) in CASES.items()},
                            tmp_path_factory.mktemp("quantized"))


@pytest.mark.parametrize("tokens", [1, 16, 256])
@pytest.mark.parametrize("case", list(CASES))
def test_chain_runs_natively_and_matches_the_cpu_ep(case, tokens, exported, tmp_path):
    data, (_, x_type, chains) = exported[case], CASES[case]
    model = onnx.load_from_string(data)
    host_named = {h.split("'")[1] for h in cann_placement.cann_host_nodes(model)}  # the block's own, not the chain's
    chain = {n.name for n in model.graph.node if n.domain == DOMAIN and n.op_type != "MoeGatingTopKHash"}
    assert len(chain) == 5 * chains and not chain & (host_named | cann.shape_only_nodes(model))
    feeds = {"hidden_states": np.random.default_rng(tokens).standard_normal((tokens, HIDDEN)).astype(x_type)}
    before = {op: cann.calls(op) for op in OPERATORS}
    got, where = cann.npu_run(data, feeds, tmp_path, host_named, case)
    ran = {op: cann.calls(op) - n for op, n in before.items()}
    assert all(where[name][1] == cann.CANN for name in chain)
    # Ascend310P: aclnnGroupedMatmulV4 takes no quantized weights there (the rest of the chain follows its chips)
    # and its SwiGlu kernels take no bfloat16
    refused_on_310p = {"aclnnGroupedMatmulV4"} | ({"aclnnSwiGlu"} if np.dtype(x_type) != np.float16 else set())
    native = {op: cann.moe_kernels_on_this_soc(op) and not (ON_310P and op in refused_on_310p) for op in OPERATORS}
    assert ran == {op: n * chains * native[op] for op, n in OPERATORS.items()}
    (out, idx), (ref_out, ref_idx) = got, cann.run(cann.session(data, "cpu"), feeds)
    np.testing.assert_array_equal(idx, ref_idx)
    assert out.dtype == ref_out.dtype == x_type and out.shape == (tokens, HIDDEN)
    np.testing.assert_array_equal(out.astype(np.float32), ref_out.astype(np.float32))
