"""The fake CANN runtime is strict, so that tests passing through it mean something: a host
pointer or a wrong size where device memory belongs is refused with ACLNN's error code, a host
read of device memory crashes, the kernels leave no tensor or executor behind, the operators'
tiling rejects what the real tiling rejects (with its code and message), and the strict switches
(FAKE_ACL_D2D_ALIGN, FAKE_ACL_PINNED_ONLY, FAKE_ACL_ASYNC, FAKE_ACL_SOC_NAME) behave as
docs/ascend.md says."""

from __future__ import annotations

import ctypes
import subprocess
import sys

import numpy as np
import pytest

P = ctypes.c_void_p
I64 = ctypes.c_int64


@pytest.fixture(autouse=True)
def _switches_as_each_test_sets_them(monkeypatch):
    """These tests check the fake itself: the strict switches of a strict CI run are off here
    unless a test sets them."""
    for name in ("FAKE_ACL_SOC_NAME", "FAKE_ACL_D2D_ALIGN", "FAKE_ACL_PINNED_ONLY", "FAKE_ACLNN_REJECT"):
        monkeypatch.delenv(name, raising=False)


def libs():
    acl = ctypes.CDLL("libascendcl.so")
    nn = ctypes.CDLL("libnnopbase.so")
    op = ctypes.CDLL("libopapi.so")
    acl.aclrtMalloc.argtypes = [ctypes.POINTER(P), ctypes.c_size_t, ctypes.c_int]
    acl.aclrtFree.argtypes = [P]
    acl.aclrtCreateStream.argtypes = [ctypes.POINTER(P)]
    acl.aclGetRecentErrMsg.restype = ctypes.c_char_p
    acl.aclrtMallocHost.argtypes = [ctypes.POINTER(P), ctypes.c_size_t]
    acl.aclrtFreeHost.argtypes = [P]
    acl.aclrtMemcpyAsync.argtypes = [P, ctypes.c_size_t, P, ctypes.c_size_t, ctypes.c_int, P]
    acl.aclrtSynchronizeStream.argtypes = [P]
    acl.aclrtGetSocName.restype = ctypes.c_char_p
    acl.FakeAclPendingTasks.argtypes = [P]
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


def aligned_host(nbytes, align=32):
    """A NumPy buffer and an ``align``-byte aligned address inside it."""
    buf = np.zeros(nbytes + align, np.uint8)
    return buf, buf.ctypes.data + (-buf.ctypes.data) % align


def test_host_pointer_as_device_tensor_is_refused():
    acl, nn, op = libs()
    host, address = aligned_host(6 * 8 * 2)
    status, message = rerouting_status(acl, nn, op, address)
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
    from tests.cann.test_moe_re_routing_cann import compare, random_case

    nn = ctypes.CDLL("libnnopbase.so")
    before = nn.FakeAclnnLiveTensors()
    compare(random_case(np.random.default_rng(0), np.float16))
    assert nn.FakeAclnnLiveTensors() == before


def test_tensor_data_must_be_32_byte_aligned():
    acl, nn, _ = libs()
    p = P()
    assert acl.aclrtMalloc(ctypes.byref(p), 256, 0) == 0
    assert tensor(nn, [4], 0, p.value + 32) is not None
    assert not tensor(nn, [4], 0, p.value + 16)
    assert "is not 32-byte aligned" in acl.aclGetRecentErrMsg().decode()
    acl.aclrtFree(p)


def gating_status(*, experts=16, k=2, k_group=1, group_count=1, mode=0, norm_type=0, hash_op=True):
    """Phase 1 of the fake's gating operators with device tensors of the right shapes."""
    acl, nn, _ = libs()
    lib = ctypes.CDLL("libcust_opapi.so" if hash_op else "libopapi.so")
    name = "aclnnMoeGatingTopKHashGetWorkspaceSize" if hash_op else "aclnnMoeGatingTopKGetWorkspaceSize"
    fn = getattr(lib, name)
    ints = [I64] * 6
    fn.argtypes = [P, P] + ([P, P] if hash_op else []) + ints + [ctypes.c_bool, ctypes.c_double, ctypes.c_double,
                                                                  P, P, P, ctypes.POINTER(ctypes.c_uint64),
                                                                  ctypes.POINTER(P)]
    blocks, ts = [], []
    for dims, dtype, size in (([5, experts], 0, 4), ([5, k], 0, 4), ([5, k], 3, 4), ([5, experts], 0, 4)):
        p = P()
        assert acl.aclrtMalloc(ctypes.byref(p), int(np.prod(dims)) * size, 0) == 0
        blocks.append(p)
        ts.append(tensor(nn, dims, dtype, p))
    ws, ex = ctypes.c_uint64(), P()
    hash_args = [None, None] if hash_op else []
    status = fn(ts[0], None, *hash_args, k, k_group, group_count, mode, 0, norm_type, False, 1.0, 1e-20, *ts[1:],
                ctypes.byref(ws), ctypes.byref(ex))
    message = (acl.aclGetRecentErrMsg() or b"").decode()  # null when there is none, as CANN
    if status == 0:  # run the executor (it is single-use) on a stream
        stream = P()
        assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
        work = P()
        assert acl.aclrtMalloc(ctypes.byref(work), ws.value, 0) == 0
        run = getattr(lib, name.replace("GetWorkspaceSize", ""))
        run.argtypes = [P, ctypes.c_uint64, P, P]
        assert run(work, ws.value, ex, stream) == 0 and acl.aclrtSynchronizeStream(stream) == 0
        acl.aclrtFree(work)
        acl.aclrtDestroyStream(stream)
    for t in ts:
        nn.aclDestroyTensor(t)
    for p in blocks:
        acl.aclrtFree(p)
    return status, message


# cann-recipes-infer moe_gating_top_k_hash_tiling.cpp / ops-transformer moe_gating_top_k_tiling.cpp
TILING = [(dict(norm_type=2, group_count=2, k_group=2), "norm type softplus only supported when groupCount equals 1, "
           "but got 2."),
          (dict(k_group=3, group_count=2), "k_group is: 3, but should not greater than 2."),
          (dict(k=5, k_group=1, group_count=4), "k is: 5, but should be smaller than 4."),
          (dict(experts=2056, k=2), "expert count is: 2056, but should not greater than 2048."),
          (dict(experts=8, group_count=8, k_group=8, mode=1), "group expert count is: 1, if group select mode is: 1, "
           "group expert count should be greater than 1."),
          (dict(experts=1980, group_count=20, k_group=4, k=8), "group count * group expert count align is: 2560, "
           "but should not greater than 2048."),
          (dict(norm_type=2, hash_op=False), "norm type is: 2, but currently only support 0, 1.")]


@pytest.mark.parametrize("args,message", TILING)
def test_gating_tiling_rejections(args, message):
    status, got = gating_status(**args)
    assert status == 561002 and got.endswith(f"{message} (status 561002)"), got


@pytest.mark.parametrize("args", [dict(norm_type=2), dict(experts=4, group_count=2, k_group=2),
                                  dict(experts=1980, group_count=20, k_group=20, k=8)])
def test_gating_tiling_accepts(args):
    assert gating_status(**args)[0] == 0


def test_d2d_alignment_switch(monkeypatch):
    acl, _, _ = libs()
    p, stream = P(), P()
    assert acl.aclrtMalloc(ctypes.byref(p), 256, 0) == 0 and acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMemcpyAsync(p.value + 128, 32, p.value + 4, 32, 3, stream) == 0  # no switch: allowed
    monkeypatch.setenv("FAKE_ACL_D2D_ALIGN", "64")
    assert acl.aclrtMemcpyAsync(p.value + 128, 32, p.value + 4, 32, 3, stream) == 107008
    assert "not 64-byte aligned" in acl.aclGetRecentErrMsg().decode()
    assert acl.aclrtMemcpyAsync(p.value + 128, 32, p.value + 64, 32, 3, stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0
    acl.aclrtDestroyStream(stream)
    acl.aclrtFree(p)


def test_pinned_only_switch(monkeypatch):
    acl, _, _ = libs()
    p, stream, pinned = P(), P(), P()
    assert acl.aclrtMalloc(ctypes.byref(p), 64, 0) == 0 and acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMallocHost(ctypes.byref(pinned), 64) == 0
    pageable = np.zeros(64, np.uint8)
    monkeypatch.setenv("FAKE_ACL_PINNED_ONLY", "1")
    assert acl.aclrtMemcpyAsync(p, 64, pageable.ctypes.data, 64, 1, stream) == 107016
    assert "is not aclrtMallocHost memory" in acl.aclGetRecentErrMsg().decode()
    assert acl.aclrtMemcpyAsync(pageable.ctypes.data, 64, p, 64, 2, stream) == 107016
    assert acl.aclrtMemcpyAsync(p, 64, pinned, 64, 1, stream) == 0
    assert acl.aclrtMemcpyAsync(pinned, 64, p, 64, 2, stream) == 0
    assert acl.aclrtSynchronizeStream(stream) == 0
    acl.aclrtFreeHost(pinned)
    acl.aclrtDestroyStream(stream)
    acl.aclrtFree(p)


def test_async_switch_runs_work_at_synchronize(monkeypatch):
    acl, _, _ = libs()
    p, stream, up, down = P(), P(), P(), P()
    assert acl.aclrtMalloc(ctypes.byref(p), 64, 0) == 0 and acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    assert acl.aclrtMallocHost(ctypes.byref(up), 64) == 0 and acl.aclrtMallocHost(ctypes.byref(down), 64) == 0
    ctypes.memmove(up, bytes(range(64)), 64)
    monkeypatch.setenv("FAKE_ACL_ASYNC", "1")
    assert acl.aclrtMemcpyAsync(p, 64, up, 64, 1, stream) == 0
    assert acl.aclrtMemcpyAsync(down, 64, p, 64, 2, stream) == 0
    assert acl.FakeAclPendingTasks(stream) == 2
    assert ctypes.string_at(down, 64) == b"\xa5" * 64  # not there before the synchronisation
    assert acl.aclrtSynchronizeStream(stream) == 0 and acl.FakeAclPendingTasks(stream) == 0
    assert ctypes.string_at(down, 64) == bytes(range(64))
    # a staging buffer freed while a queued copy still reads it fails the stream at synchronize
    assert acl.aclrtMemcpyAsync(p, 64, up, 64, 1, stream) == 0
    assert acl.aclrtFreeHost(up) == 0
    assert acl.aclrtSynchronizeStream(stream) == 107000
    assert "freed while queued" in acl.aclGetRecentErrMsg().decode()
    acl.aclrtFreeHost(down)
    acl.aclrtDestroyStream(stream)
    acl.aclrtFree(p)


def test_soc_name_switch(monkeypatch):
    acl, nn, op = libs()
    acl.aclInit.argtypes = [ctypes.c_char_p]
    initialised = acl.aclInit(None)  # 100002 once the EP of this process initialised ACL
    assert initialised in (0, 100002)
    try:
        assert acl.aclrtGetSocName() == b"Ascend910B1"
        monkeypatch.setenv("FAKE_ACL_SOC_NAME", "Ascend310P3")
        assert acl.aclrtGetSocName() == b"Ascend310P3"
    finally:
        if initialised == 0:
            acl.aclFinalize()
    p = P()
    assert acl.aclrtMalloc(ctypes.byref(p), 6 * 8 * 2, 0) == 0
    status, message = rerouting_status(acl, nn, op, p)
    acl.aclrtFree(p)
    assert status == 561003 and "no kernel for SoC Ascend310P3" in message


def test_soc_name_is_read_after_acl_init():
    """As CANN's runtime: no SoC name before aclInit (the library initialises ACL to read it)."""
    code = """
import ctypes
acl = ctypes.CDLL("libascendcl.so")
acl.aclrtGetSocName.restype = ctypes.c_char_p
acl.aclInit.argtypes = [ctypes.c_char_p]
before = acl.aclrtGetSocName()
first, second = acl.aclInit(None), acl.aclInit(None)
print(before, acl.aclrtGetSocName(), first, second, acl.aclFinalize(), acl.aclFinalize())
"""
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert result.stdout.split() == ["None", "b'Ascend910B1'", "0", "100002", "0", "100037"]
