"""The supported ONNX Runtime range: one floor, stated everywhere, enforced at registration."""

from __future__ import annotations

import ctypes
import re
from pathlib import Path

import pytest

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.ort_custom_ops import MIN_ORT_VERSION, version_tuple

ort = pytest.importorskip("onnxruntime")
REPO = Path(__file__).resolve().parent.parent


def _library_floor() -> str:
    fn = ctypes.CDLL(ort_custom_ops.get_library_path()).AscendMoeMinOrtVersion
    fn.restype = ctypes.c_char_p
    return fn().decode()


def test_library_and_python_state_the_same_floor():
    assert _library_floor() == MIN_ORT_VERSION


@pytest.mark.skipif(not (REPO / "pyproject.toml").is_file(), reason="needs the source tree")
def test_pyproject_and_readme_state_the_floor():
    pyproject = (REPO / "pyproject.toml").read_text()
    assert re.findall(r'"onnxruntime>=([0-9.]+)"', pyproject) == [MIN_ORT_VERSION]
    assert f"ONNX Runtime ≥ {MIN_ORT_VERSION}" in (REPO / "README.md").read_text()


@pytest.mark.parametrize("version, ok", [("1.23.2", False), ("1.21.1", False), ("1.24.0", False),
                                         (MIN_ORT_VERSION, True), ("1.32.0", True), ("2.0.0", True),
                                         ("1.25.0.dev20251201", True)])
def test_check_ort_version(version, ok):
    if ok:
        ort_custom_ops.check_ort_version(version)
    else:
        with pytest.raises(RuntimeError, match=re.escape(f">= {MIN_ORT_VERSION}") + ".*" + re.escape(version)):
            ort_custom_ops.check_ort_version(version)


def testversion_tuple():
    assert version_tuple("1.24.4") == (1, 24, 4)
    assert version_tuple("1.32.0+cann") == (1, 32, 0)
    assert version_tuple("1.25") == (1, 25, 0)


@pytest.mark.skipif(version_tuple(ort.__version__) >= version_tuple(MIN_ORT_VERSION),
                    reason="runs on an ONNX Runtime older than the floor (CI's ort-versions job)")
def test_older_runtime_is_refused_with_a_clear_error():
    # Both layers refuse: the Python helper, and the library itself when registered directly.
    with pytest.raises(RuntimeError, match=re.escape(ort.__version__)):
        ort_custom_ops.register(ort.SessionOptions())
    so = ort.SessionOptions()
    with pytest.raises(Exception, match=re.escape(f"need ONNX Runtime >= {MIN_ORT_VERSION}") + ".*"
                       + re.escape(ort.__version__)):
        so.register_custom_ops_library(ort_custom_ops.get_library_path())


@pytest.mark.skipif(version_tuple(ort.__version__) < version_tuple(MIN_ORT_VERSION),
                    reason="needs a supported ONNX Runtime")
def test_supported_runtime_registers():
    so = ort.SessionOptions()
    ort_custom_ops.register(so)
    so.register_custom_ops_library(ort_custom_ops.get_library_path())


# ORT < 1.32 aborts the process when custom-op shape inference sets an output the node does not
# have (measured on 1.24.1; the library's shape inference cannot see the node's output count).
@pytest.mark.skipif(version_tuple(ort.__version__) < (1, 32, 0),
                    reason="ORT < 1.32 aborts when shape inference sets a missing output")
@pytest.mark.parametrize("outputs, message", [
    (["t", "s"], "has output size 2 not in range"),
    (["t", "", "i", "n"], "output 1 is marked single but has an empty string"),
])
def test_outputs_the_contract_requires_are_rejected_at_session_creation(outputs, message):
    # The library declares the schema's required outputs as required, so ORT's graph check rejects
    # a node that leaves one out (or leaves it unnamed) before any kernel runs.
    from onnx import TensorProto, helper

    node = helper.make_node("MoeReRouting", ["tokens", "counts"], outputs, domain="ascend.moe")
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, ["A", 4]),
         helper.make_tensor_value_info("counts", TensorProto.INT64, [2, 3])],
        [helper.make_empty_tensor_value_info(o) for o in outputs if o])
    model = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", 18),
                                                                  helper.make_opsetid("ascend.moe", 1)])
    with pytest.raises(Exception, match=message):
        sess = ort.InferenceSession(model.SerializeToString(), ort_custom_ops.session_options(),
                                    providers=["CPUExecutionProvider"])
        import numpy as np

        sess.run(None, {"tokens": np.zeros((3, 4), np.float32), "counts": np.array([[1, 0, 1], [0, 1, 0]])})
