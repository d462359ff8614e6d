"""Graphs exported from Ascend code (tests/ascend_code: cann-recipes-infer's DeepSeek-V3 / Qwen3 paths
and vllm-ascend's A2 path, as tests/test_ascend_code.py exports them, here with ``target="cann"``)
on the real CANN EP with the fake runtime at 1, 16, 256 and 4096 tokens: every ascend.moe node with
a CANN kernel and every MatMul on CANNExecutionProvider; on the CPU EP only shape bookkeeping and
the nodes ``cann_placement.cann_host_nodes`` names (standard ops the model writes that ORT 1.24.4's
CANN EP has no kernel for) plus ascend.moe ops without a CANN kernel, and never a Split, Sigmoid or
Slice (``npu_swiglu`` is one SwiGlu node, the init routing needs no Slice); outputs equal to the CPU
EP's within ``REL_TOL`` of their largest magnitude."""

from __future__ import annotations

import os
import subprocess

import numpy as np
import onnx
import pytest

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas import DOMAIN
from ascend_moe_onnx.ort_custom_ops import cann_placement
from tests.cann.helpers import CANN, ROOT, assert_close, export_python, npu_run, run, session

PATHS = ("recipes_deepseek_tp", "recipes_qwen3_softmax", "vllm_ascend_a2")
TOKENS = (1, 16, 256, 4096)
REL_TOL = 1e-5
# npu_swiglu's former Split / Sigmoid / Mul and the init-routing Slice
NEVER_ON_THE_HOST = {"Split", "Sigmoid", "Slice"}

_EXPORT = """
import sys, warnings
warnings.simplefilter("ignore")
import onnx
from torch.export import Dim
from ascend_moe_onnx import exporters
from tests.test_ascend_code import PATHS, EXPORT_TOKENS, _model, _tokens
for name, out in zip(sys.argv[1::2], sys.argv[2::2]):
    model = _model(name)
    args = _tokens(model, EXPORT_TOKENS, 1)
    dim = PATHS[name].dim or Dim("tokens", min=2)
    dims = tuple({0: dim} if a.dim() == 2 else None for a in args)
    onnx.save(exporters.export(model, args, dynamic_shapes=dims, target="cann"), out)
"""


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> dict[str, bytes]:
    """{path name: model bytes} exported with target="cann" in the torch environment."""
    out = tmp_path_factory.mktemp("ascend_code")
    argv = [a for p in PATHS for a in (p, str(out / f"{p}.onnx"))]
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    done = subprocess.run([export_python(), "-c", _EXPORT, *argv], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {p: (out / f"{p}.onnx").read_bytes() for p in PATHS}


@pytest.mark.parametrize("tokens", TOKENS)
@pytest.mark.parametrize("name", PATHS)
def test_ascend_code_graph_on_the_npu(name, tokens, exported, tmp_path):
    data = exported[name]
    model = onnx.load_from_string(data)
    with_kernel = {op["name"] for op in ort_custom_ops.manifest()["ops"] if op.get("provider") == CANN}
    ours = {n.name: n.op_type for n in model.graph.node if n.domain == DOMAIN}
    host_named = {entry.split("'")[1] for entry in cann_placement.cann_host_nodes(model)}
    x = model.graph.input[0]
    hidden = x.type.tensor_type.shape.dim[1].dim_value
    feeds = {x.name: np.random.default_rng(tokens).standard_normal((tokens, hidden)).astype(np.float32)}
    without_kernel = {n for n, op in ours.items() if op not in with_kernel}
    got, where = npu_run(data, feeds, tmp_path, host_named | without_kernel, name)
    never = {n: op for n, (op, ep) in where.items() if ep == "CPUExecutionProvider" and op in NEVER_ON_THE_HOST}
    assert not never, f"{name}: on the host: {never}"
    assert where[next(n for n, op in ours.items() if op == "SwiGlu")][1] == CANN
    for n, op in ours.items():
        if op in with_kernel:
            assert where[n][1] == CANN, f"{name}: {n} ({op}) not on the NPU"
    assert all(ep == CANN for op, ep in where.values() if op == "MatMul")
    assert_close(got[0], run(session(data, "cpu"), feeds)[0], REL_TOL, f"{name} at {tokens} tokens")
