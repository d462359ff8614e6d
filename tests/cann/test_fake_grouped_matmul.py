"""The fake aclnnGroupedMatmulV4's W8A8, W8A16 and W4A16 argument rules, with the status codes and messages of
ops-transformer's gmm/grouped_matmul/op_host/op_api/aclnn_grouped_matmul.cpp
(CheckFunctionQuantParams, CheckGroupedMatmulQuant, CheckQuantParamsDtype, CheckPerTokenScale,
CheckGroupedMatmulAntiQuant;
the operator's docs/aclnnGroupedMatmulV4.md defers to these): what the CANN kernel's W8A8 blocker
keeps away from the operator is refused by the fake as the operator refuses it."""

from __future__ import annotations

import ctypes

import pytest

from tests.cann.test_fake_runtime import I64, P, libs, tensor

FLOAT, FLOAT16, INT8, INT32, INT64, BFLOAT16, INT4 = 0, 1, 2, 3, 9, 27, 29
SIZES = {FLOAT: 4, FLOAT16: 2, INT8: 1, INT32: 4, INT64: 8, BFLOAT16: 2, INT4: 0.5}
M, K, N, E = 6, 16, 8, 2


@pytest.fixture(autouse=True)
def _on_a_910b(monkeypatch):
    """These rules are the ascend910b / ascend910_93 ones (Ascend310P refuses every quantized form)."""
    monkeypatch.delenv("FAKE_ACL_SOC_NAME", raising=False)


def w8a8_status(*, x=INT8, w=INT8, y=BFLOAT16, scale=BFLOAT16, per_token=FLOAT, per_token_dims=(M,), offset=False,
                bias=INT32, aq_scale=None, aq_offset=None, aq_dims=(E, N)):
    """Phase 1 (and, when it accepts, phase 2) of the fake's aclnnGroupedMatmulV4 (W8A8 by default)
    with device tensors; scale / per_token / bias / aq_scale / aq_offset None: absent."""
    acl, nn, op = libs()
    nn.aclCreateTensorList.restype = P
    nn.aclCreateTensorList.argtypes = [ctypes.POINTER(P), ctypes.c_uint64]
    nn.aclDestroyTensorList.argtypes = [P]
    blocks, tensors, lists = [], [], []

    def arg(dims, dtype, as_list=True):
        if dtype is None:
            return None
        p = P()
        assert acl.aclrtMalloc(ctypes.byref(p), max(1, int(_count(dims) * SIZES[dtype] + 0.5)), 0) == 0
        blocks.append(p)
        t = tensor(nn, list(dims), dtype, p)
        if not as_list:
            tensors.append(t)
            return t
        lst = nn.aclCreateTensorList((P * 1)(t), 1)  # the list owns t from now on
        lists.append(lst)
        return lst

    args = [arg((M, K), x), arg((E, K, N), w), arg((E, N), bias), arg((E, N), scale),
            arg((E, N), FLOAT) if offset else None, arg(aq_dims, aq_scale), arg(aq_dims, aq_offset),
            arg(per_token_dims, per_token),
            arg((E,), INT64, as_list=False), None, None, None]
    out = arg((M, N), y)
    fn = op.aclnnGroupedMatmulV4GetWorkspaceSize
    fn.argtypes = [P] * 12 + [I64] * 4 + [P, P, P, ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
    ws, ex = ctypes.c_uint64(), P()
    status = fn(*args, 3, 0, 1, 0, out, None, None, ctypes.byref(ws), ctypes.byref(ex))
    message = (acl.aclGetRecentErrMsg() or b"").decode()
    if status == 0:  # the executor is single-use: run it (the group list is all zeros: no rows)
        stream, work = P(), P()
        assert acl.aclrtCreateStream(ctypes.byref(stream)) == 0
        assert acl.aclrtMalloc(ctypes.byref(work), ws.value, 0) == 0
        op.aclnnGroupedMatmulV4.argtypes = [P, ctypes.c_uint64, P, P]
        assert op.aclnnGroupedMatmulV4(work, ws.value, ex, stream) == 0
        assert acl.aclrtSynchronizeStream(stream) == 0
        acl.aclrtFree(work)
        acl.aclrtDestroyStream(stream)
    for lst in lists:
        nn.aclDestroyTensorList(lst)
    for t in tensors:  # the tensors in no list (a list destroys its own)
        nn.aclDestroyTensor(t)
    for p in blocks:
        acl.aclrtFree(p)
    return status, message


def _count(dims) -> int:
    n = 1
    for d in dims:
        n *= d
    return n


@pytest.mark.parametrize("y,scale", [(BFLOAT16, BFLOAT16), (FLOAT16, FLOAT)], ids=["bfloat16", "float16"])
def test_w8a8_pairings_accepted(y, scale):
    assert w8a8_status(y=y, scale=scale) == (0, "")
    assert w8a8_status(y=y, scale=scale, per_token=None)[0] == 0  # per-channel


REJECTED = [
    (dict(y=FLOAT16, scale=BFLOAT16), "per-token quant case only supports scale data type bfloat16 with output "
     "data type bfloat16, or scale with data type float32 when output is float16, but now scale[0] has data type "
     "bfloat16 and output has data type float16!"),
    (dict(y=BFLOAT16, scale=FLOAT, per_token=None), "per-channel quant case only supports scale data type"),
    (dict(y=FLOAT), "Expect yDtype is int8, int32, float16 or bfloat16 in quant case, but now y[0] dtype is float"),
    (dict(scale=None), "GMM: scale must not be nullptr in quant, but now is nullptr."),
    (dict(offset=True), "GMM: offset must be nullptr in quant, but now is not nullptr."),
    (dict(per_token=BFLOAT16), "per-token quant case only support perTokenScale with data type float32, but "
     "perTokenScale[0] has data type bfloat16!"),
    (dict(per_token_dims=(M + 1,)), f"MDim of perTokenScaleOptional should be equal with MDim[{M}] of x."),
]


@pytest.mark.parametrize("args,message", REJECTED, ids=[m[:40] for _, m in REJECTED])
def test_w8a8_rules_rejected_with_the_operators_code(args, message):
    status, got = w8a8_status(**args)
    assert status == 161002 and message in got, got


W8A16 = dict(x=BFLOAT16, w=INT8, y=BFLOAT16, scale=None, per_token=None, bias=FLOAT, aq_scale=BFLOAT16,
             aq_offset=BFLOAT16)


def test_w8a16_accepted_per_channel_only():
    assert w8a16_ok()
    status, message = w8a8_status(**{**W8A16, "aq_dims": (E, 4, N)})
    assert status == 161002 and "antiquantScale Dim must be 2, but now is 3." in message, message


def test_w4a16_accepted_per_channel_and_per_group():
    for x in (BFLOAT16, FLOAT16):
        w4 = {**W8A16, "x": x, "y": x, "w": INT4, "aq_scale": x, "aq_offset": x, "bias": None}
        assert w8a8_status(**w4) == (0, "")
        assert w8a8_status(**{**w4, "aq_dims": (E, 4, N)}) == (0, "")


def w8a16_ok():
    return w8a8_status(**W8A16) == (0, "")


ANTIQUANT_REJECTED = [
    (dict(aq_offset=None), "GMM Xtype:bfloat16 Wtype:int8: antiquantOffset must not be nullptr in antiquant, "
     "but now is nullptr."),
    (dict(aq_scale=FLOAT16), "GMM: antiquantScale dtype does not match with x dtype[bfloat16]."),
    (dict(scale=BFLOAT16), "Detected antiquant, but quant inputs is not empty!"),
    (dict(aq_dims=(E, 3, N)), "antiquantScale Dim must be 2, but now is 3."),
    (dict(w=INT4, aq_dims=(E, 3, N)), "perGroupNum must be larger than 0, and can evenly divided by K[16] in "
     "A16W4-pergroup case, but now perGroupNum is 3."),
    (dict(w=INT4, aq_offset=None), "GMM Xtype:bfloat16 Wtype:int4: antiquantOffset must not be nullptr"),
    (dict(w=INT4, aq_dims=(E, N + 1)), "Invalid antiquantScale"),
    (dict(x=FLOAT, y=FLOAT, aq_scale=FLOAT, aq_offset=FLOAT), "there is no matching xDtype and weightDtype pattern"),
]


@pytest.mark.parametrize("args,message", ANTIQUANT_REJECTED, ids=[m[:40] for _, m in ANTIQUANT_REJECTED])
def test_w8a16_rules_rejected_with_the_operators_code(args, message):
    status, got = w8a8_status(**{**W8A16, **args})
    assert status == 161002 and message in got, got
