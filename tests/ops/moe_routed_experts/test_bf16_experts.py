"""MoeRoutedExperts with bfloat16 weights (docs/quantization.md, bfloat16 experts): the kernel
against the NumPy reference on every instruction-set path and bfloat16 dot-product path this CPU
runs (the exact emulation of vdpbf16ps included), at one and many pairs per expert and with H and I
off the vector widths; the function body; the reference against the float64 block; the refusals."""

from __future__ import annotations

import re

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas import moe_routed_experts as spec
from tests.cpu_isa import call_on_isa, cpu_isa_paths
from tests.ops.moe_routed_experts.experts_model import experts_model

WEIGHTS = ("gate_up_weights", "down_weights")
# kernel vs the reference: the same products, float32 sums in another order; a SwiGLU value near a
# bfloat16 rounding boundary may round to the neighbouring value (docs/quantization.md)
KERNEL_RTOL = 2e-3


def case(seed: int, T: int, H: int, I: int, E: int, k: int, limit: float = 0.0,
         index_type=np.int64) -> tuple[dict, dict]:
    """(inputs, attributes) of one call with random bfloat16 weights."""
    rng = np.random.default_rng(seed)
    idx = np.stack([rng.choice(E, size=k, replace=k > E) for _ in range(T)]).astype(index_type)
    inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx,
              "routing_weights": rng.random((T, k)).astype(np.float32),
              "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(ml_dtypes.bfloat16),
              "down_weights": (rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(ml_dtypes.bfloat16)}
    return inputs, ({"swiglu_limit": limit} if limit else {})


def cases() -> list[tuple[dict, dict]]:
    """Decode (one pair per expert: lane tiles on short rows), a few and many pairs per expert (rows
    widened once; panel tiles on short down rows), H and I not multiples of any vector width, a
    clamp, int32 indices, repeated experts in a token, and H = 7168-like long rows."""
    return [
        case(1, 1, 64, 32, 8, 4),
        case(2, 1, 300, 37, 6, 3),  # tails everywhere
        case(3, 3, 96, 64, 4, 2, limit=0.5),
        case(4, 40, 130, 48, 6, 4),  # ~27 pairs per expert: widened rows, dot tiles on I = 48
        case(5, 48, 256, 64, 3, 2, index_type=np.int32),  # ~32 pairs: panel tiles (I = 64)
        case(6, 7, 20, 6, 3, 5, limit=1.0),  # k > E: repeats; rows shorter than a vector
        case(7, 9, 1040, 40, 4, 2),
        biased(case(8, 5, 96, 48, 4, 2)),  # gpt-oss's experts: biases, clamp, alpha, beta
        biased(case(9, 30, 64, 32, 3, 3)),
    ]


def biased(call: tuple[dict, dict]) -> tuple[dict, dict]:
    """``call`` with float expert biases and gpt-oss's activation (clamp 7, alpha 1.702, beta 1)."""
    inputs, _ = call
    rng = np.random.default_rng(len(inputs["x"]))
    E, two_i, H = inputs["gate_up_weights"].shape
    return ({**inputs, "gate_up_bias": rng.standard_normal((E, two_i)).astype(np.float32),
             "down_bias": rng.standard_normal((E, H)).astype(np.float32)},
            {"swiglu_limit": 7.0, "activation_alpha": 1.702, "activation_beta": 1.0})




def feed(inputs: dict, names) -> dict:
    """Session inputs: bfloat16 arrays as OrtValues of ONNX's bfloat16 type."""
    import onnxruntime as ort

    out = {}
    for n in names:
        v = inputs[n]
        if v.dtype == ml_dtypes.bfloat16:
            v = ort.OrtValue.ortvalue_from_numpy_with_onnx_type(v.view(np.uint16), TensorProto.BFLOAT16)
        out[n] = v
    return out


def run_cases(constant_weights: bool) -> dict:
    """y of every case with 1 and 2 intra-op threads (in a child process on one path)."""
    import onnxruntime as ort

    out = {}
    for i, (inputs, attrs) in enumerate(cases()):
        names = [n for n in inputs if not (constant_weights and n in WEIGHTS)]
        for threads in (1, 2):
            sess = ort.InferenceSession(experts_model(inputs, attrs, constant_weights), ort_custom_ops.session_options(threads),
                                        providers=["CPUExecutionProvider"])
            out[f"{i}_{threads}"] = sess.run(None, feed(inputs, names))[0]
    return out


def bf16_dot_paths() -> list[str]:
    """The bfloat16 dot-product paths (ASCEND_MOE_CPU_BF16_DOT) this CPU runs, beside the widening
    tiles of each ISA path."""
    from pathlib import Path

    try:
        flags = set(Path("/proc/cpuinfo").read_text().split("flags", 1)[1].split("\n", 1)[0].split())
    except (OSError, IndexError):
        return []
    paths = []
    if {"avx2", "fma"} <= flags:
        paths.append("emulated-bf16")
    if {"avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_bf16"} <= flags:
        paths.append("avx512bf16")
    return paths


def _run(path: str, constant_weights: bool) -> dict:
    """run_cases on an ISA path (widening tiles) or a bfloat16 dot path."""
    import os

    if path in ("emulated-bf16", "avx512bf16"):
        os.environ["ASCEND_MOE_CPU_BF16_DOT"] = path
        isa = "avx2" if path == "emulated-bf16" else "avx512"
    else:
        os.environ["ASCEND_MOE_CPU_BF16_DOT"] = "widen"
        isa = path
    try:
        return call_on_isa(isa, "tests.ops.moe_routed_experts.test_bf16_experts:run_cases", constant_weights)
    finally:
        del os.environ["ASCEND_MOE_CPU_BF16_DOT"]


def _assert_close(got: np.ndarray, expected: np.ndarray, what: str) -> None:
    scale = np.abs(expected).max(axis=1, keepdims=True) + 1e-30
    err = np.abs(got.astype(np.float64) - expected) / scale
    assert err.max() <= KERNEL_RTOL, f"{what}: max error {err.max():.2e} of the row's largest |y|"


@pytest.mark.parametrize("constant_weights", [True, False], ids=["initializers", "graph-inputs"])
@pytest.mark.parametrize("path", cpu_isa_paths() + bf16_dot_paths())
def test_every_path_matches_the_reference(path, constant_weights):
    got = _run(path, constant_weights)
    for i, (inputs, attrs) in enumerate(cases()):
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        _assert_close(got[f"{i}_1"], expected, f"{path} case {i}")
        # the split over threads keeps every sum's order (docs/operators.md §3)
        np.testing.assert_array_equal(got[f"{i}_2"], got[f"{i}_1"], err_msg=f"{path} case {i}: 2 threads")


def test_reference_rounds_the_rows_to_bfloat16():
    """The reference's products take bfloat16 rows: a row that rounds away from its float32 value
    gives the rounded row's result, and the bfloat16 block stays within 2^-8 rms of the float64
    block on the same (bfloat16) weights with unrounded rows."""
    inputs, attrs = case(11, 32, 256, 128, 8, 4)
    args = [inputs.get(n) for n in spec.INPUT_NAMES]
    (y,) = spec.reference(*args, **attrs)
    rounded = dict(inputs, x=spec.round_bf16(inputs["x"]))
    (y_rounded,) = spec.reference(*[rounded.get(n) for n in spec.INPUT_NAMES], **attrs)
    np.testing.assert_array_equal(y, y_rounded)
    as_float = dict(inputs, gate_up_weights=inputs["gate_up_weights"].astype(np.float32),
                    down_weights=inputs["down_weights"].astype(np.float32))
    (y32,) = spec.reference(*[as_float.get(n) for n in spec.INPUT_NAMES], **attrs)
    rel = np.sqrt(np.mean((y.astype(np.float64) - y32) ** 2) / np.mean(y32.astype(np.float64) ** 2))
    assert 1e-4 < rel < 2.0 ** -8, rel


def test_function_body_matches_the_reference():
    """Without the library, ONNX Runtime runs the op's function body: bfloat16 weights cast to
    float, the rows rounded to bfloat16 (CastLike), the same products."""
    import onnxruntime as ort

    from ascend_moe_onnx.onnx_schemas import functions

    for i, (inputs, attrs) in enumerate(cases()[:4]):
        proto = functions.attach_functions(_model_proto(inputs, attrs))
        sess = ort.InferenceSession(proto.SerializeToString(), providers=["CPUExecutionProvider"])
        got = sess.run(None, feed(inputs, [n for n in inputs if n not in WEIGHTS]))[0]
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        _assert_close(got, expected, f"function body case {i}")


def _model_proto(inputs: dict, attrs: dict):
    import onnx

    return onnx.load_from_string(experts_model(inputs, attrs, constant_weights=True))


BAD = [
    ({"weight_bits": 4}, False, "attribute 'weight_bits' = 4 goes with int8 weights, got bfloat16 gate_up_weights "
                                "(bfloat16 weights take the default, 8)"),
    ({"block_size": 32}, False, "attribute 'block_size' = 32 goes with int8 weights, got bfloat16 gate_up_weights "
                                "(bfloat16 weights take the default, 0)"),
    ({"act_quant": 1}, False, "attribute 'act_quant' = 1 needs int8 weights, got bfloat16 gate_up_weights"),
    ({}, True, "input 'gate_up_scales' goes with int8 weights only: the weights are bfloat16"),
]


@pytest.mark.parametrize("attrs,scales,message", BAD, ids=["weight-bits", "block-size", "act-quant", "scales"])
def test_refusals_name_the_attribute_or_input(attrs, scales, message):
    import onnxruntime as ort

    inputs, _ = case(3, 2, 64, 16, 4, 2)
    if scales:
        inputs["gate_up_scales"] = np.ones((4, 32), np.float32)
        inputs["down_scales"] = np.ones((4, 64), np.float32)
    with pytest.raises(ValueError, match=re.escape(message)):
        spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
    sess = ort.InferenceSession(experts_model(inputs, attrs, constant_weights=False), ort_custom_ops.session_options(1),
                                providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=re.escape(message)):
        sess.run(None, feed(inputs, list(inputs)))


def test_shape_inference_takes_bfloat16_weights():
    import onnx

    from ascend_moe_onnx import onnx_schemas

    onnx_schemas.register()
    inputs, attrs = case(1, 3, 64, 32, 8, 2)
    proto = _model_proto(inputs, attrs)
    del proto.graph.output[:]
    proto.graph.output.append(helper.make_empty_tensor_value_info("y"))
    inferred = onnx.shape_inference.infer_shapes(proto, check_type=True, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    (y,) = inferred.graph.output
    assert y.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_value for d in y.type.tensor_type.shape.dim] == [3, 64]


def test_subnormal_rows_read_as_zero_on_the_vdpbf16ps_path():
    """vdpbf16ps reads subnormal bfloat16 inputs as zero (the emulation under DAZ / FTZ): x of
    subnormal values against large weights gives y = 0 there, the widening tiles keep the products."""
    if "emulated-bf16" not in bf16_dot_paths():
        pytest.skip("no AVX2")
    got = {p: call_on_isa("avx2", "tests.ops.moe_routed_experts.test_bf16_experts:run_subnormal", p)
           for p in ("emulated-bf16", "widen")}
    assert not got["emulated-bf16"].any()
    assert np.abs(got["widen"]).min() > 0


def run_subnormal(dot: str) -> np.ndarray:
    """y of a call whose x is bfloat16-subnormal (2^-130) against weights of 2^100, on ``dot``."""
    import os

    import onnxruntime as ort

    os.environ["ASCEND_MOE_CPU_BF16_DOT"] = dot  # read once, by this child process
    inputs, attrs = case(1, 2, 32, 16, 2, 1)
    inputs["x"] = np.full((2, 32), 2.0 ** -130, np.float32)
    inputs["expert_idx"][:] = 0
    inputs["gate_up_weights"][:] = ml_dtypes.bfloat16(2.0 ** 100)
    inputs["down_weights"][:] = ml_dtypes.bfloat16(1.0)
    sess = ort.InferenceSession(experts_model(inputs, attrs, constant_weights=True), ort_custom_ops.session_options(1),
                                providers=["CPUExecutionProvider"])
    return sess.run(None, feed(inputs, [n for n in inputs if n not in WEIGHTS]))[0]


@pytest.mark.parametrize("preset", ["deepseek-v3", "qwen3-moe"])
def test_bfloat16_presets_export_and_verify(preset):
    """--weights-quant bfloat16: one MoeRoutedExperts node on bfloat16 initializers (the torch
    block's rounded weights, the shared expert folded in), within verify's bfloat16 tolerance of
    the torch block, which keeps its rows in float32."""
    import onnx

    from ascend_moe_onnx.cli import verify
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
    from ascend_moe_onnx.models import presets
    from ascend_moe_onnx.models.runtime import export_block

    wq = WeightsQuant.from_scheme("bfloat16")
    checks = verify.verify_preset(preset, weights_quant=wq, token_counts=[1, 40])
    assert all(c.passed for c in checks), verify.format_table(checks)
    assert all(c.tol == verify.BF16_PRODUCTS_TOLERANCE for c in checks)
    block = presets.build(preset, weights_quant=wq, seed=2)
    graph = onnx.load_from_string(export_block(block, 4)).graph
    (node,) = [n for n in graph.node if n.op_type == "MoeRoutedExperts"]
    assert len(node.input) == 5 and not node.attribute[1:]  # no scales, no quantization attribute
    inits = {t.name: t for t in graph.initializer}
    fc2 = numpy_helper.to_array(inits[node.input[4]])
    assert fc2.dtype == ml_dtypes.bfloat16
    E = block.experts.down_proj.shape[0]
    np.testing.assert_array_equal(fc2[:E].astype(np.float32), block.experts.down_proj.detach().numpy())
    assert not [t for t in graph.initializer if t.data_type == TensorProto.FLOAT and len(t.dims) == 3]


def test_bfloat16_values_are_stored_as_read():
    """Weights already bfloat16 (a bfloat16 checkpoint's, held in float32) are stored unchanged;
    other float32 values are rounded to nearest even, once."""
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    wq = WeightsQuant.from_scheme("bfloat16")
    read = np.array([[1.0, -2.5, 3.140625, 2.0 ** -130]], np.float32)  # bfloat16 values
    q, scales = wq.encode(read)
    assert scales is None and q.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(q.astype(np.float32), read)
    halfway = np.array([1.0 + 2.0 ** -8, 1.0 + 3 * 2.0 ** -8], np.float32)  # ties: to even
    np.testing.assert_array_equal(wq.encode(halfway)[0].astype(np.float32), [1.0, 1.0 + 2.0 ** -6])


@pytest.mark.parametrize("argv,message", [
    (["--weights-quant", "bfloat16", "--quant-block-size", "16"], "bfloat16 weights have no scales"),
    (["--weights-quant", "bfloat16", "--act-quant", "int8"], "bfloat16 weights take float activations"),
    (["--weights-quant", "bfloat16", "--target", "cann"], "--weights-quant bfloat16 runs in the library's"),
])
def test_cli_refusals(tmp_path, capsys, argv, message):
    from ascend_moe_onnx.cli import main as cli

    code = cli.main(["export", "deepseek-v3", *argv, "-o", str(tmp_path / "m.onnx")])
    assert code == 2 and message in capsys.readouterr().err


def test_cli_export_hf_checkpoint_bfloat16(tmp_path, capsys):
    """``export --hf DIR --weights-quant bfloat16`` of a bfloat16 checkpoint: the stored experts are
    the checkpoint's values bit for bit, and the graph computes what the HF model computes (float32
    rows) within the bfloat16 rows' rounding."""
    import onnx
    import onnxruntime as ort
    import torch

    from ascend_moe_onnx.cli import main as cli
    from tests import hf_cases

    model = hf_cases.model("deepseek_v3")
    with torch.no_grad():
        for p in model.parameters():
            p.copy_(p.to(torch.bfloat16).float())  # a bfloat16 checkpoint's values, held in float32
    model.to(torch.bfloat16).save_pretrained(tmp_path / "ckpt")
    out = tmp_path / "m.onnx"
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--weights-quant", "bfloat16", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    graph = onnx.load(str(out)).graph
    nodes = [n for n in graph.node if n.op_type == "MoeRoutedExperts"]
    assert nodes
    inits = {t.name: t for t in graph.initializer}
    stored = numpy_helper.to_array(inits[nodes[0].input[4]])
    experts = [m for m in model.modules() if hasattr(m, "experts") and hasattr(m, "gate")][0].experts
    E = stored.shape[0] - 1  # the shared expert folded in as one more
    down = np.stack([experts[e].down_proj.weight.detach().float().numpy() for e in range(E)]) \
        if isinstance(experts, torch.nn.ModuleList) else experts.down_proj.detach().float().numpy()
    np.testing.assert_array_equal(stored[:E].astype(np.float32), down)
    ids = torch.randint(0, model.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model.float()(ids).logits.numpy()
    session = ort.InferenceSession(str(out), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    got = session.run(None, {"input_ids": ids.numpy()})[0]
    assert np.abs(got - ref).max() / np.abs(ref).max() <= 3e-2
