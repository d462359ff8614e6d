"""MoeRoutedExperts with int8 activations (act_quant 1, W8A8 / W4A8; docs/quantization.md): the
kernel against the NumPy model of the integer arithmetic bit for bit on every dot-product path this
CPU runs (weights repacked at session creation, and per call when they are graph inputs), the model
against the float64 block, the quantization rules, and the refusals."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas import moe_routed_experts as spec
from ascend_moe_onnx.onnx_schemas import weight_quant
from tests.cpu_isa import call_on_isa, cpu_flags
from tests.ops.moe_routed_experts.experts_model import experts_model

WEIGHTS = ("gate_up_weights", "down_weights", "gate_up_scales", "down_scales")


def dot_paths() -> list[str]:
    """The A8 dot-product paths (ASCEND_MOE_CPU_A8_DOT) this CPU runs."""
    flags = cpu_flags()
    paths = ["scalar"]
    if {"avx2", "fma"} <= flags:
        paths += ["maddubs", "emulated-vnni"]
    if "avx_vnni" in flags:
        paths.append("avxvnni")
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni"} <= flags:
        paths.append("avx512vnni")
    return paths


def case(seed: int, T: int, H: int, I: int, E: int, k: int, bits: int, block: int, limit: float = 0.0,
         index_type=np.int64) -> tuple[dict, dict]:
    """(inputs, attributes) of one act_quant 1 call with random weights quantized as the exports do."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(E, size=k, replace=k > E) for _ in range(T)]).astype(index_type)
    inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx,
              "routing_weights": rng.random((T, k)).astype(np.float32)}
    for name, w in (("gate_up", rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)),
                    ("down", rng.standard_normal((E, H, I)) / np.sqrt(I))):
        inputs[f"{name}_weights"], inputs[f"{name}_scales"] = weight_quant.quantize(w, bits, block)
    return inputs, {"weight_bits": bits, "block_size": block, "act_quant": 1, "swiglu_limit": limit}


def cases() -> list[tuple[dict, dict]]:
    """Per channel and per group, 8 and 4 bits; decode (one pair per expert), many pairs per expert
    (tiles of 4 and their remainders), repeated experts in a token, a clamp, H and I not multiples of
    8 (per channel: zero padding), int32 indices, a row of zeros and rows of NaN / inf, a shared
    expert in every token beside one-pair experts."""
    out = [
        case(1, 1, 64, 32, 8, 4, 8, 0),
        case(2, 5, 128, 64, 4, 3, 4, 32),
        case(3, 40, 96, 48, 6, 4, 8, 16),
        case(4, 40, 96, 40, 6, 4, 4, 8),
        case(5, 7, 20, 6, 3, 5, 8, 0, limit=0.5),  # H, I not multiples of 8; k > E: repeats
        case(6, 9, 36, 10, 5, 2, 4, 0, index_type=np.int32),
        case(7, 17, 256, 64, 16, 8, 4, 32, limit=1.0),
    ]
    inputs, attrs = case(8, 6, 64, 24, 4, 2, 8, 8)
    inputs["x"][1] = 0.0
    inputs["x"][2, 3] = np.nan
    inputs["x"][4, 0] = np.inf
    inputs["x"][5] *= 1e-37  # tiny values: a subnormal scale
    out.append((inputs, attrs))
    for seed, bits, block in [(9, 4, 8), (10, 8, 0)]:  # a shared expert: finer work items, ordered first
        inputs, attrs = case(seed, 8, 64, 40, 33, 2, bits, block)
        inputs["expert_idx"][:, 1] = 32
        inputs["expert_idx"][:, 0] = np.random.default_rng(seed).permutation(32)[:8]
        out.append((inputs, attrs))
    return out




def run_cases(constant_weights: bool) -> dict:
    """y of every case with 1 and 2 intra-op threads (in a child process on one dot path)."""
    import onnxruntime as ort

    out = {}
    for i, (inputs, attrs) in enumerate(cases()):
        feed = {n: v for n, v in inputs.items() if not (constant_weights and n in WEIGHTS)}
        for threads in (1, 2):
            sess = ort.InferenceSession(experts_model(inputs, attrs, constant_weights), ort_custom_ops.session_options(threads),
                                        providers=["CPUExecutionProvider"])
            out[f"{i}_{threads}"] = sess.run(None, feed)[0]
    return out


def _run_on_dot(dot: str, constant_weights: bool) -> dict:
    import os

    os.environ["ASCEND_MOE_CPU_A8_DOT"] = dot
    try:
        isa = "baseline" if dot == "scalar" else "avx2" if dot in ("maddubs", "emulated-vnni", "avxvnni") else "avx512"
        return call_on_isa(isa, "tests.ops.moe_routed_experts.test_a8_experts:run_cases", constant_weights)
    finally:
        del os.environ["ASCEND_MOE_CPU_A8_DOT"]


@pytest.mark.parametrize("constant_weights", [True, False], ids=["repacked-at-creation", "repacked-per-call"])
@pytest.mark.parametrize("dot", dot_paths())
def test_every_dot_path_is_the_numpy_model_bit_for_bit(dot, constant_weights):
    got = _run_on_dot(dot, constant_weights)
    for i, (inputs, attrs) in enumerate(cases()):
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        np.testing.assert_array_equal(got[f"{i}_1"], expected, err_msg=f"{dot} case {i}")
        np.testing.assert_array_equal(got[f"{i}_2"], expected, err_msg=f"{dot} case {i}: 2 threads")


@pytest.mark.parametrize("bits,block", [(8, 0), (4, 32), (4, 0)])
def test_model_is_close_to_the_float64_block(bits, block):
    """Against float64 on the same dequantized weights: the activations' int8 rounding adds about
    1 % rms (two quantized activations per expert), far below int4 weights' own error."""
    inputs, attrs = case(11, 32, 256, 128, 8, 4, bits, block)
    args = [inputs.get(n) for n in spec.INPUT_NAMES]
    (a8,) = spec.reference(*args, **attrs)
    (a16,) = spec.reference(*args, **dict(attrs, act_quant=0))
    rel = np.sqrt(np.mean((a8.astype(np.float64) - a16) ** 2) / np.mean(a16.astype(np.float64) ** 2))
    assert 1e-4 < rel < 0.03, rel


def test_quantize_rows_rules():
    v = np.array([[127.0, 0.5, -0.5, 1.5, -63.5, 2.5],
                  [0.0] * 6,
                  [1.0, np.nan, 0, 0, 0, 0],
                  [np.inf, 1.0, 0, 0, 0, 0]], np.float32)
    q, s = spec.quantize_rows_int8(v)
    assert s[0] == np.float32(1.0) and s[1] == 0 and np.isnan(s[2]) and np.isnan(s[3])
    np.testing.assert_array_equal(q[0], [127, 0, 0, 2, -64, 2])  # half to even
    assert not q[1:].any()


BAD = [
    ({"act_quant": 2}, None, "attribute 'act_quant' must be 0 (float activations) or 1 (per-token int8), got 2"),
    ({"act_quant": 1, "block_size": 4}, None,
     "attribute 'block_size' must be a multiple of 8 with act_quant 1 (whole steps of the integer dot products), got 4"),
    ({"act_quant": 1}, "float", "attribute 'act_quant' = 1 needs int8 weights, got float gate_up_weights"),
]


@pytest.mark.parametrize("attrs,weights,message", BAD, ids=["value", "block", "float-weights"])
def test_refusals_name_the_attribute(attrs, weights, message):
    import re

    import onnxruntime as ort

    inputs, base = case(3, 2, 64, 16, 4, 2, 8, 0)
    attrs = dict(base, **attrs)
    if weights == "float":
        rng = np.random.default_rng(0)
        inputs = {n: v for n, v in inputs.items() if n not in ("gate_up_scales", "down_scales")}
        inputs["gate_up_weights"] = rng.standard_normal((4, 32, 64)).astype(np.float32)
        inputs["down_weights"] = rng.standard_normal((4, 64, 16)).astype(np.float32)
    with pytest.raises(ValueError, match=re.escape(message)):
        spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
    with pytest.raises(Exception, match=re.escape(message)):
        names = [n for n in spec.INPUT_NAMES if n in inputs]
        node = helper.make_node("MoeRoutedExperts", names, ["y"], domain="ascend.moe", **attrs)
        elem = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.int8): TensorProto.INT8,
                np.dtype(np.int64): TensorProto.INT64}
        graph = helper.make_graph([node], "bad",
                                  [helper.make_tensor_value_info(n, elem[inputs[n].dtype], None) for n in names],
                                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid("ascend.moe", 1)])
        m.ir_version = 10
        sess = ort.InferenceSession(m.SerializeToString(), ort_custom_ops.session_options(1),
                                    providers=["CPUExecutionProvider"])
        sess.run(None, {n: inputs[n] for n in names})



@pytest.mark.parametrize("scheme,block_size", [("int8", None), ("int4", None)])
def test_act_quant_presets_export_and_verify(scheme, block_size):
    """--weights-quant ... --act-quant int8: the exported node has act_quant 1 and the graph agrees
    with the torch block (float activations) within cli.verify's int8-activation tolerance."""
    from ascend_moe_onnx.cli import verify
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    wq = WeightsQuant.from_scheme(scheme, block_size, "int8")
    assert wq.act_quant == 1 and wq.name.endswith("int8 activations")
    checks = verify.verify_preset("qwen3-moe", weights_quant=wq, token_counts=[1, 40])
    assert all(c.passed for c in checks), verify.format_table(checks)
    assert all(c.tol == verify.ACT_QUANT_TOLERANCE for c in checks)


def test_act_quant_node_attribute():
    import onnx as onnx_

    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
    from ascend_moe_onnx.models import presets
    from ascend_moe_onnx.models.runtime import export_block

    block = presets.build("qwen3-moe", weights_quant=WeightsQuant.from_scheme("int4", None, "int8"), seed=2)
    model = onnx_.load_from_string(export_block(block, 4))
    (node,) = [n for n in model.graph.node if n.op_type == "MoeRoutedExperts"]
    attrs = {a.name: onnx_.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["act_quant"] == 1 and attrs["weight_bits"] == 4 and attrs["block_size"] == 32


@pytest.mark.parametrize("argv,message", [
    (["--act-quant", "int8"], "--act-quant goes with --weights-quant"),
    (["--weights-quant", "int4", "--quant-block-size", "4", "--act-quant", "int8"],
     "int8 activations need a block size that is a multiple of 8 (or 0), got 4"),
    (["--weights-quant", "int8", "--act-quant", "int8", "--target", "cann", "--dtype", "bfloat16"],
     "--act-quant runs in the library's MoeRoutedExperts (--target cpu), not --target cann"),
])
def test_cli_act_quant_usage_errors(tmp_path, capsys, argv, message):
    from ascend_moe_onnx.cli import main as cli

    code = cli.main(["export", "deepseek-v3", *argv, "-o", str(tmp_path / "m.onnx")])
    assert code == 2 and message in capsys.readouterr().err
