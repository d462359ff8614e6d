"""The MoE op family when phase 1 of an ACLNN operator rejects a call (a CANN whose limits differ:
FAKE_ACLNN_REJECT): the node takes its host fallback, equal to the CPU EP bit for bit, remembers
the rejection (phase 1 is not asked again) and says why once. For MoeRoutedExperts the rejected
operator is one in the middle of its chain."""

from __future__ import annotations

import numpy as np
import pytest

from tests.cann import test_grouped_matmul_cann as gmm
from tests.cann import test_moe_finalize_routing_v2_cann as fin
from tests.cann import test_moe_init_routing_v3_cann as v3
from tests.cann import test_moe_routed_experts_cann as experts
from tests.cann import test_moe_token_permute_cann as tp
from tests.cann.helpers import (
    assert_bits_equal,
    calls,
    fresh_session,
    moe_kernels_on_this_soc,
    run,
    session,
    skip_without_cann,
)

skip_without_cann()


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
    if not moe_kernels_on_this_soc():
        pytest.skip("no native calls on this SoC")
    acl, data, feeds = CASES[op]
    monkeypatch.setenv("FAKE_ACLNN_REJECT", f"{acl}=561002")
    s = fresh_session(data, log_severity=2)
    capfd.readouterr()
    before = (calls(acl + "GetWorkspaceSize"), calls(acl))
    ref = run(session(data, "cpu"), feeds)
    for _ in range(3):
        assert_bits_equal(run(s, feeds), ref)
    assert (calls(acl + "GetWorkspaceSize"), calls(acl)) == (before[0] + 1, before[1])
    err = capfd.readouterr().err
    said = (f"{op} runs on the host fallback: {acl}GetWorkspaceSize failed with ACL/ACLNN status 561002: "
            f"fake CANN: {acl}GetWorkspaceSize: rejected by FAKE_ACLNN_REJECT")
    assert err.count(said) == 1, err
