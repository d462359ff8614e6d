"""Quantized expert weights end to end (docs/quantization.md): the layout helpers, ``--weights-quant``
exports of the preset blocks (verify passes at float32 tolerance against torch computing with the
dequantized weights; the graph holds int8 expert weights only), and Ascend w8a8 checkpoints (int8
weights + weight_scale) loaded without quantizing again: the exported integers and scales are the
checkpoint's, bit for bit."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch
from safetensors.torch import save_file

from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.models.runtime import export_block
from ascend_moe_onnx.onnx_schemas import weight_quant
from tests.checkpoints import state_dict


def test_int4_packing_order_and_rounding():
    q = np.array([[-8, 7, 1, -1, 0, 3]], np.int8)
    packed = weight_quant.pack_int4(q)
    # element 2j in the low nibble: (7 << 4) | (-8 & 0xF) = 0x78, (-1 << 4 | 1) = 0xF1, 0x30
    assert packed.view(np.uint8).tolist() == [[0x78, 0xF1, 0x30]]
    np.testing.assert_array_equal(weight_quant.unpack_int4(packed), q)
    w = np.array([[2.5, -1.5, 0.5, 127.0]])  # scale 1: halves go to even
    qi, s = weight_quant.quantize(w, 8)
    assert s.tolist() == [1.0] and qi.tolist() == [[2, -2, 0, 127]]
    q0, s0 = weight_quant.quantize(np.zeros((2, 4)), 4, 2)
    assert not q0.any() and not s0.any()  # an all-zero block: scale 0, no NaN


def _expert_initializers(model: onnx.ModelProto) -> dict:
    return {t.name: t for t in model.graph.initializer if t.data_type == onnx.TensorProto.INT8}


@pytest.mark.parametrize("scheme,block_size", [("int8", None), ("int4", 16), ("int8", 32)])
def test_quantized_presets_verify(scheme, block_size):
    wq = WeightsQuant.from_scheme(scheme, block_size)
    checks = verify.verify_preset("deepseek-v3", weights_quant=wq, token_counts=[1, 40])
    assert all(c.passed for c in checks), verify.format_table(checks)


def test_export_stores_the_recorded_integers():
    wq = WeightsQuant.from_scheme("int4")
    block = presets.build("qwen3-moe", weights_quant=wq, seed=2)
    model = onnx.load_from_string(export_block(block, 4))
    nodes = [n for n in model.graph.node if n.op_type == "MoeRoutedExperts"]
    assert len(nodes) == 1  # at every routed-row count: no If, no float MoE branch
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in nodes[0].attribute}
    assert attrs["weight_bits"] == 4 and attrs["block_size"] == 32
    ints = _expert_initializers(model)
    fc2 = onnx.numpy_helper.to_array(ints[nodes[0].input[4]])
    q, _ = wq.quantized(block.experts.down_proj.numpy())
    np.testing.assert_array_equal(fc2, q)
    E, H, I = block.experts.down_proj.shape
    assert fc2.shape == (E, H, I // 2)
    floats = [t.name for t in model.graph.initializer if t.data_type == onnx.TensorProto.FLOAT and len(t.dims) == 3]
    assert floats == [nodes[0].input[5], nodes[0].input[6]]  # the scales; no float copy of the experts


def _ascend_int8_checkpoint(block, prefix: str) -> tuple[dict, dict]:
    """The block's weights as an Ascend w8a8 checkpoint: int8 per expert + weight_scale [N, 1] +
    zero weight_offset, scales chosen so that rows do not reach 127 (a quantizer's own choice)."""
    sd = state_dict(block, prefix)
    truth = {}
    rng = np.random.default_rng(5)
    for key in [k for k in sd if ("experts." in k) and k.endswith("proj.weight")]:
        w = sd[key].numpy()
        scale = (np.abs(w).max(axis=1, keepdims=True) / rng.uniform(90, 126, (w.shape[0], 1))).astype(np.float32)
        q = np.clip(np.rint(w / scale), -127, 127).astype(np.int8)
        sd[key] = torch.from_numpy(q)
        sd[key + "_scale"] = torch.from_numpy(scale)
        sd[key.replace(".weight", ".weight_offset")] = torch.zeros(scale.shape)
        truth[key] = (q, scale[:, 0])
    return sd, truth


def test_ascend_int8_checkpoint_loads_without_requantizing(tmp_path):
    src = presets.build("deepseek-v3", seed=4)
    sd, truth = _ascend_int8_checkpoint(src, "model.layers.5.mlp.")
    save_file(sd, tmp_path / "w8a8.safetensors")
    block = presets.build("deepseek-v3", weights=tmp_path / "w8a8.safetensors")
    assert block.weights_quant.name == "int8 per channel"
    q0, s0 = truth["model.layers.5.mlp.experts.0.gate_proj.weight"]
    np.testing.assert_array_equal(block.experts.gate_proj[0].numpy(), q0 * s0[:, None])
    model = onnx.load_from_string(export_block(block, 4))
    node = next(n for n in model.graph.node if n.op_type == "MoeRoutedExperts")
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in model.graph.initializer}
    fc1, fc1_scales = inits[node.input[3]], inits[node.input[5]]
    np.testing.assert_array_equal(fc1[0, 0::2], q0)  # gate rows of expert 0, as stored
    np.testing.assert_array_equal(fc1_scales[0, 0::2], s0)
    qd, sd_ = truth["model.layers.5.mlp.shared_experts.down_proj.weight"]
    E = src.cfg.experts
    np.testing.assert_array_equal(inits[node.input[4]][E], qd)  # the shared expert: one slice here
    np.testing.assert_array_equal(inits[node.input[6]][E], sd_)
    checks = verify.verify_preset("deepseek-v3", weights=tmp_path / "w8a8.safetensors", token_counts=[3, 20])
    assert all(c.passed for c in checks), verify.format_table(checks)
    with pytest.raises(ValueError, match="would quantize them again"):
        presets.build("deepseek-v3", weights=tmp_path / "w8a8.safetensors", weights_quant=WeightsQuant(4, 32))


def test_asymmetric_checkpoint_is_refused(tmp_path):
    src = presets.build("qwen3-moe", seed=1)
    sd, _ = _ascend_int8_checkpoint(src, "model.layers.0.mlp.")
    sd["model.layers.0.mlp.experts.2.up_proj.weight_offset"] += 1
    save_file(sd, tmp_path / "w.safetensors")
    with pytest.raises(ValueError, match="non-zero weight_offset"):
        presets.build("qwen3-moe", weights=tmp_path / "w.safetensors")


def test_block_size_that_does_not_divide_is_a_clear_error():
    with pytest.raises(ValueError, match="block size 48 must divide the hidden size 64 and the expert width 32"):
        presets.build("deepseek-v3", weights_quant=WeightsQuant(8, 48))


@pytest.mark.parametrize("case", ["deepseek_v3"])
def test_cli_export_hf_checkpoint_quantized(tmp_path, capsys, case):
    """``export --hf DIR --weights-quant``: the graph's quantized experts compute what the HF model
    computes with the dequantized weights (DeepSeek-V3: the shared expert folded in, quantized too)."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.cli import main as cli
    from ascend_moe_onnx.hf.export import patch
    from tests import hf_cases

    model = hf_cases.model(case)
    model.save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "m.onnx"
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--weights-quant", "int4", "--quant-block-size", "8",
                     "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    graph = onnx.load(str(out)).graph
    nodes = [n for n in graph.node if n.op_type == "MoeRoutedExperts"]
    assert nodes and all(a.i == 4 for n in nodes for a in n.attribute if a.name == "weight_bits")
    patch(model)
    wq = WeightsQuant(4, 8)
    from ascend_moe_onnx.hf.quantize import quantize_hf_model

    assert quantize_hf_model(model, wq) == len(nodes)
    ids = torch.randint(0, model.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model(ids).logits.numpy()
    session = ort.InferenceSession(str(out), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids.numpy()})[0]
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 1e-4


def test_cli_export_hf_quantized_table_block_with_its_shared_expert_folded(tmp_path, capsys):
    """dots1 (a router-table block with a plain shared expert): the shared expert runs inside the
    quantized experts' call, quantized the same way; the layer computes what the patched model
    computes with the dequantized weights."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.cli import main as cli
    from ascend_moe_onnx.hf.export import moe_blocks, patch
    from ascend_moe_onnx.hf.quantize import quantize_hf_model
    from tests import hf_families

    model = hf_families.model("dots1")
    model.save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "m.onnx"
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--layers", "0-1", "--weights-quant", "int8",
                     "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    patch(model)
    assert quantize_hf_model(model, WeightsQuant.from_scheme("int8", 0)) == 1
    (block,) = moe_blocks(model).values()
    x = torch.randn(7, model.config.hidden_size, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = block(x[None])[0].numpy()
    session = ort.InferenceSession(str(out), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"hidden_states": x.numpy()})[0]
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 1e-5


@pytest.mark.parametrize("argv,message", [
    (["--quant-block-size", "16"], "--quant-block-size goes with --weights-quant"),
    (["--weights-quant", "int8", "--experts", "onnx"], "runs in the ort expert formulation"),
    (["--weights-quant", "int4", "--quant-block-size", "5"], "even for 4 bits, got 5"),
    (["--weights-quant", "int4", "--quant-block-size", "48"], "block size 48 must divide the hidden size 64"),
    (["--weights-quant", "int8", "--target", "cann"], "export with --dtype bfloat16 (or float16)"),
    (["--weights-quant", "int8", "--quant-block-size", "16", "--target", "cann", "--dtype", "bfloat16"],
     "refuses per-group scales with int8 weights"),
])
def test_cli_usage_errors(tmp_path, capsys, argv, message):
    from ascend_moe_onnx.cli import main as cli

    code = cli.main(["export", "deepseek-v3", *argv, "-o", str(tmp_path / "m.onnx")])
    assert code == 2 and message in capsys.readouterr().err


# (preset, dtype, scheme, block size): int8 per channel, int4 per group, int4 per channel with a
# shared expert of 2 slices (deepseek-v2)
CANN_CHAINS = [("qwen3-moe", "bfloat16", "int8", None), ("deepseek-v3", "bfloat16", "int4", 16),
               ("deepseek-v2", "float16", "int4", 0)]


@pytest.mark.parametrize("name,dtype,scheme,block_size", CANN_CHAINS)
def test_cann_target_chain_verifies(name, dtype, scheme, block_size):
    """--target cann exports the op family's chain in the block's dtype (exporters.quantized_chain);
    on the CPU EP it is within the dtype's verify tolerance of torch (bfloat16 3e-2, float16 4e-3),
    scales rounded to the block dtype included."""
    wq = WeightsQuant.from_scheme(scheme, block_size)
    checks = verify.verify_preset(name, dtype=dtype, weights_quant=wq, target="cann", token_counts=[1, 40])
    assert all(c.passed for c in checks), verify.format_table(checks)


def test_cli_export_cann_chain(tmp_path, capsys):
    from ascend_moe_onnx.cli import main as cli

    out = tmp_path / "m.onnx"
    code = cli.main(["export", "deepseek-v3", "--dtype", "bfloat16", "--weights-quant", "int4", "--target", "cann",
                     "-o", str(out)])
    assert code == 0 and "target cann (int4 per group of 32 weights)" in capsys.readouterr().out
    ops = [n.op_type for n in onnx.load(out).graph.node]
    assert "MoeRoutedExperts" not in ops and ops.count("GroupedMatmul") == 4  # routed and shared chains


def test_cann_chain_refuses_a_clamped_swiglu(tmp_path, capsys):
    from ascend_moe_onnx.cli import main as cli

    code = cli.main(["export", "deepseek-v4", "--dtype", "bfloat16", "--weights-quant", "int8", "--target", "cann",
                     "-o", str(tmp_path / "m.onnx")])
    assert code == 2 and "SwiGlu has no clamp, so swiglu_limit 0.75" in capsys.readouterr().err
