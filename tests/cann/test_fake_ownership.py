"""The fake CANN runtime owns ACLNN objects as CANN's nnopbase does (opbase
src/nnopbase/common/api/acl_op_api.cpp: aclDestroyTensorList destroys the list's tensors) and aborts
the process, always, on what the real runtime answers with undefined behaviour: a double destroy,
a destroy of a tensor its list owns, a destroy of a handle it never made, a use after destroy. Each
misuse runs in a child process (it aborts); the valid sequences run here."""

from __future__ import annotations

import ctypes
import signal
import subprocess
import sys

import pytest

from tests.cann.test_fake_runtime import P, libs, tensor

PRELUDE = """
import ctypes
from tests.cann.test_fake_runtime import P, libs, tensor
acl, nn, op = libs()
nn.aclCreateTensorList.restype = P
nn.aclCreateTensorList.argtypes = [ctypes.POINTER(P), ctypes.c_uint64]
nn.aclDestroyTensorList.argtypes = [P]
nn.aclCreateIntArray.restype = P
nn.aclCreateIntArray.argtypes = [ctypes.POINTER(ctypes.c_int64), ctypes.c_uint64]
nn.aclDestroyIntArray.argtypes = [P]
dev = P()
assert acl.aclrtMalloc(ctypes.byref(dev), 4096, 0) == 0
def t():
    return P(tensor(nn, [4, 8], 1, dev))
def lst(*ts):
    return P(nn.aclCreateTensorList((P * len(ts))(*ts), len(ts)))
"""


def _aborts(body: str) -> str:
    """Runs PRELUDE + body in a child; asserts it died of SIGABRT; returns its stderr."""
    result = subprocess.run([sys.executable, "-c", PRELUDE + body], capture_output=True, text=True)
    assert result.returncode == -signal.SIGABRT, (result.returncode, result.stderr)
    assert "[fake-cann] ABORT:" in result.stderr
    return result.stderr


@pytest.mark.parametrize("body,says", [
    ("a = t(); nn.aclDestroyTensor(a); nn.aclDestroyTensor(a)", "destroyed twice, or never created"),
    ("a = t(); l = lst(a); nn.aclDestroyTensorList(l); nn.aclDestroyTensor(a)", "destroyed twice, or never created"),
    ("a = t(); l = lst(a); nn.aclDestroyTensor(a)", "belongs to an aclTensorList"),
    ("l = lst(t()); nn.aclDestroyTensorList(l); nn.aclDestroyTensorList(l)", "not a live tensor list"),
    ("nn.aclDestroyTensor(dev)", "never created"),
    ("nn.aclDestroyTensorList(dev)", "never created"),
    ("nn.aclDestroyIntArray(dev)", "never created"),
    ("a = (ctypes.c_int64 * 2)(0, 1); x = nn.aclCreateIntArray(a, 2); nn.aclDestroyIntArray(x); "
     "nn.aclDestroyIntArray(x)", "destroyed twice"),
    ("a = t(); lst(a); lst(a)", "already belongs to another aclTensorList"),
    ("a = t(); nn.aclDestroyTensor(a); lst(a)", "used after destroy"),
    ("acl.aclrtFreeHost.argtypes = [P]; acl.aclrtFreeHost(dev)", "aclrtFreeHost"),
], ids=["tensor twice", "list's tensor after the list", "list's tensor", "list twice", "unknown tensor",
        "unknown list", "unknown int array", "int array twice", "tensor in two lists", "list of a destroyed tensor",
        "free of unknown host memory"])
def test_misuse_aborts(body, says):
    assert says in _aborts(body)


def test_use_after_destroy_in_an_operator_aborts():
    """A destroyed tensor passed to phase 1, or destroyed between the phases, aborts."""
    call = """
op.aclnnSwiGluGetWorkspaceSize.argtypes = [P, ctypes.c_int64, P, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
x, y = P(tensor(nn, [4, 8], 1, dev)), P(tensor(nn, [4, 4], 1, ctypes.c_void_p(dev.value + 1024)))
ws, ex = ctypes.c_uint64(), P()
"""
    assert "used after destroy" in _aborts(call + "nn.aclDestroyTensor(x); "
                                           "op.aclnnSwiGluGetWorkspaceSize(x, -1, y, ctypes.byref(ws), ctypes.byref(ex))")
    assert "run twice" in _aborts(
        call + "assert op.aclnnSwiGluGetWorkspaceSize(x, -1, y, ctypes.byref(ws), ctypes.byref(ex)) == 0\n"
        "op.aclnnSwiGlu.argtypes = [P, ctypes.c_uint64, P, P]\n"
        "s = P(); acl.aclrtCreateStream(ctypes.byref(s))\n"
        "assert op.aclnnSwiGlu(None, ws.value, ex, s) == 0\n"
        "op.aclnnSwiGlu(None, ws.value, ex, s)")  # the executor was released by its phase 2


def test_a_list_destroys_its_tensors():
    acl, nn, op = libs()
    nn.aclCreateTensorList.restype = P
    nn.aclCreateTensorList.argtypes = [ctypes.POINTER(P), ctypes.c_uint64]
    nn.aclDestroyTensorList.argtypes = [P]
    dev = P()
    assert acl.aclrtMalloc(ctypes.byref(dev), 4096, 0) == 0
    before = nn.FakeAclnnLiveTensors()
    ts = [P(tensor(nn, [4, 8], 1, dev)) for _ in range(2)]
    lst = nn.aclCreateTensorList((P * 2)(*ts), 2)
    assert nn.FakeAclnnLiveTensors() == before + 2
    assert nn.aclDestroyTensorList(lst) == 0
    assert nn.FakeAclnnLiveTensors() == before
    assert nn.aclDestroyTensor(None) == 0 and nn.aclDestroyTensorList(None) == 0  # null: a no-op, as CANN's
    acl.aclrtFree(dev)


def test_query_event_status_follows_the_stream(monkeypatch):
    monkeypatch.setenv("FAKE_ACL_ASYNC", "1")
    acl, nn, op = libs()
    for f in ("aclrtCreateEvent", "aclrtCreateStream"):
        getattr(acl, f).argtypes = [ctypes.POINTER(P)]
    acl.aclrtRecordEvent.argtypes = [P, P]
    acl.aclrtQueryEventStatus.argtypes = [P, ctypes.POINTER(ctypes.c_int)]
    acl.aclrtDestroyEvent.argtypes = [P]
    acl.aclrtMallocHost.argtypes = [ctypes.POINTER(P), ctypes.c_size_t]
    acl.aclrtFreeHost.argtypes = [P]
    stream, event, dev, host = P(), P(), P(), P()
    assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0 and acl.aclrtCreateEvent(ctypes.byref(event)) == 0
    assert acl.aclrtMalloc(ctypes.byref(dev), 64, 0) == 0 and acl.aclrtMallocHost(ctypes.byref(host), 64) == 0
    assert acl.aclrtMemcpyAsync(dev, 64, host, 64, 1, stream) == 0
    assert acl.aclrtRecordEvent(event, stream) == 0
    status = ctypes.c_int(-1)
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(status)) == 0 and status.value == 0  # queued
    assert acl.aclrtSynchronizeStream(stream) == 0
    assert acl.aclrtQueryEventStatus(event, ctypes.byref(status)) == 0 and status.value == 1  # ran
    assert acl.aclrtDestroyEvent(event) == 0
    acl.aclrtFreeHost(host)
    acl.aclrtFree(dev)
    acl.aclrtDestroyStream(stream)
