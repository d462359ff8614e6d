"""Helpers of the CANN execution-provider tests: models of our nodes only (the fake CANN runtime
cannot run CANN's own operators), sessions on the CANN EP and on the CPU EP, runs with every
element type, node placement read from ORT's profile, and the fake runtime's call counters."""

from __future__ import annotations

import ctypes
import json
import os
import subprocess
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.ort_custom_ops import cann_placement
from tests import ort_values

CANN = "CANNExecutionProvider"
ROOT = Path(__file__).resolve().parents[2]
CANN_AVAILABLE = CANN in ort.get_available_providers()
# The floating element types of the op family's data inputs, by ONNX type name.
FLOAT_TYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


ONNX_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16, np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8, np.dtype(ml_dtypes.float8_e4m3fn): TensorProto.FLOAT8E4M3FN,
    np.dtype(ml_dtypes.float8_e5m2): TensorProto.FLOAT8E5M2, np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64, np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.float64): TensorProto.DOUBLE,
}


def fake_runtime() -> ctypes.CDLL:
    """The fake libascendcl.so this process loaded (the EP's), for its call counters."""
    lib = ctypes.CDLL("libascendcl.so")
    if not hasattr(lib, "FakeAclCallCount"):
        raise RuntimeError("libascendcl.so is not the fake CANN runtime")
    lib.FakeAclCallCount.argtypes = [ctypes.c_char_p]
    return lib


def calls(name: str) -> int:
    """How often the fake runtime saw ``name`` (e.g. "aclnnMoeReRouting", or its phase 1
    "aclnnMoeReRoutingGetWorkspaceSize") so far."""
    return fake_runtime().FakeAclCallCount(name.encode())


def moe_kernels_on_this_soc(*calls: str) -> bool:
    """Whether the library finds kernels of ACLNN operators ``calls`` (none given: of every MoE
    operator) for the SoC this process runs on (the fake's $FAKE_ACL_SOC_NAME): the tests expect
    native calls only then."""
    from ascend_moe_onnx.ort_custom_ops.cann import soc_blocker

    return CANN_AVAILABLE and not any(soc_blocker(None, c) for c in calls or [None])


def fresh_session(data: bytes, log_severity: int = 3) -> ort.InferenceSession:
    """A new CANN session (new kernel instances: nothing remembered from earlier runs)."""
    so = ort_custom_ops.session_options()
    so.log_severity_level = log_severity
    return ort.InferenceSession(data, so, providers=[ort_custom_ops.cann_provider(), "CPUExecutionProvider"])


def model(nodes, inputs: dict, outputs, initializers=()) -> bytes:
    """A model of ``nodes`` with typed graph inputs ``{name: (np dtype, dims)}``."""
    vi = [helper.make_tensor_value_info(n, ONNX_TYPES[np.dtype(t)], dims) for n, (t, dims) in inputs.items()]
    vo = [helper.make_value_info(n, onnx.TypeProto()) for n in outputs]
    graph = helper.make_graph(nodes, "cann_test", vi, vo, initializer=list(initializers))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ascend.moe", 1)],
                          ir_version=8)
    return m.SerializeToString()


_SESSIONS: dict = {}


def session(data: bytes, provider: str, profile_dir: Path | None = None) -> ort.InferenceSession:
    """An InferenceSession with the library on the CANN EP ("cann") or the CPU EP ("cpu"); cached
    unless profiling."""
    key = (data, provider)
    if profile_dir is None and key in _SESSIONS:
        return _SESSIONS[key]
    so = ort_custom_ops.session_options()
    so.log_severity_level = 3
    if profile_dir is not None:
        so.enable_profiling = True
        so.profile_file_prefix = str(profile_dir / "profile")
    providers = [ort_custom_ops.cann_provider(), "CPUExecutionProvider"] if provider == "cann" \
        else ["CPUExecutionProvider"]
    s = ort.InferenceSession(data, so, providers=providers)
    if provider == "cann":
        assert CANN in s.get_providers(), "the CANN EP did not start (fake runtime not on LD_LIBRARY_PATH?)"
    if profile_dir is None:
        _SESSIONS[key] = s
    return s


run = ort_values.run  # NumPy inputs of any element type; outputs as NumPy (bfloat16 / float8 included)


def placement(data: bytes, feeds: dict, tmp_path: Path) -> dict:
    """{op type: set of providers} of the nodes that ran, read from ORT's profile."""
    s = session(data, "cann", profile_dir=tmp_path)
    run(s, feeds)
    path = s.end_profiling()
    events = json.loads(Path(path).read_text())
    os.remove(path)
    where: dict = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "Node" and "provider" in args:
            where.setdefault(args["op_name"], set()).add(args["provider"])
    return where


def assert_bits_equal(got: list, ref: list) -> None:
    """Outputs identical bit for bit (NaN payloads included)."""
    assert len(got) == len(ref)
    for i, (g, r) in enumerate(zip(got, ref)):
        assert g.dtype == r.dtype and g.shape == r.shape, f"output {i}: {g.dtype}{g.shape} vs {r.dtype}{r.shape}"
        assert g.tobytes() == r.tobytes(), f"output {i} differs"


def shape_only_nodes(model: onnx.ModelProto) -> set[str]:
    """Names of the nodes whose outputs are all shape values (ORT keeps them on the host: they are
    bookkeeping, not the model's computation)."""
    shape_only = cann_placement.shape_values(model.graph)
    return {n.name for n in model.graph.node if all(o in shape_only for o in n.output)}


def assert_close(out: np.ndarray, ref: np.ndarray, rel_tol: float, what: str) -> None:
    """``out`` has ``ref``'s type and shape and its values within ``rel_tol`` of ``ref``'s largest."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, f"{what}: {out.dtype}{out.shape} vs {ref.dtype}{ref.shape}"
    err = float(np.abs(out.astype(np.float64) - ref).max())
    assert err <= rel_tol * float(np.abs(ref).max()), f"{what}: max abs error {err}"


def compare_eps(data: bytes, feeds: dict, acl_call: str) -> tuple[list, bool]:
    """Runs ``data`` on the CANN EP and on the CPU EP, whose outputs must be bit-equal; returns the
    CANN outputs and whether ACLNN operator ``acl_call`` ran (natively, not the fallback)."""
    before = calls(acl_call)
    got = run(session(data, "cann"), feeds)
    native = calls(acl_call) > before
    assert_bits_equal(got, run(session(data, "cpu"), feeds))
    return got, native


def fallback_log(capfd: pytest.CaptureFixture, data: bytes, feeds: dict, runs: int = 3) -> str:
    """What ``runs`` calls of a new CANN session (warnings logged) write to stderr: the kernels'
    fallback messages, each said once per node."""
    s = fresh_session(data, log_severity=2)
    capfd.readouterr()
    for _ in range(runs):
        run(s, feeds)
    return capfd.readouterr().err


def errors() -> tuple:
    """The exception types ORT raises for a failing kernel."""
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    return (st.InvalidArgument, st.RuntimeException, st.Fail)


def error_text(sess, feeds) -> str:
    """The status message of a failing run."""
    with pytest.raises(errors()) as info:
        run(sess, feeds)
    return str(info.value).split("Status Message: ")[-1].strip()


def export_python() -> str:
    """The project's torch environment (exports need torch, which .venv-cann does not have):
    $ASCEND_MOE_EXPORT_PYTHON, default .venv/bin/python of the checkout; a skip without it."""
    exe = os.environ.get("ASCEND_MOE_EXPORT_PYTHON") or str(ROOT / ".venv" / "bin" / "python")
    if not Path(exe).is_file():
        pytest.skip(f"exporting needs the project's torch environment ({exe} is missing; "
                    f"bash scripts/setup.sh --no-run, or set ASCEND_MOE_EXPORT_PYTHON)")
    return exe


def cli_exports(commands: dict, out: Path) -> dict:
    """{key: model bytes} of ``moe-onnx export *ARGS -o out/KEY.onnx`` for each key -> ARGS, all in one
    process of the torch environment (``export_python``)."""
    script = "; ".join(["from ascend_moe_onnx.cli.main import main"]
                       + [f"assert main({['export', *argv, '-o', str(out / f'{key}.onnx')]!r}) == 0"
                          for key, argv in commands.items()])
    env = {k: v for k, v in os.environ.items() if k != "LD_LIBRARY_PATH"}  # not the fake runtime there
    done = subprocess.run([export_python(), "-c", script], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return {key: (out / f"{key}.onnx").read_bytes() for key in commands}


def profiled_run(data: bytes, feeds: dict, tmp_path: Path) -> tuple[list, dict]:
    """Outputs of one run on the CANN EP and {node name: (op type, provider)} from ORT's profile."""
    so = ort_custom_ops.session_options()
    so.log_severity_level = 3
    so.enable_profiling = True
    so.profile_file_prefix = str(tmp_path / "layer")
    sess = ort.InferenceSession(data, so, providers=[ort_custom_ops.cann_provider(), "CPUExecutionProvider"])
    assert CANN in sess.get_providers()
    outs = run(sess, feeds)
    path = sess.end_profiling()
    events = json.loads(Path(path).read_text())
    os.remove(path)
    where = {}
    for e in events:
        args = e.get("args", {})
        if e.get("cat") == "Node" and "provider" in args:
            where[e["name"].removesuffix("_kernel_time")] = (args["op_name"], args["provider"])
    return outs, where


def npu_run(data: bytes, feeds: dict, tmp_path: Path, on_the_host: set[str], what: str) -> tuple[list, dict]:
    """``profiled_run``, asserting that the CPU EP computed only the shape-only bookkeeping and the
    nodes ``on_the_host``: (outputs, {node name: (op type, provider)})."""
    got, where = profiled_run(data, feeds, tmp_path)
    on_cpu = {name for name, (_, ep) in where.items() if ep == "CPUExecutionProvider"}
    allowed = shape_only_nodes(onnx.load_from_string(data)) | on_the_host
    assert on_cpu <= allowed, f"{what}: computed on the host: {sorted(on_cpu - allowed)}"
    return got, where
