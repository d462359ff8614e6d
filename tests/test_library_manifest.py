"""The C++ library declares exactly the ops, attributes and defaults of the ONNX schemas."""

from __future__ import annotations

import numpy as np
import pytest

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas._common import attribute_defaults


def test_every_schema_has_a_cpu_kernel_with_the_same_attributes():
    manifest = ort_custom_ops.manifest()
    assert manifest["domain"] == onnx_schemas.DOMAIN
    cpu_ops = {op["name"]: op for op in manifest["ops"] if op["provider"] == "CPUExecutionProvider"}
    assert set(cpu_ops) == set(onnx_schemas.SCHEMAS)
    for name, schema in onnx_schemas.SCHEMAS.items():
        declared = {a["name"]: a for a in cpu_ops[name]["attributes"]}
        defaults = attribute_defaults(schema)
        assert set(declared) == set(defaults), name
        for attr, default in defaults.items():
            entry = declared[attr]
            assert entry["required"] == (default is None), (name, attr)
            if default is None:
                continue
            assert entry["kind"] == ("float" if isinstance(default, float) else "int"), (name, attr)
            if isinstance(default, float):
                # The kernels hold float attributes as float32, as ONNX does.
                assert np.float32(entry["default"]) == np.float32(default), (name, attr)
            else:
                assert entry["default"] == default, (name, attr)


def test_library_path_exists():
    path = ort_custom_ops.get_library_path()
    assert path.endswith(ort_custom_ops.LIBRARY_NAME)


def test_register_on_session_options():
    ort = pytest.importorskip("onnxruntime")
    so = ort.SessionOptions()
    ort_custom_ops.register(so)
