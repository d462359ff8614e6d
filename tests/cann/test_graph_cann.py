"""A two-op graph (gating, then re-routing of the routed rows' counts) on the real CANN EP: both
ascend.moe nodes placed on CANN, outputs bit-identical to the CPU EP. Only our nodes are in the
graph: CANN's own operators need CANN's operator compiler, which the fake runtime cannot be."""

from __future__ import annotations

import numpy as np
from onnx import helper

from tests.cann.helpers import assert_bits_equal, model, placement, run, session


def test_gating_then_rerouting_on_cann(tmp_path):
    rng = np.random.default_rng(0)
    gating = helper.make_node("MoeGatingTopKHash", ["x", "bias"], ["w", "idx", "scores"], domain="ascend.moe",
                              k=4, k_group=2, group_count=4, group_select_mode=1, norm_type=1, out_flag=1,
                              routed_scaling_factor=2.5)
    # the routing weights travel with the tokens as [A, k] scales (copy fallback) and the scores
    # as tokens of their own re-routing (float: copy fallback too)
    rerouting = helper.make_node("MoeReRouting", ["tokens", "counts", "w"], ["pt", "ps", "pi", "en"],
                                 domain="ascend.moe")
    inputs = {"x": (np.float16, ["A", 32]), "bias": (np.float16, [32]), "tokens": (np.int8, ["A", 64]),
              "counts": (np.int32, [2, 4])}
    data = model([gating, rerouting], inputs, ["idx", "scores", "pt", "ps", "pi", "en"])
    a = 10
    counts = np.array([[3, 0, 2, 1], [0, 1, 2, 1]], np.int32)
    feeds = {"x": rng.standard_normal((a, 32)).astype(np.float16),
             "bias": rng.standard_normal(32).astype(np.float16),
             "tokens": rng.integers(-128, 128, (a, 64)).astype(np.int8), "counts": counts}
    assert placement(data, feeds, tmp_path) == {"MoeGatingTopKHash": {"CANNExecutionProvider"},
                                                "MoeReRouting": {"CANNExecutionProvider"}}
    got = run(session(data, "cann"), feeds)
    assert_bits_equal(got, run(session(data, "cpu"), feeds))
    idx, scores, pt, ps, pi, en = got
    assert en.tolist() == [3, 1, 4, 2] and (pt == feeds["tokens"][pi]).all() and ps.shape == (a, 4)
