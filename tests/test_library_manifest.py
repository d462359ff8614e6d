"""The built library loads and registers on ONNX Runtime session options. (What it declares is
compared with the ONNX schemas by tests/test_op_table.py.)"""

from __future__ import annotations

import os

import numpy as np
import pytest

from ascend_moe_onnx import ort_custom_ops


def test_library_path_is_a_loadable_library_with_the_entry_points():
    import ctypes

    path = ort_custom_ops.get_library_path()
    assert os.path.isabs(path) and os.path.isfile(path)
    lib = ctypes.CDLL(path)
    assert lib.RegisterCustomOps and lib.AscendMoeOpsManifest


def test_registered_library_runs_an_op():
    ort = pytest.importorskip("onnxruntime")
    from onnx import TensorProto, helper

    node = helper.make_node("MoeGatingTopKHash", ["x"], ["y", "i"], domain="ascend.moe", k=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1]),
                               helper.make_tensor_value_info("i", TensorProto.INT32, [1, 1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20),
                                                    helper.make_opsetid("ascend.moe", 1)], ir_version=10)
    so = ort.SessionOptions()
    ort_custom_ops.register(so)
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    _, idx = sess.run(None, {"x": np.array([[0.0, 1.0]], np.float32)})
    assert idx.tolist() == [[1]]
