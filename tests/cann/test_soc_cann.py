"""The chip check: on a SoC whose kernels CANN's MoE operators lack (Atlas 300I / 310P here,
through the fake's FAKE_ACL_SOC_NAME, read once per process like aclrtGetSocName), every node
takes its fallback without asking the operator, gives the CPU EP's bits, and `moe-onnx info` says
why."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PROBE = r"""
import json, sys
import numpy as np
import onnx
from ascend_moe_onnx.cli import main as cli
from ascend_moe_onnx.ort_custom_ops.cann import soc_name
from tests.cann.helpers import assert_bits_equal, calls, run, session
from tests.cann.test_moe_gating_top_k_hash_cann import gating_model
from tests.cann.test_moe_re_routing_cann import random_case, rerouting_model

rng = np.random.default_rng(0)
gating = {"x": rng.standard_normal((6, 16)).astype(np.float16)}
rerouting = random_case(rng, np.float16)
for data, feeds in ((gating_model(gating, dict(k=2, norm_type=1)), gating),
                    (rerouting_model(rerouting["tokens"], rerouting["counts"]), rerouting)):
    assert_bits_equal(run(session(data, "cann"), feeds), run(session(data, "cpu"), feeds))
    open(sys.argv[1], "wb").write(data)
    cli.main(["info", sys.argv[1]])
names = ["aclnnMoeGatingTopKGetWorkspaceSize", "aclnnMoeGatingTopK", "aclnnMoeReRoutingGetWorkspaceSize",
         "aclnnMoeReRouting"]
print(json.dumps({"soc": soc_name(), "calls": {n: calls(n) for n in names}}))
"""


def probe(tmp_path, soc: str) -> tuple[dict, str]:
    env = {**os.environ, "FAKE_ACL_SOC_NAME": soc}
    out = subprocess.run([sys.executable, "-c", PROBE, str(tmp_path / "m.onnx")], env=env, cwd=ROOT,
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.strip().splitlines()
    return json.loads(lines[-1]), "\n".join(lines[:-1])


def test_310p_falls_back_without_asking_the_operators(tmp_path):
    result, info = probe(tmp_path, "Ascend310P3")
    assert result == {"soc": "Ascend310P3", "calls": dict.fromkeys(result["calls"], 0)}
    def why(call):
        return f"the SoC Ascend310P3 has no kernels of {call} (built for ascend910b, ascend910_93 and " \
               "ascend910_95 (950) only)"
    assert f"host fallback (CPU kernel, with copies): {why('aclnnMoeGatingTopK')}" in info
    assert f"device-to-device copy fallback: {why('aclnnMoeReRouting')}" in info
    assert ("CANN SoC: Ascend310P3: the SoC Ascend310P3 has no kernels of aclnnMoeInitRoutingV3, aclnnMoeInitRouting, "
            "aclnnMoeFinalizeRoutingV2, aclnnMoeGatingTopK, aclnnMoeGatingTopKHash, aclnnMoeReRouting, "
            "aclnnMoeTokenPermute") in info


def test_910b_runs_natively(tmp_path):
    result, info = probe(tmp_path, "Ascend910B3")
    assert result["soc"] == "Ascend910B3" and all(result["calls"].values()), result
    assert "native: aclnnMoeGatingTopK" in info and "native: aclnnMoeReRouting" in info
    assert "CANN SoC: Ascend910B3: CANN's MoE operators have kernels for it" in info
