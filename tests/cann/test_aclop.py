"""Standard ops on the real CANN EP with the fake runtime: the EP's kernel registry as
exporters.targets.CANN_EP_KERNELS records it (every op and type there is placed on the NPU, the
ops an MoE layer needs that are not stay on the CPU), each op computed by the fake's aclop host
implementation equal to the CPU EP, and launches the operator compiler would reject refused with
CANN's error code and a message naming the operand."""

from __future__ import annotations

import ctypes

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from ascend_moe_onnx.ort_custom_ops import cann_placement as targets
from tests.cann.helpers import calls, placement, run, session

NP = {TensorProto.FLOAT: np.float32, TensorProto.FLOAT16: np.float16, TensorProto.BFLOAT16: ml_dtypes.bfloat16,
      TensorProto.DOUBLE: np.float64, TensorProto.INT8: np.int8, TensorProto.UINT8: np.uint8,
      TensorProto.INT16: np.int16, TensorProto.INT32: np.int32, TensorProto.INT64: np.int64,
      TensorProto.BOOL: np.bool_}
# Ops that read more than one tensor of the same type, and their second operand's shape.
SECOND = {"MatMul": [8, 3], "Add": [1, 8], "Sub": [4, 8], "Mul": [4, 1], "Div": [4, 8], "Gemm": [3, 8]}
# aclop op type each ONNX op becomes (None: a device copy, no operator).
ACLOP = {"MatMul": "BatchMatMul", "Gemm": "GEMM", "Identity": None, "Reshape": None, "Dropout": None}
# Ops an exported MoE layer could need that the CANN EP leaves to the CPU (no kernel at all).
HOST_ONLY = ["Softmax", "Sigmoid", "TopK", "Gather", "Concat", "ReduceSum", "Transpose", "ScatterElements", "Tanh",
             "Max"]


def single_op(op: str, elem: int, opset: int = targets.CANN_OPSET) -> tuple[bytes, dict]:
    """A model of one ``op`` node on [4, 8] inputs of ``elem``, and feeds for it."""
    rng = np.random.default_rng(0)
    inputs = [("a", elem, [4, 8])]
    attrs, inits = {}, []
    if op in SECOND:
        inputs.append(("b", elem, SECOND[op]))
    if op == "Gemm":
        inputs.append(("c", elem, [3]))
        attrs = {"transB": 1, "alpha": 0.5, "beta": 2.0}
    if op == "Cast":
        attrs = {"to": TensorProto.FLOAT16 if elem == TensorProto.FLOAT else TensorProto.FLOAT}
    if op == "Reshape":
        inits = [onnx.numpy_helper.from_array(np.array([8, 4], np.int64), "shape")]
    node = helper.make_node(op, [n for n, _, _ in inputs] + [t.name for t in inits], ["y"], **attrs)
    graph = helper.make_graph([node], "op", [helper.make_tensor_value_info(n, t, d) for n, t, d in inputs],
                              [helper.make_tensor_value_info("y", attrs.get("to", elem), None)], initializer=inits)
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8).SerializeToString()
    feeds = {}
    for name, t, dims in inputs:
        v = rng.standard_normal(dims) * 3
        if op in ("Sqrt", "Log", "Reciprocal", "Div"):
            v = np.abs(v) + 1  # no division by zero, also after truncation to an integer type
        feeds[name] = v.astype(NP[t]) if t != TensorProto.BOOL else v > 0
    return data, feeds


def reference(data: bytes, feeds: dict) -> np.ndarray:
    """The CPU EP's result, or ONNX's reference evaluator's where the CPU EP has no kernel for the type."""
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    try:
        return run(session(data, "cpu"), feeds)[0]
    except (st.NotImplemented, st.InvalidGraph):
        from onnx.reference import ReferenceEvaluator

        return ReferenceEvaluator(onnx.load_from_string(data)).run(None, feeds)[0]


KERNEL_CASES = [(op, t) for op, types in sorted(targets.CANN_EP_KERNELS.items()) for t in sorted(types)]


@pytest.mark.parametrize("op,elem", KERNEL_CASES, ids=[f"{o}-{TensorProto.DataType.Name(t).lower()}"
                                                       for o, t in KERNEL_CASES])
def test_registry_op_runs_on_the_npu_and_matches_the_cpu(op, elem, tmp_path):
    data, feeds = single_op(op, elem)
    aclop = ACLOP.get(op, op)
    before = calls(f"aclop:{aclop}") if aclop else 0
    assert placement(data, feeds, tmp_path).get(op) == {"CANNExecutionProvider"}
    got = run(session(data, "cann"), feeds)[0]
    ref = reference(data, feeds)
    if aclop:
        assert calls(f"aclop:{aclop}") > before, f"{op} did not reach aclopCompileAndExecute(\"{aclop}\")"
    assert got.dtype == ref.dtype and got.shape == ref.shape
    exact = op not in ("MatMul", "Gemm", "Exp", "Log", "Erf", "Sin", "Cos", "Sqrt", "Reciprocal")
    if exact:
        assert got.tobytes() == ref.tobytes(), f"{op}: {got} vs {ref}"
    else:  # libm vs ORT's own approximations, double vs blocked float accumulation
        np.testing.assert_allclose(got.astype(np.float64), ref.astype(np.float64),
                                   rtol=2e-3 if elem in (TensorProto.FLOAT16, TensorProto.BFLOAT16) else 1e-5,
                                   atol=1e-5)


def host_only_model(op: str) -> tuple[bytes, dict]:
    """One ``op`` node (an op an MoE layer may use) on a float [4, 8] input."""
    a = np.random.default_rng(1).standard_normal((4, 8)).astype(np.float32)
    extra = {"TopK": [("k", np.array([2], np.int64))], "Gather": [("i", np.array([3, 0], np.int64))],
             "ReduceSum": [("axes", np.array([1], np.int64))], "Max": [("b", a[::-1].copy())],
             "Concat": [("b", a)], "ScatterElements": [("i", np.zeros((1, 8), np.int64)), ("u", a[:1])]}.get(op, [])
    attrs = {"Concat": {"axis": 0}, "Transpose": {"perm": [1, 0]}}.get(op, {})
    outs = ["y", "yi"] if op == "TopK" else ["y"]
    inits = [onnx.numpy_helper.from_array(v, n) for n, v in extra]
    node = helper.make_node(op, ["a"] + [n for n, _ in extra], outs, **attrs)
    graph = helper.make_graph([node], "op", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [4, 8])],
                              [helper.make_value_info(o, onnx.TypeProto()) for o in outs], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", targets.CANN_OPSET)], ir_version=8)
    return model.SerializeToString(), {"a": a}


@pytest.mark.parametrize("op", HOST_ONLY)
def test_ops_without_a_cann_kernel_stay_on_the_cpu(op, tmp_path):
    """The ops CANN_EP_KERNELS leaves out run on the CPU (so the cann target must avoid them)."""
    assert op not in targets.CANN_EP_KERNELS
    data, feeds = host_only_model(op)
    assert placement(data, feeds, tmp_path).get(op) == {"CPUExecutionProvider"}


@pytest.mark.parametrize("op", ["Cast", "Reshape"])
def test_opset_20_versions_have_no_cann_kernel(op, tmp_path):
    """Why the cann target exports opset 18: Cast-19 and Reshape-19 fall back to the CPU."""
    data, feeds = single_op(op, TensorProto.FLOAT, opset=20)
    assert placement(data, feeds, tmp_path).get(op) == {"CPUExecutionProvider"}


@pytest.mark.parametrize("op", ["Exp", "Gemm"])
def test_float32_versions_without_a_cann_kernel_stay_on_the_cpu(op, tmp_path):
    """Exp and Gemm have CANN kernels for float16 only."""
    data, feeds = single_op(op, TensorProto.FLOAT)
    assert placement(data, feeds, tmp_path).get(op) == {"CPUExecutionProvider"}


# ---- launches the operator compiler refuses ------------------------------------------------------

P = ctypes.c_void_p


class Acl:
    """The fake's single-operator API through ctypes, with device buffers freed at the end."""

    def __init__(self):
        self.lib = ctypes.CDLL("libascendcl.so")
        lib = self.lib
        lib.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
        lib.aclrtFree.argtypes = [P]
        lib.aclCreateTensorDesc.restype = P
        lib.aclCreateTensorDesc.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.POINTER(ctypes.c_int64), ctypes.c_int]
        lib.aclDestroyTensorDesc.argtypes = [P]
        lib.aclCreateDataBuffer.restype = P
        lib.aclCreateDataBuffer.argtypes = [P, ctypes.c_size_t]
        lib.aclDestroyDataBuffer.argtypes = [P]
        lib.aclopCreateAttr.restype = P
        lib.aclopDestroyAttr.argtypes = [P]
        lib.aclopSetAttrBool.argtypes = [P, ctypes.c_char_p, ctypes.c_uint8]
        lib.aclopSetAttrInt.argtypes = [P, ctypes.c_char_p, ctypes.c_int64]
        lib.aclopCompileAndExecute.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.POINTER(P), ctypes.POINTER(P),
                                               ctypes.c_int, ctypes.POINTER(P), ctypes.POINTER(P), P, ctypes.c_int,
                                               ctypes.c_int, ctypes.c_char_p, P]
        lib.aclGetRecentErrMsg.restype = ctypes.c_char_p
        self.blocks, self.descs, self.bufs = [], [], []

    def operand(self, dtype: int, dims, fmt: int = 2, host=None):
        arr = (ctypes.c_int64 * len(dims))(*dims)
        desc = self.lib.aclCreateTensorDesc(dtype, len(dims), arr, fmt)
        nbytes = int(np.prod(dims)) * {0: 4, 1: 2, 3: 4, 9: 8}[dtype]
        if host is None:
            p = P()
            assert self.lib.aclrtMalloc(ctypes.byref(p), max(nbytes, 1), 0) == 0
            self.blocks.append(p)
            data = p
        else:
            data = host.ctypes.data
        buf = self.lib.aclCreateDataBuffer(data, nbytes)
        self.descs.append(desc)
        self.bufs.append(buf)
        return desc, buf

    def launch(self, op: str, inputs, outputs, attrs=()):
        attr = self.lib.aclopCreateAttr()
        for name, kind, value in attrs:
            getattr(self.lib, f"aclopSetAttr{kind}")(attr, name.encode(), value)
        descs_in = (P * len(inputs))(*[d for d, _ in inputs])
        bufs_in = (P * len(inputs))(*[b for _, b in inputs])
        descs_out = (P * len(outputs))(*[d for d, _ in outputs])
        bufs_out = (P * len(outputs))(*[b for _, b in outputs])
        status = self.lib.aclopCompileAndExecute(op.encode(), len(inputs), descs_in, bufs_in, len(outputs),
                                                 descs_out, bufs_out, attr, 0, 0, None, None)
        message = (self.lib.aclGetRecentErrMsg() or b"").decode()
        self.lib.aclopDestroyAttr(attr)
        return status, message

    def close(self):
        for d in self.descs:
            self.lib.aclDestroyTensorDesc(d)
        for b in self.bufs:
            self.lib.aclDestroyDataBuffer(b)
        for p in self.blocks:
            self.lib.aclrtFree(p)


@pytest.fixture
def acl():
    a = Acl()
    yield a
    a.close()


def test_matmul_with_disagreeing_k_is_refused(acl):
    status, message = acl.launch("BatchMatMul", [acl.operand(0, [4, 8]), acl.operand(0, [7, 3])],
                                 [acl.operand(0, [4, 3])])
    assert status == 100021  # ACL_ERROR_OP_INPUT_NOT_MATCH
    assert "BatchMatMul" in message and "disagree on K (8 vs 7)" in message


def test_output_descriptor_of_the_wrong_shape_is_refused(acl):
    status, message = acl.launch("BatchMatMul", [acl.operand(0, [4, 8]), acl.operand(0, [8, 3])],
                                 [acl.operand(0, [4, 4])], [("adj_x1", "Bool", 0), ("adj_x2", "Bool", 0)])
    assert status == 100022 and "output y is [4, 4], the operator gives [4, 3]" in message


def test_cast_whose_dst_type_is_not_the_output_type_is_refused(acl):
    status, message = acl.launch("Cast", [acl.operand(0, [4])], [acl.operand(1, [4])], [("dst_type", "Int", 3)])
    assert status == 100023 and "'dst_type' 3 is not the output's type float16" in message


def test_mixed_input_types_are_refused(acl):
    status, message = acl.launch("Add", [acl.operand(0, [4]), acl.operand(1, [4])], [acl.operand(0, [4])])
    assert status == 100021 and "x2 is float16, x1 float" in message


def test_host_memory_as_an_operand_is_refused(acl):
    host = np.zeros(4, np.float32)
    status, message = acl.launch("Neg", [acl.operand(0, [4], host=host)], [acl.operand(0, [4])])
    assert status == 100000 and "input 0" in message and "not inside one device allocation" in message


def test_format_other_than_nd_is_refused(acl):
    status, message = acl.launch("Neg", [acl.operand(0, [4], fmt=0)], [acl.operand(0, [4])])
    assert status == 100027 and "format 0" in message


def test_unknown_operator_type_is_refused(acl):
    status, message = acl.launch("SoftmaxV2", [acl.operand(0, [4])], [acl.operand(0, [4])])
    assert status == 100024 and "no host implementation" in message and "BatchMatMul" in message


def test_a_successful_launch_leaves_no_error_message(acl):
    status, message = acl.launch("Neg", [acl.operand(0, [4])], [acl.operand(0, [4])])
    assert status == 0 and message == ""  # ORT's CANN kernels fail a node whenever one is pending
