"""The CANN front end on a machine without onnxruntime-cann: the provider entry, the fallback
warning, ``moe-onnx verify --provider cann`` refusing to verify the CPU instead, and
``moe-onnx info`` saying per node whether the CANN kernel runs natively and through which ACLNN
call, or falls back and why. (The kernels themselves: tests/cann, run by .ci/jobs/20-cann.sh.)"""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper, numpy_helper

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.cli import main as cli
from ascend_moe_onnx.ort_custom_ops.cann import gating_path, rerouting_path

no_cann = pytest.mark.skipif("CANNExecutionProvider" in ort.get_available_providers(),
                             reason="this onnxruntime has the CANN EP")


def run_main(capsys, *argv):
    code = cli.main([str(a) for a in argv])
    out = capsys.readouterr()
    return code, out.out, out.err


def test_cann_provider_entry():
    name, options = ort_custom_ops.cann_provider(device_id=1, npu_mem_limit=2**30)
    assert name == "CANNExecutionProvider"
    assert options == {"device_id": "1", "enable_cann_graph": "0", "npu_mem_limit": str(2**30)}


@no_cann
def test_inference_session_warns_and_runs_on_cpu():
    node = helper.make_node("MoeReRouting", ["t", "c"], ["a", "b", "i", "e"], domain="ascend.moe")
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("t", T.FLOAT, ["A", 4]),
                                           helper.make_tensor_value_info("c", T.INT64, [1, 2])],
                              [helper.make_value_info(n, onnx.TypeProto()) for n in "abie"])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("ascend.moe", 1)])
    with pytest.warns(ort_custom_ops.CannFallbackWarning, match="install onnxruntime-cann"):
        sess = ort_custom_ops.inference_session(model, provider="cann")
    assert sess.get_providers() == ["CPUExecutionProvider"]
    out = sess.run(None, {"t": np.ones((3, 4), np.float32), "c": np.array([[1, 2]])})
    assert out[3].tolist() == [1, 2]


@no_cann
def test_verify_provider_cann_refuses_without_the_ep(capsys):
    code, out, err = run_main(capsys, "verify", "mixtral", "--provider", "cann")
    assert code == 2 and out == ""
    assert "--provider cann: this onnxruntime" in err and "onnxruntime-cann" in err


GATING = dict(k=2, k_group=1, group_count=1, group_select_mode=0, renorm=0, norm_type=1, out_flag=0,
              routed_scaling_factor=1.0, eps=1e-20)
REROUTING = dict(expert_token_num_type=1, idx_type=0)


@pytest.mark.parametrize("attrs,kw,expected", [
    ({}, dict(experts=256), "aclnnMoeGatingTopK"),
    (dict(norm_type=2), dict(experts=256), "aclnnMoeGatingTopKHash"),
    ({}, dict(experts=256, hash_routing=True, table_type="int32"), "aclnnMoeGatingTopKHash"),
    ({}, dict(experts=256, hash_routing=True, table_type="int64"), "aclnnMoeGatingTopKHash"),
    (dict(norm_type=2, group_count=2, k_group=2), dict(experts=16), "only with group_count=1"),
    ({}, dict(experts=16, soc="Ascend310P3"), "the SoC Ascend310P3 has no kernels"),
    ({}, dict(experts=16, soc="Ascend910_9391"), "aclnnMoeGatingTopK"),
    (dict(renorm=1), {}, "renorm=1"),
    ({}, dict(additional=True), "additional_token_mask"),
    ({}, dict(experts=4096), "E <= 2048"),
    (dict(group_count=4, k_group=4, group_select_mode=1), dict(experts=4), "E / group_count >= 2"),
    (dict(group_count=4, k_group=2), dict(experts=8), "aclnnMoeGatingTopK"),
    (dict(group_count=20, k_group=20), dict(experts=1980), "aclnnMoeGatingTopK"),
    (dict(group_count=20, k_group=4), dict(experts=1980), "align32"),
])
def test_gating_path(attrs, kw, expected):
    call, why = gating_path({**GATING, **attrs}, **kw)
    assert (call or why).count(expected) == 1 and (call is None) == bool(why)


@pytest.mark.parametrize("attrs,kw,expected", [
    ({}, dict(token_type="bfloat16", scale_type="float", scale_rank=1, hidden=7168), "aclnnMoeReRouting"),
    ({}, dict(token_type="float"), "tokens must be"),
    ({}, dict(token_type="int8", scale_type="float", scale_rank=2), "per_token_scales"),
    ({}, dict(token_type="int8", hidden=16384), "H < 16384"),
    (dict(expert_token_num_type=0), {}, "cumsum"),
    (dict(idx_type=1), {}, "scatter"),
    ({}, dict(token_type="int8", soc="Ascend910A"), "the SoC Ascend910A has no kernels"),
])
def test_rerouting_path(attrs, kw, expected):
    call, why = rerouting_path({**REROUTING, **attrs}, **kw)
    assert expected in (call or why)


def test_info_says_native_or_fallback_per_node(capsys, tmp_path):
    nodes = [
        helper.make_node("MoeGatingTopKHash", ["x", "", "ids", "table"], ["y", "i", "o"], domain="ascend.moe",
                         name="hash", k=2, norm_type=2),
        helper.make_node("MoeGatingTopKHash", ["x"], ["y2", "i2", "o2"], domain="ascend.moe", name="qwen",
                         k=2, renorm=1),
        helper.make_node("MoeReRouting", ["tok", "cnt"], ["a", "b", "c", "d"], domain="ascend.moe", name="bf16"),
        helper.make_node("MoeReRouting", ["tok", "cnt"], ["a2", "b2", "c2", "d2"], domain="ascend.moe",
                         name="scatter", idx_type=1),
    ]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("x", T.FLOAT, ["R", 16]), helper.make_tensor_value_info("ids", T.INT64, ["R"]),
         helper.make_tensor_value_info("tok", T.BFLOAT16, ["A", 64]), helper.make_tensor_value_info("cnt", T.INT32, [2, 4])],
        [helper.make_value_info(n, onnx.TypeProto()) for n in ("y", "y2", "a", "a2")],
        initializer=[numpy_helper.from_array(np.zeros((10, 2), np.int32), "table")])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("ascend.moe", 1)]), str(path))
    code, out, err = run_main(capsys, "info", path)
    assert code == 0, err
    lines = {n: next(line for line in out.splitlines()[out.splitlines().index(next(
        x for x in out.splitlines() if f"'{n}'" in x)):] if "CANNExecutionProvider" in line)
        for n in ("hash", "qwen", "bf16", "scatter")}
    assert "native: aclnnMoeGatingTopKHash (the cann-recipes-infer custom operator package)" in lines["hash"]
    assert "host fallback (CPU kernel, with copies): renorm=1" in lines["qwen"]
    assert "native: aclnnMoeReRouting" in lines["bf16"]
    assert "copy fallback: aclnnMoeReRouting supports idx_type=0" in lines["scatter"]
    assert "no library kernel" not in out


def test_verify_provider_cann_checks_the_graph_exported_for_cann(monkeypatch):
    """``verify --provider cann`` must run the graph ``export --target cann`` writes (the CANN opset and
    rewrites), not the CPU export; the sessions here run it on the CPU EP under the CANN name."""
    from ascend_moe_onnx.cli import verify
    from ascend_moe_onnx.exporters import targets
    from ascend_moe_onnx.models import runtime

    opsets = []

    def cpu_sessions_named_cann(data, provider="cpu"):
        model = onnx.load_from_string(data)
        opsets.append(next(o.version for o in model.opset_import if o.domain in ("", "ai.onnx")))
        out = runtime.sessions(data, "cpu")
        out["ort-cann"] = out.pop("ort")
        return out

    monkeypatch.setattr(verify, "sessions", cpu_sessions_named_cann)
    checks = verify.verify_preset("mixtral", "tiny", token_counts=(3,), provider="cann")
    assert opsets == [targets.CANN_OPSET]
    assert [c.got for c in checks][0] == "ort-cann" and all(c.passed for c in checks), checks
