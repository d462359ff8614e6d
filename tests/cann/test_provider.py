"""cann_provider() and inference_session(): the CANN EP entry with enable_cann_graph=0, and a
CannFallbackWarning naming the missing library (instead of ORT's printed banner) when the CANN
runtime cannot be loaded."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest
from onnx import helper

from ascend_moe_onnx import ort_custom_ops
from tests.cann.helpers import model


def rerouting_bytes():
    node = helper.make_node("MoeReRouting", ["tokens", "counts"], ["pt", "ps", "pi", "en"], domain="ascend.moe")
    return model([node], {"tokens": (np.float16, ["A", 8]), "counts": (np.int64, [2, 3])}, ["pt", "ps", "pi", "en"])


def test_inference_session_on_cann():
    sess = ort_custom_ops.inference_session(rerouting_bytes(), provider="cann")
    assert sess.get_providers()[0] == "CANNExecutionProvider"
    assert sess.get_provider_options()["CANNExecutionProvider"]["enable_cann_graph"] == "0"


def test_warning_names_the_missing_library():
    code = ("import warnings, sys; from ascend_moe_onnx import ort_custom_ops; "
            "from tests.cann.test_provider import rerouting_bytes; "
            "warnings.simplefilter('error', ort_custom_ops.CannFallbackWarning)\n"
            "try:\n    ort_custom_ops.inference_session(rerouting_bytes(), provider='cann')\n"
            "except ort_custom_ops.CannFallbackWarning as w:\n    print('WARNING', w)")
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         cwd=os.path.dirname(os.path.dirname(os.path.dirname(__file__))))
    assert out.returncode == 0, out.stderr
    assert "WARNING CANNExecutionProvider requested, running on the CPU" in out.stdout
    assert "libascendcl.so" in out.stdout
    assert "EP Error" not in out.stdout + out.stderr  # no ORT banner


def test_enable_cann_graph_1_warns():
    with pytest.warns(UserWarning, match="enable_cann_graph=1"):
        ort_custom_ops.cann_provider(enable_cann_graph=1)
