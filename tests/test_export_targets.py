"""Export targets (exporters.targets): ``--target cann`` writes what ONNX Runtime's CANN EP runs on
the NPU (opset 18, MoeRoutedExperts at every size, the shared expert as its own call, no float32
Gemm) and computes what the default target computes; options it cannot honour are refused. The
placement itself is checked on the real CANN EP in tests/cann/test_layer_cann.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from onnx import TensorProto, helper

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.exporters import experts_graph, targets
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.models.runtime import export_block
from ascend_moe_onnx.onnx_schemas._common import walk_graphs

PRESETS = ["qwen3-moe", "deepseek-v2"]  # deepseek-v3: tests/cann/test_layer_cann.py


def _cpu(data: bytes) -> ort.InferenceSession:
    return ort.InferenceSession(data, ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])


def _ops(model: onnx.ModelProto) -> set:
    return {n.op_type for g in walk_graphs(model.graph) for n in g.node}


@pytest.mark.parametrize("name", PRESETS)
def test_cann_target_graph_and_numbers(name):
    block = presets.build(name, "tiny", "float32", seed=3)
    cann = export_block(block, target="cann")
    model = onnx.load_from_string(cann)
    assert [o.version for o in model.opset_import if o.domain == ""] == [targets.CANN_OPSET]
    assert not _ops(model) & {"If", "MoE", "Gemm", "ScatterElements", "ReduceSum"}
    assert targets.cann_host_nodes(model) == []
    routed = [n for n in model.graph.node if n.op_type == experts_graph.OWN_KERNEL_OP]
    assert len(routed) == (2 if block.cfg.shared else 1)  # the shared expert: a call of its own
    # The same numbers as the default target, at sizes on both sides of its If.
    cpu = export_block(block)
    for tokens in (1, 5, 1 + experts_graph.OWN_KERNEL_MAX_ROWS // block.cfg.top_k):
        x = block.example_inputs(tokens, seed=tokens)[0].numpy()
        (got, got_idx), (ref, ref_idx) = _cpu(cann).run(None, {"hidden_states": x}), _cpu(cpu).run(None, {"hidden_states": x})
        np.testing.assert_array_equal(got_idx, ref_idx)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def test_default_target_keeps_what_the_cann_ep_would_run_on_the_host():
    """cann_host_nodes names the default export's If, Gemm and com.microsoft.MoE branch."""
    model = onnx.load_from_string(export_block(presets.build("deepseek-v3", "tiny", "float32")))
    host = " ".join(targets.cann_host_nodes(model))
    assert "Gemm 'node_linear' (its CANN kernel takes no float)" in host and "If '" in host
    assert "Cast '" in host and "opset-20 version has no CANN kernel" in host and "domain com.microsoft" in host
    assert "MatMul" not in host  # MatMul-13 is the same at opset 20


@pytest.mark.parametrize("target,why", [("cann", "runs on the host"), ("ge", "is not what GE runs")])
def test_device_targets_refuse_the_onnx_formulation_and_opset_20(target, why):
    from ascend_moe_onnx.exporters import export

    block = presets.build("qwen3-moe", "tiny", "float32")
    with pytest.raises(targets.TargetError, match=f"target '{target}': the 'onnx' expert formulation {why}"):
        export_block(block, experts="onnx", target=target)
    with pytest.raises(targets.TargetError, match=f"target '{target}': opset 20 requested"):
        export(block, block.example_inputs(4), target=target, opset_version=20)


def test_unknown_target_refused():
    from ascend_moe_onnx.exporters import export

    block = presets.build("qwen3-moe", "tiny", "float32")
    with pytest.raises(targets.TargetError, match="unknown target 'npu'"):
        export(block, block.example_inputs(4), target="npu")


@pytest.mark.parametrize("trans_b,alpha,beta,bias", [(1, 1.0, 1.0, True), (0, 0.5, 2.0, True), (1, 1.0, 1.0, False),
                                                     (0, 2.0, 1.0, False)])
def test_gemm_becomes_matmul_with_the_same_result(trans_b, alpha, beta, bias):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((6, 5) if trans_b else (5, 6)).astype(np.float32)
    inits = [onnx.numpy_helper.from_array(w, "w")]
    if bias:
        inits.append(onnx.numpy_helper.from_array(rng.standard_normal(6).astype(np.float32), "c"))
    node = helper.make_node("Gemm", ["x", "w"] + (["c"] if bias else []), ["y"], name="router", transB=trans_b,
                            alpha=alpha, beta=beta)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["T", 5])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["T", 6])], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", targets.CANN_OPSET)], ir_version=8)
    before = model.SerializeToString()
    targets.rewrite_for_cann(model)
    onnx.checker.check_model(model, full_check=True)
    assert "Gemm" not in _ops(model) and "MatMul" in _ops(model) and targets.cann_host_nodes(model) == []
    x = rng.standard_normal((7, 5)).astype(np.float32)
    np.testing.assert_allclose(_cpu(model.SerializeToString()).run(None, {"x": x})[0],
                               _cpu(before).run(None, {"x": x})[0], rtol=1e-6, atol=1e-6)


def test_float16_gemm_is_kept():
    """The CANN EP has a float16 Gemm kernel: nothing to rewrite."""
    w = onnx.numpy_helper.from_array(np.ones((3, 4), np.float16), "w")
    node = helper.make_node("Gemm", ["x", "w"], ["y"], transB=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT16, [2, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [2, 3])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", targets.CANN_OPSET)], ir_version=8)
    assert _ops(targets.rewrite_for_cann(model)) == {"Gemm"} and targets.cann_host_nodes(model) == []


def test_cli_export_target_cann(tmp_path, capsys):
    from ascend_moe_onnx.cli import main as cli

    out = tmp_path / "q.onnx"
    assert cli.main(["export", "qwen3-moe", "--target", "cann", "-o", str(out)]) == 0
    assert "target cann" in capsys.readouterr().out
    assert targets.cann_host_nodes(onnx.load(out)) == []
    assert cli.main(["info", str(out)]) == 0
    assert "every standard node that computes has a CANN kernel" in capsys.readouterr().out
    assert cli.main(["export", "qwen3-moe", "--target", "cann", "--experts", "onnx", "-o", str(out)]) == 2
    assert "'onnx' expert formulation runs on the host" in capsys.readouterr().err
    assert cli.main(["export", "qwen3-moe", "--target", "cann", "--ep-ranks", "2", "-o", str(tmp_path)]) == 2
    assert "applies to PRESET exports" in capsys.readouterr().err


CHAIN = ["MoeInitRoutingV3", "GroupedMatmul", "SwiGlu", "GroupedMatmul", "MoeFinalizeRoutingV2"]


def _array(model: onnx.ModelProto, name: str) -> np.ndarray:
    return next(onnx.numpy_helper.to_array(t) for t in model.graph.initializer if t.name == name)


@pytest.mark.parametrize("dtype,scheme,block_size", [("bfloat16", "int4", 16), ("float16", "int8", 0)])
def test_cann_target_quantized_experts_as_the_op_chain(dtype, scheme, block_size):
    """--weights-quant for the CANN target: the shared expert's chain, then the routed one (its
    result as the residual), in the block's dtype; the integers stored once, unchanged ([E, N, K],
    int4 as int32 words of the same bytes), the scales in [E, G, N] rounded to the block dtype; no
    node of the chain on the host (float16: nothing at all; bfloat16: the block's own Cast of its
    input only)."""
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    wq = WeightsQuant.from_scheme(scheme, block_size)
    block = presets.build("deepseek-v3", "tiny", dtype, seed=2, weights_quant=wq)
    model = onnx.load_from_string(export_block(block, 4, target="cann"))
    ours = [n for n in model.graph.node if n.domain == "ascend.moe"]
    assert [n.op_type for n in ours] == ["MoeGatingTopKHash", *CHAIN, *CHAIN]
    host = targets.cann_host_nodes(model)
    assert host == ([] if dtype == "float16" else ["Cast 'node__to_copy' (its CANN kernel takes no bfloat16)"])
    half = {"bfloat16": torch.bfloat16, "float16": torch.float16}[dtype]
    ex = block.experts
    (gq, gs), (uq, us), (dq, ds) = (wq.quantized(w.float().numpy()) for w in (ex.gate_proj, ex.up_proj, ex.down_proj))
    fc1, fc2 = ours[7], ours[9]  # the routed chain's grouped matmuls
    for node, q, s in ((fc1, np.concatenate((gq, uq), axis=1), np.concatenate((gs, us), axis=1)), (fc2, dq, ds)):
        stored = _array(model, node.input[1])
        assert stored.dtype == (np.int32 if scheme == "int4" else np.int8)
        assert stored.tobytes() == np.ascontiguousarray(q).tobytes()
        scales = torch.from_numpy(s if block_size == 0 else s.transpose(0, 2, 1).copy()).to(half)
        got = _array(model, node.input[6])
        np.testing.assert_array_equal(got.astype(np.float32), scales.float().numpy())
    assert not [n for n in model.graph.node if n.op_type == "Cast" and n.input[0] == ours[-1].output[0]]


def test_cann_target_refuses_quantized_float32_experts():
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    block = presets.build("qwen3-moe", "tiny", "float32", seed=2, weights_quant=WeightsQuant.from_scheme("int8"))
    with pytest.raises(experts_graph.ExpertsError, match=r"export with --dtype bfloat16 \(or float16\)$"):
        export_block(block, 4, target="cann")


# ---- --target ge: what CANN's graph engine reads through the project's parser plugin ------------

def _ge_model(name: str, dtype: str = "float32") -> tuple:
    block = presets.build(name, "tiny", dtype, seed=3)
    return block, export_block(block, target="ge")


@pytest.mark.parametrize("name", ["qwen3-moe", "deepseek-v3"])
def test_ge_target_graph_and_numbers(name):
    """Opset 18, the op family's chain with [E, K, N] weights, every output named, every ascend.moe
    node one the plugin maps; and the default target's numbers (ONNX Runtime, the library's kernels)."""
    block, data = _ge_model(name)
    model = onnx.load_from_string(data)
    assert [o.version for o in model.opset_import if o.domain == ""] == [targets.GE_OPSET]
    ops = _ops(model)
    assert not ops & {"If", "MoE", "MoeRoutedExperts"} and {"MoeInitRoutingV3", "GroupedMatmul"} <= ops
    assert all(o for g in walk_graphs(model.graph) for n in g.node for o in n.output)
    inits = {t.name: t for t in model.graph.initializer}
    for n in model.graph.node:
        if n.domain == "ascend.moe":
            assert targets.ge_refusal(n) is None, n.name
        if n.op_type == "GroupedMatmul":
            assert {a.name: a.i for a in n.attribute}.get("transpose_weight", 0) == 0
            w = inits[n.input[1]]
            assert w.dims[0] in (block.cfg.experts, block.cfg.shared or 0)  # [E, K, N]
    cpu = export_block(block)
    for tokens in (1, 5):
        x = block.example_inputs(tokens, seed=tokens)[0].numpy()
        (got, got_idx), (ref, ref_idx) = _cpu(data).run(None, {"hidden_states": x}), _cpu(cpu).run(None, {"hidden_states": x})
        np.testing.assert_array_equal(got_idx, ref_idx)
        np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))


def _one_node_model(node, inputs, outputs, initializers=()):
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", targets.GE_OPSET),
                                                   helper.make_opsetid("ascend.moe", 1)], ir_version=8)


def test_ge_target_names_outputs_casts_indices_and_warns_on_g_format():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    gating = helper.make_node("MoeGatingTopKHash", ["x"], ["w", "idx", ""], name="gate", domain="ascend.moe", k=2,
                              routed_scaling_factor=1.2345678)
    model = _one_node_model(gating, [x], [helper.make_tensor_value_info("w", TensorProto.FLOAT, [4, 2])])
    changed = targets.rewrite_for_ge(model)
    assert model.graph.node[0].output[2] == "gate_unused_output2"
    assert changed == ["MoeGatingTopKHash 'gate' routed_scaling_factor: 1.2345677614212036 -> 1.23457"]
    idx = helper.make_tensor_value_info("idx", TensorProto.INT64, [4, 2])
    init = helper.make_node("MoeInitRoutingV3", ["x", "idx"], ["ex", "rows", "counts", "scale"], name="init",
                            domain="ascend.moe", expert_num=8)
    model = _one_node_model(init, [x, idx], [helper.make_tensor_value_info("ex", TensorProto.FLOAT, None)])
    assert targets.rewrite_for_ge(model) == []
    cast, node = model.graph.node
    assert cast.op_type == "Cast" and cast.input == ["idx"] and node.input[1] == cast.output[0]
    assert helper.get_attribute_value(cast.attribute[0]) == TensorProto.INT32


def test_ge_target_stores_grouped_matmul_weights_ekn():
    rng = np.random.default_rng(1)
    w_enk = rng.standard_normal((3, 5, 4)).astype(np.float32)  # [E, N, K]
    node = helper.make_node("GroupedMatmul", ["x", "w", "counts"], ["y"], name="gmm", domain="ascend.moe",
                            transpose_weight=1, group_list_type=1)
    model = _one_node_model(node, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6, 4]),
                                   helper.make_tensor_value_info("counts", TensorProto.INT64, [3])],
                            [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6, 5])],
                            [onnx.numpy_helper.from_array(w_enk, "w")])
    before = model.SerializeToString()
    targets.rewrite_for_ge(model)
    gmm = model.graph.node[-1]
    assert {a.name: a.i for a in gmm.attribute}["transpose_weight"] == 0
    stored = onnx.numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == gmm.input[1]))
    np.testing.assert_array_equal(stored, w_enk.transpose(0, 2, 1))
    feeds = {"x": rng.standard_normal((6, 4)).astype(np.float32), "counts": np.array([2, 1, 3], np.int64)}
    # the same products, summed in another order by the other layout's kernel path
    np.testing.assert_allclose(_cpu(model.SerializeToString()).run(None, feeds)[0], _cpu(before).run(None, feeds)[0],
                               rtol=1e-5, atol=1e-6)


def test_ge_target_refuses_what_the_plugin_would_refuse():
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    quantized = presets.build("qwen3-moe", "tiny", "bfloat16", seed=2, weights_quant=WeightsQuant.from_scheme("int8"))
    with pytest.raises(experts_graph.ExpertsError, match="--target ge exports float expert weights only"):
        export_block(quantized, 4, target="ge")
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 8])
    extra = helper.make_node("MoeGatingTopKHash", ["x", "", "", "", "x"], ["w", "i", "o"], name="g",
                             domain="ascend.moe", k=2)
    with pytest.raises(targets.TargetError, match="node 'g' .*additional_bias"):
        targets.rewrite_for_ge(_one_node_model(extra, [x], []))
    erf = helper.make_node("Gelu", ["x"], ["y"], name="e")
    with pytest.raises(targets.TargetError, match="registers no opset-18 version of: Gelu 'e'"):
        targets.rewrite_for_ge(_one_node_model(erf, [x], []))
