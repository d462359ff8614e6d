"""The fake CANN runtime is strict, so that tests passing through it mean something: a host
pointer or a wrong size where device memory belongs is refused with ACLNN's error code, a host
read of device memory crashes, and the kernels leave no tensor or executor behind."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np

from tests.cann.helpers import skip_without_cann

skip_without_cann()

P = ctypes.c_void_p
I64 = ctypes.c_int64


def libs():
    acl = ctypes.CDLL("libascendcl.so")
    nn = ctypes.CDLL("libnnopbase.so")
    op = ctypes.CDLL("libopapi.so")
    acl.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
    acl.aclrtFree.argtypes = [P]
    acl.aclrtCreateStream.argtypes = [ctypes.POINTER(P)]
    acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
    nn.aclCreateTensor.restype = P
    nn.aclCreateTensor.argtypes = [ctypes.POINTER(I64), ctypes.c_uint64, ctypes.c_int, ctypes.POINTER(I64), I64,
                                   ctypes.c_int, ctypes.POINTER(I64), ctypes.c_uint64, P]
    nn.aclDestroyTensor.argtypes = [P]
    op.aclnnMoeReRoutingGetWorkspaceSize.argtypes = [P, P, P, I64, I64, P, P, P, P, ctypes.POINTER(ctypes.c_uint64),
                                                    ctypes.POINTER(P)]
    return acl, nn, op


def tensor(nn, dims, dtype, data):
    d = (I64 * len(dims))(*dims)
    strides = [1] * len(dims)
    for i in range(len(dims) - 2, -1, -1):
        strides[i] = strides[i + 1] * dims[i + 1]
    return nn.aclCreateTensor(d, len(dims), dtype, (I64 * len(dims))(*strides), 0, 2, d, len(dims), data)


def rerouting_status(acl, nn, op, tokens_data, a=6, h=8, null_tokens=False):
    """aclnnMoeReRoutingGetWorkspaceSize with f16 tokens at ``tokens_data``, the rest on the device."""
    blocks = []

    def dev(n):
        p = P()
        assert acl.aclrtMalloc(ctypes.byref(p), n, 0) == 0
        blocks.append(p)
        return p

    ts = [tensor(nn, [a, h], 1, tokens_data), tensor(nn, [2, 3], 9, dev(48)), tensor(nn, [a, h], 1, dev(a * h * 2)),
          tensor(nn, [a], 0, dev(a * 4)), tensor(nn, [a], 3, dev(a * 4)), tensor(nn, [3], 9, dev(24))]
    ws, ex = ctypes.c_uint64(), P()
    status = op.aclnnMoeReRoutingGetWorkspaceSize(None if null_tokens else ts[0], ts[1], None, 1, 0, *ts[2:], ctypes.byref(ws), ctypes.byref(ex))
    message = acl.aclGetRecentErrMsg().decode()
    for t in ts:
        nn.aclDestroyTensor(t)
    for p in blocks:
        acl.aclrtFree(p)
    return status, message


def test_host_pointer_as_device_tensor_is_refused():
    acl, nn, op = libs()
    host = np.zeros((6, 8), np.float16)
    status, message = rerouting_status(acl, nn, op, host.ctypes.data)
    assert status == 161002
    assert "argument 'tokens'" in message and "not inside one device allocation" in message


def test_wrong_size_is_refused():
    acl, nn, op = libs()
    small = P()
    assert acl.aclrtMalloc(ctypes.byref(small), 6 * 8 * 2 - 1, 0) == 0  # one byte short
    status, message = rerouting_status(acl, nn, op, small)
    acl.aclrtFree(small)
    assert status == 161002 and "not inside one device allocation" in message


def test_null_required_argument_and_tiling_limit():
    acl, nn, op = libs()
    status, message = rerouting_status(acl, nn, op, None, null_tokens=True)
    assert status == 161001 and "argument 'tokens' is null" in message
    p = P()
    assert acl.aclrtMalloc(ctypes.byref(p), 6 * 16384 * 2, 0) == 0
    status, message = rerouting_status(acl, nn, op, p, h=16384)
    acl.aclrtFree(p)
    assert status == 561002 and "H must be in (0, 16384)" in message


def test_host_read_of_device_memory_crashes():
    code = ("import ctypes; acl = ctypes.CDLL('libascendcl.so'); p = ctypes.c_void_p(); "
            "acl.aclrtMalloc.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_int]; "
            "assert acl.aclrtMalloc(ctypes.byref(p), 64, 0) == 0; print('allocated', flush=True); "
            "ctypes.string_at(p, 1)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "allocated" in result.stdout and result.returncode == -11  # SIGSEGV


def test_no_tensor_left_behind_by_the_kernels():
    from tests.cann.test_rerouting_cann import compare, random_case

    nn = ctypes.CDLL("libnnopbase.so")
    before = nn.FakeAclnnLiveTensors()
    compare(random_case(np.random.default_rng(0), np.float16))
    assert nn.FakeAclnnLiveTensors() == before
