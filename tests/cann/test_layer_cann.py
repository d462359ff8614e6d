"""Whole exported MoE layers on the real CANN EP with the fake runtime: a DeepSeek-V3 and a
Qwen3-MoE block exported with ``moe-onnx export PRESET --target cann`` (tiny sizes: hidden 64, so
4096 tokens stay fast) run at 1, 16, 256 and 4096 tokens. From ORT's profile: every ascend.moe node
and every MatMul on CANNExecutionProvider, and nothing on the CPU EP but shape bookkeeping (the
nodes ort_custom_ops.cann_placement derives from shapes and constants alone). Outputs equal to the
CPU EP's: expert indices exactly, the layer output within ``REL_TOL`` of its largest magnitude (the
fake's matrix products accumulate in double and round once; the CPU EP's MLAS accumulates blocked
float32 partial sums, so the router logits differ in their last bits).

The export needs torch, which .venv-cann does not have: it runs in the project's main environment
(``ASCEND_MOE_EXPORT_PYTHON``, default .venv/bin/python of the checkout), once per module."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from ascend_moe_onnx.onnx_schemas import DOMAIN
from ascend_moe_onnx.ort_custom_ops import cann_placement
from tests.cann.helpers import CANN, assert_close, cli_exports, npu_run, run, session

PRESETS = ("deepseek-v3", "qwen3-moe")
TOKENS = (1, 16, 256, 4096)
HIDDEN = 64  # the tiny presets' hidden size
REL_TOL = 1e-5


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, bytes]:
    """{preset: model bytes} of ``moe-onnx export PRESET --target cann``, run in the torch environment."""
    return cli_exports({p: [p, "--target", "cann"] for p in PRESETS}, tmp_path_factory.mktemp("layers"))


@pytest.mark.parametrize("preset", PRESETS)
def test_exported_layer_has_nothing_the_cann_ep_runs_on_the_host(preset, exported):
    model = onnx.load_from_string(exported[preset])
    assert [o.version for o in model.opset_import if o.domain == ""] == [cann_placement.CANN_OPSET]
    assert cann_placement.cann_host_nodes(model) == []
    ops = {n.op_type for n in model.graph.node}
    assert {"MatMul", "MoeGatingTopKHash", "MoeRoutedExperts"} <= ops and not ops & {"If", "MoE", "Gemm"}


@pytest.mark.parametrize("tokens", TOKENS)
@pytest.mark.parametrize("preset", PRESETS)
def test_layer_runs_on_the_npu_and_matches_the_cpu_ep(preset, tokens, exported, tmp_path):
    data = exported[preset]
    feeds = {"hidden_states": np.random.default_rng(tokens).standard_normal((tokens, HIDDEN)).astype(np.float32)}
    got, where = npu_run(data, feeds, tmp_path, set(), preset)
    for name in (n.name for n in onnx.load_from_string(data).graph.node if n.domain == DOMAIN):
        assert where[name][1] == CANN, f"{preset}: {where[name]} not on the NPU"
    matmuls = [name for name, (op, _) in where.items() if op == "MatMul"]
    assert matmuls and all(where[m][1] == CANN for m in matmuls)
    ref = run(session(data, "cpu"), feeds)
    (out, idx), (ref_out, ref_idx) = got, ref
    np.testing.assert_array_equal(idx, ref_idx)
    assert ref_out.shape == (tokens, HIDDEN)
    assert_close(out, ref_out, REL_TOL, f"{preset} at {tokens} tokens")
