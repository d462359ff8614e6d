"""MoeRoutedExperts CPU kernel: the NumPy reference's results on every instruction-set path the
CPU has (ASCEND_MOE_CPU_ISA, a fresh process each), with 1 and 2 intra-op threads (same result:
the last case has several gate/up work items per expert, which two threads split), on shapes that
exercise the vector tails, weight blocks that do not divide into the kernel's 4 streams, more rows
per expert than one register tile holds, repeated experts and clamping; and with quantized weights
(int8 and 4-bit, per channel and per group: blocks with and without a vector tail, rows whose
length leaves a tail after the blocks' full steps; one pair per expert on the quantized down rows'
lane tiles; several pairs per expert on their panel tiles; 4-bit rows read in phases and rows
beside that rule, PHASE_CASES)."""

from __future__ import annotations

import os

import numpy as np
import pytest

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas import moe_routed_experts as spec
from ascend_moe_onnx.onnx_schemas import weight_quant
from tests.cpu_isa import call_on_isa, cpu_isa_paths
from tests.op_table import OPS, node_model

pytest.importorskip("onnxruntime")
OP = next(op for op in OPS if op.name == spec.OP_TYPE)


def cases():
    rng = np.random.default_rng(21)
    out = []
    for T, H, E, I, k, limit in [(1, 70, 6, 33, 4, 0.0), (12, 48, 3, 17, 3, 0.7), (40, 129, 8, 64, 2, 0.0),
                                     (3, 300, 4, 203, 2, 0.0)]:
        idx = rng.integers(0, E, (T, k))
        idx[0, -1] = idx[0, 0]  # a token naming an expert twice (hash routing)
        inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx.astype(np.int32),
                  "routing_weights": rng.random((T, k)).astype(np.float32),
                  "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32),
                  "down_weights": (rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)}
        out.append((inputs, {"swiglu_limit": limit} if limit else {}))
    # quantized: (T, H, E, I, k, bits, block_size); I = 192 gives several gate/up work items
    for T, H, E, I, k, bits, block in [(1, 70, 6, 34, 4, 8, 0), (12, 128, 3, 64, 3, 8, 32), (5, 96, 4, 66, 2, 4, 0),
                                       (9, 256, 5, 192, 2, 4, 64), (3, 100, 4, 50, 2, 4, 10),
                                       (2, 48, 3, 24, 2, 8, 6), *PHASE_CASES]:
        idx = rng.integers(0, E, (T, k))
        idx[0, -1] = idx[0, 0]
        inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx.astype(np.int64),
                  "routing_weights": rng.random((T, k)).astype(np.float32)}
        for name, w in (("gate_up", rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)),
                        ("down", rng.standard_normal((E, H, I)) / np.sqrt(I))):
            inputs[f"{name}_weights"], inputs[f"{name}_scales"] = weight_quant.quantize(w, bits, block)
        out.append((inputs, {"weight_bits": bits, "block_size": block, "swiglu_limit": 0.9 if bits == 4 else 0.0}))
    out += biased_cases(rng)
    out += quantized_pair_count_cases(rng)
    out += lane_tile_cases(rng)
    out += panel_tile_cases(rng)
    out += shared_expert_cases(rng)
    return out


def shared_expert_cases(rng) -> list:
    """A shared expert (the last, in every token's last slot) beside one-pair routed experts: its
    gate/up rows are cut into finer work items than the routed experts' (SplitExpertRows, which
    orders them first), I leaving a short last unit; float32, int8 and 4-bit weights."""
    T, H, E, I, k = 8, 96, 33, 40, 2
    out = []
    for bits, block in [(0, 0), (8, 0), (4, 8)]:
        idx = np.stack([rng.permutation(E - 1)[:T], np.full(T, E - 1)], axis=1)
        if bits:
            out.append(_quantized_case(rng, idx, H, I, bits, block))
            continue
        inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx.astype(np.int64),
                  "routing_weights": rng.random((T, k)).astype(np.float32),
                  "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)).astype(np.float32),
                  "down_weights": (rng.standard_normal((E, H, I)) / np.sqrt(I)).astype(np.float32)}
        out.append((inputs, {}))
    return out


def biased_cases(rng) -> list:
    """gpt-oss's experts (biases, clamp 7, alpha 1.702, beta 1) with float, int8 and 4-bit weights,
    one and many pairs per expert; and each bias alone."""
    glu = {"swiglu_limit": 7.0, "activation_alpha": 1.702, "activation_beta": 1.0}
    out = []
    for T, H, E, I, k, bits, block in [(1, 70, 6, 33, 4, 0, 0), (40, 129, 4, 64, 2, 0, 0), (3, 96, 4, 66, 2, 8, 0),
                                       (20, 128, 3, 64, 2, 4, 32), (1, 160, 6, 64, 2, 4, 0)]:
        idx = rng.integers(0, E, (T, k))
        inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx.astype(np.int64),
                  "routing_weights": rng.random((T, k)).astype(np.float32),
                  "gate_up_bias": rng.standard_normal((E, 2 * I)).astype(np.float32),
                  "down_bias": rng.standard_normal((E, H)).astype(np.float32)}
        attrs = dict(glu)
        for name, w in (("gate_up", rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)),
                        ("down", rng.standard_normal((E, H, I)) / np.sqrt(I))):
            if bits:
                inputs[f"{name}_weights"], inputs[f"{name}_scales"] = weight_quant.quantize(w, bits, block)
                attrs.update(weight_bits=bits, block_size=block)
            else:
                inputs[f"{name}_weights"] = w.astype(np.float32)
        out.append((inputs, attrs))
    out.append(({**out[1][0], "down_bias": None}, glu))
    out.append(({**out[1][0], "gate_up_bias": None}, {"activation_alpha": 0.5}))
    return out


# 4-bit rows read in phases (moe_routed_experts_qtiles.inc: chunks of 8 kLanes inputs, 128 / 64 / 32
# on AVX-512 / AVX2 / baseline) and rows beside the rule: (T, H, E, I, k, bits, block_size) with rows
# of whole chunks on some paths only, blocks of 8 and 16 (several per dword group), 128, 256 (several
# chunks per block), 24 (not a divisor of a chunk) and per channel.
PHASE_CASES = [(4, 384, 5, 256, 2, 4, 128), (3, 512, 4, 256, 2, 4, 256), (5, 256, 4, 128, 2, 4, 16),
               (2, 640, 4, 320, 2, 4, 0), (3, 128, 3, 64, 2, 4, 8), (2, 384, 3, 96, 2, 4, 24)]


def _quantized_case(rng, idx, H: int, I: int, bits: int, block: int) -> tuple:
    """(inputs, attributes) of a quantized call routing ``idx`` [T, k] over E = idx.max() + 1 experts."""
    T, k = idx.shape
    E = int(idx.max()) + 1
    inputs = {"x": rng.standard_normal((T, H)).astype(np.float32), "expert_idx": idx.astype(np.int64),
              "routing_weights": rng.random((T, k)).astype(np.float32)}
    for name, w in (("gate_up", rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)),
                    ("down", rng.standard_normal((E, H, I)) / np.sqrt(I))):
        inputs[f"{name}_weights"], inputs[f"{name}_scales"] = weight_quant.quantize(w, bits, block)
    return inputs, {"weight_bits": bits, "block_size": block}


def lane_tile_cases(rng) -> list:
    """Quantized cases with one pair per expert (T = 3, k = 2, E = 6: each expert once), the down
    rows' lane tiles (moe_routed_experts_lanetiles.inc: 16, 8 or 4 rows a tile, 4 streams of tiles):
    H rows leaving whole tiles outside the streams and rows outside the tiles, rows shorter than a
    vector step, rows with a tail after their steps, group boundaries at and inside a step, and the
    longest rows the tiles take (256)."""
    E, k, T = 6, 2, 3
    out = []
    for H, I, bits, block in [(149, 64, 8, 0), (149, 6, 8, 0), (120, 72, 8, 24), (150, 70, 4, 0),
                              (160, 96, 4, 32), (192, 192, 4, 64), (70, 10, 4, 10), (224, 256, 4, 32), (160, 128, 4, 0),
                              (192, 128, 4, 64), (160, 64, 4, 32), (176, 64, 4, 0), (160, 32, 4, 16),
                              (160, 16, 4, 8), (160, 64, 4, 8)]:
        idx = rng.permutation(E).reshape(T, k)
        out.append(_quantized_case(rng, idx, H, I, bits, block))
    return out


# Pairs per expert around the down rows' switch to the panel tiles (from 3 pairs, rows of at most
# 256 inputs; moe_routed_experts_ptiles.inc) and well past it.
PANEL_PAIRS_PER_EXPERT = (2, 3, 4, 9, 18)


def panel_tile_cases(rng) -> list:
    """Quantized cases whose expert e has PANEL_PAIRS_PER_EXPERT[e] pairs, on the down rows' panel
    tiles (16, 8 or 4 rows a panel): H rows leaving rows outside the panels, rows with a tail after
    their vector steps, rows shorter than a vector step, group boundaries inside a step, the longest
    rows the panels take (256) and rows just longer (the dot-product tiles)."""
    counts = np.array(PANEL_PAIRS_PER_EXPERT)
    E, k = len(counts), 2
    out = []
    for H, I, bits, block in [(150, 64, 8, 0), (154, 70, 8, 14), (100, 6, 8, 0), (150, 70, 4, 0),
                              (160, 96, 4, 32), (128, 256, 4, 64), (40, 258, 4, 0), (72, 256, 8, 0)]:
        idx = rng.permutation(np.repeat(np.arange(E), counts)).reshape(-1, k)
        out.append(_quantized_case(rng, idx, H, I, bits, block))
    return out


# Pairs per expert around the kernel's switches to dequantizing each row once (4 bits: from 8 pairs,
# 24 on AVX-512; 8 bits: from 16; moe_routed_experts_qtiles.inc) and its tiles of 4 pairs, converted
# or dequantized (remainders 1-3).
PAIRS_PER_EXPERT = (1, 5, 7, 8, 10, 15, 16, 18, 23, 25)


def quantized_pair_count_cases(rng) -> list:
    """Quantized cases whose expert e has PAIRS_PER_EXPERT[e] pairs: per channel and per group,
    rows with vector tails and blocks shorter than a vector step."""
    counts = np.array(PAIRS_PER_EXPERT)
    E, k = len(counts), 2
    out = []
    for H, I, bits, block in [(70, 33, 8, 0), (48, 32, 8, 16), (70, 34, 4, 0), (96, 64, 4, 32), (100, 50, 4, 10), (128, 128, 4, 32),
                              (256, 64, 4, 0)]:
        idx = rng.permutation(np.repeat(np.arange(E), counts)).reshape(-1, k)
        out.append(_quantized_case(rng, idx, H, I, bits, block))
    return out


def isa_outputs() -> dict:
    """y of every case with 1 and 2 intra-op threads (run on one ISA path by call_on_isa)."""
    import onnxruntime as ort

    out = {}
    for i, (inputs, attrs) in enumerate(cases()):
        model = node_model(OP, inputs, attrs, ranks=True).SerializeToString()
        for threads in (1, 2):
            sess = ort.InferenceSession(model, ort_custom_ops.session_options(threads),
                                        providers=["CPUExecutionProvider"])
            out[f"{i}_{threads}"] = sess.run(None, {n: v for n, v in inputs.items() if v is not None})[0]
    return out


@pytest.mark.parametrize("isa", sorted({"avx512" if p.startswith("avx512") else p for p in cpu_isa_paths()}))
def test_every_isa_path_matches_the_reference(isa):
    got = call_on_isa(isa, "tests.ops.moe_routed_experts.test_routed_experts_kernel:isa_outputs")
    for i, (inputs, attrs) in enumerate(cases()):
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        np.testing.assert_allclose(got[f"{i}_1"], expected, rtol=1e-4, atol=1e-5, err_msg=f"{isa} case {i}")
        np.testing.assert_array_equal(got[f"{i}_1"], got[f"{i}_2"], err_msg=f"{isa} case {i}: threads")


def test_out_of_range_index_is_reported_not_read():
    import onnxruntime as ort

    inputs, attrs = cases()[1]
    bad = dict(inputs, expert_idx=inputs["expert_idx"].copy())
    bad["expert_idx"][7, 2] = 1 << 30
    sess = ort.InferenceSession(node_model(OP, bad, attrs).SerializeToString(), ort_custom_ops.session_options(1),
                                providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=r"MoeRoutedExperts: input 'expert_idx' must be in \[0, E\) = \[0, 3\), "
                                        r"got 1073741824 at \[7, 2\]"):
        sess.run(None, bad)


def _problem(T, H, k, E, I):
    return {"x": np.zeros((T, H), np.float32), "expert_idx": np.zeros((T, k), np.int64),
            "routing_weights": np.ones((T, k), np.float32),
            "gate_up_weights": np.zeros((E, 2 * I, H), np.float32), "down_weights": np.zeros((E, H, I), np.float32)}


def _run(inputs):
    import onnxruntime as ort

    sess = ort.InferenceSession(node_model(OP, inputs, {}, ranks=True).SerializeToString(),
                                ort_custom_ops.session_options(1), providers=["CPUExecutionProvider"])
    return sess.run(None, inputs)[0]


@pytest.mark.parametrize("E,I", [(4, 3), (1 << 40, 1), (1, 1 << 40)], ids=["small", "huge-E", "huge-I"])
def test_hidden_size_0_gives_an_empty_result(E, I):
    """H = 0: the weights hold no element whatever E and I they declare, and y is [T, 0]; nothing
    is sized from E or T*k*I (which would not fit in memory here)."""
    inputs = _problem(3, 0, 2, E, I)
    assert _run(inputs).shape == (3, 0)
    assert spec.reference(*inputs.values())[0].shape == (3, 0)
    inputs["expert_idx"][2, 1] = -1
    message = f"input 'expert_idx' must be in [0, E) = [0, {E}), got -1 at [2, 1]"
    with pytest.raises(Exception, match=re_escape(message)):
        _run(inputs)


def re_escape(text: str) -> str:
    import re

    return re.escape(text) + r"\s*$"


@pytest.mark.skipif(os.environ.get("ASCEND_MOE_SANITIZERS") == "1",
                    reason="AddressSanitizer aborts on a 16 TiB allocation request instead of failing it")
def test_scratch_beyond_memory_is_a_clear_error():
    """T*k*I activations of 16 TiB (inputs of ~50 MB): an error naming the inputs and the size,
    not std::bad_alloc."""
    inputs = _problem(1 << 20, 1, 1, 1, 1 << 22)
    with pytest.raises(Exception, match=re_escape(
            "MoeRoutedExperts: inputs 'expert_idx' [T, k] = [1048576, 1] and 'down_weights' [E, H, I] = "
            "[1, 1, 4194304] need T*k*I = 1048576*4194304 activations of scratch: 17592202821664 bytes, "
            "which could not be allocated")):
        _run(inputs)
