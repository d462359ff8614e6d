"""The MoE op family when phase 1 of an ACLNN operator rejects a call (a CANN whose limits differ:
FAKE_ACLNN_REJECT): the node takes its host fallback, equal to the CPU EP bit for bit, remembers
the rejection (phase 1 is not asked again) and says why once. For MoeRoutedExperts the rejected
operator is one in the middle of its chain."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cann import helpers as cann
from tests.cann import test_grouped_matmul_cann as gmm
from tests.cann import test_moe_finalize_routing_v2_cann as fin
from tests.cann import test_moe_init_routing_v3_cann as v3
from tests.cann import test_moe_routed_experts_cann as experts
from tests.cann import test_moe_token_permute_cann as tp


def _cases():
    rng = np.random.default_rng(11)
    g = gmm.case(rng, np.float16)
    e = experts.case(rng)
    i = v3.case(rng)
    f = fin.case(rng)
    p = {"tokens": tp.tokens(rng, 6, 16, "float16"), "indices": rng.integers(0, 4, (6, 2))}
    u = tp.unpermute_case(rng, "float16", "float16")
    r = tp.init_case(rng, "float")
    return {
        "GroupedMatmul": ("aclnnGroupedMatmulV4", gmm.gmm_model(g["x"], g["w"], g["g"]), g),
        "MoeRoutedExperts": ("aclnnSwiGlu", experts.experts_model(e), e),
        "MoeInitRoutingV3": ("aclnnMoeInitRoutingV3", v3.v3_model(i, expert_num=6), i),
        "MoeFinalizeRoutingV2": ("aclnnMoeFinalizeRoutingV2", fin.finalize_model(f), f),
        "MoeTokenPermute": ("aclnnMoeTokenPermute",
                            tp.node_model("MoeTokenPermute", p, ["tokens", "indices"], ["pt", "si"]), p),
        "MoeTokenUnpermute": ("aclnnMoeTokenUnpermute",
                              tp.node_model("MoeTokenUnpermute", u, ["pt", "si", "probs"], ["y"]), u),
        "MoeInitRouting": ("aclnnMoeInitRouting",
                           tp.node_model("MoeInitRouting", r, ["x", "row_idx", "expert_idx"], ["ex", "eri", "eei"],
                                         active_num=5), r),
    }


CASES = _cases()


@pytest.mark.parametrize("op", list(CASES))
def test_phase1_rejection_falls_back_once_per_node(op, monkeypatch, capfd):
    if not cann.moe_kernels_on_this_soc():
        pytest.skip("no native calls on this SoC")
    acl, data, feeds = CASES[op]
    monkeypatch.setenv("FAKE_ACLNN_REJECT", f"{acl}=561002")
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = (cann.calls(acl + "GetWorkspaceSize"), cann.calls(acl))
    ref = cann.run(cann.session(data, "cpu"), feeds)
    for _ in range(3):
        cann.assert_bits_equal(cann.run(s, feeds), ref)
    assert (cann.calls(acl + "GetWorkspaceSize"), cann.calls(acl)) == (before[0] + 1, before[1])
    err = capfd.readouterr().err
    said = (f"{op} runs on the host fallback: {acl}GetWorkspaceSize failed with ACL/ACLNN status 561002: "
            f"fake CANN: {acl}GetWorkspaceSize: rejected by FAKE_ACLNN_REJECT")
    assert err.count(said) == 1, err


REJECTED_IN_PHASE_1 = {  # the statuses each operator's phase 1 returns for arguments it does not take
    "GroupedMatmul": ("aclnnGroupedMatmulV4", 561103),  # aclnn_grouped_matmul.cpp: a null l0 result (tiling)
    "MoeRoutedExperts": ("aclnnGroupedMatmulV4", 561103),  # the chain's gate/up call
    "MoeTokenPermute": ("aclnnMoeTokenPermute", 561000),  # aclnn_moe_token_permute.cpp: ACLNN_ERR_INNER
}


@pytest.mark.parametrize("op", list(REJECTED_IN_PHASE_1))
def test_each_operators_phase1_statuses_fall_back(op, monkeypatch, capfd):
    acl, status = REJECTED_IN_PHASE_1[op]
    chain = ("aclnnMoeInitRoutingV3", "aclnnGroupedMatmulV4", "aclnnPermute", "aclnnSwiGlu", "aclnnMoeFinalizeRoutingV2")
    if not cann.moe_kernels_on_this_soc(*(chain if op == "MoeRoutedExperts" else (acl,))):
        pytest.skip("no native calls on this SoC")
    _, data, feeds = CASES[op]
    monkeypatch.setenv("FAKE_ACLNN_REJECT", f"{acl}={status}")
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    ref = cann.run(cann.session(data, "cpu"), feeds)
    before = cann.calls(acl + "GetWorkspaceSize")
    for _ in range(2):
        cann.assert_bits_equal(cann.run(s, feeds), ref)
    assert cann.calls(acl + "GetWorkspaceSize") == before + 1  # rejected once, remembered
    err = capfd.readouterr().err
    assert err.count(f"{op} runs on the host fallback: {acl}GetWorkspaceSize failed with ACL/ACLNN status "
                     f"{status}") == 1, err


def test_init_routing_v3_limits_are_checked_before_the_call(capfd):
    """aclnnMoeInitRoutingV3 refuses expert_end > 10240 only in phase 2 (its phase 1 ignores its
    launcher's status; the fake defers it too), where nothing can fall back: the kernel checks the
    limit first, falls back with the reason logged once, and never calls the operator."""
    rng = np.random.default_rng(5)
    feeds = v3.case(rng)
    data = v3.v3_model(feeds, expert_num=10241)
    s = cann.fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = cann.calls("aclnnMoeInitRoutingV3GetWorkspaceSize")
    ref = cann.run(cann.session(data, "cpu"), feeds)
    for _ in range(2):
        cann.assert_bits_equal(cann.run(s, feeds), ref)
    assert cann.calls("aclnnMoeInitRoutingV3GetWorkspaceSize") == before
    err = capfd.readouterr().err
    why = "aclnnMoeInitRoutingV3 takes expert_end <= 10240, got 10241"
    assert err.count(f"MoeInitRoutingV3 runs on the host fallback: {why}") == 1, err


def test_fake_init_routing_v3_defers_its_limits_to_phase_2(monkeypatch):
    """The fake as the operator: phase 1 accepts expert_num 10241, phase 2 fails with 561002."""
    import ctypes

    monkeypatch.delenv("FAKE_ACL_SOC_NAME", raising=False)  # a chip with its kernels

    from tests.cann.test_fake_runtime import I64, P, libs, tensor

    acl, nn, op = libs()
    nn.aclCreateIntArray.restype = P
    nn.aclCreateIntArray.argtypes = [ctypes.POINTER(I64), ctypes.c_uint64]
    nn.aclDestroyIntArray.argtypes = [P]
    dev, stream = P(), P()
    assert acl.aclrtMalloc(ctypes.byref(dev), 1 << 18, 0) == 0 and acl.aclrtCreateStream(ctypes.byref(stream)) == 0
    at = lambda off: ctypes.c_void_p(dev.value + off)  # noqa: E731
    n, k, h, e = 2, 2, 8, 10241
    ts = [tensor(nn, [n, h], 0, at(0)), tensor(nn, [n, k], 3, at(1024)), tensor(nn, [n * k, h], 0, at(2048)),
          tensor(nn, [n * k], 3, at(4096)), tensor(nn, [e], 9, at(8192)), tensor(nn, [n * k], 0, at(6144))]
    rng = nn.aclCreateIntArray((I64 * 2)(0, e), 2)
    fn = op.aclnnMoeInitRoutingV3GetWorkspaceSize
    fn.argtypes = [P, P, P, P] + [I64] * 5 + [ctypes.c_bool, I64, P, I64] + [P] * 4 + [
        ctypes.POINTER(ctypes.c_uint64), ctypes.POINTER(P)]
    ws, ex = ctypes.c_uint64(), P()
    assert fn(ts[0], ts[1], None, None, n * k, 0, e, 0, 1, True, -1, rng, 0, ts[2], ts[3], ts[4], ts[5],
              ctypes.byref(ws), ctypes.byref(ex)) == 0
    op.aclnnMoeInitRoutingV3.argtypes = [P, ctypes.c_uint64, P, P]
    work = P()
    if ws.value:
        assert acl.aclrtMalloc(ctypes.byref(work), ws.value, 0) == 0
    status = op.aclnnMoeInitRoutingV3(work, ws.value, ex, stream)  # queued with FAKE_ACL_ASYNC=1
    assert (status or acl.aclrtSynchronizeStream(stream)) == 561002
    assert "expert_end should be less than or equal to 10240" in acl.aclGetRecentErrMsg().decode()  # read: cleared
    if ws.value:
        acl.aclrtFree(work)
    for t in ts:
        nn.aclDestroyTensor(t)
    nn.aclDestroyIntArray(rng)
    acl.aclrtDestroyStream(stream)
    acl.aclrtFree(dev)
