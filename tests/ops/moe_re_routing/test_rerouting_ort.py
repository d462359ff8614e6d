"""MoeReRouting in ONNX Runtime: the C++ kernel of the custom-op library and the pure-ONNX function
body agree bit for bit with the NumPy reference and the torch op (docs/operators.md §2), and the kernel rejects
every invalid input of docs/operators.md §2.3 with a message naming the input and the value."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest

from ascend_moe_onnx import onnx_schemas, ort_custom_ops

try:
    import torch  # noqa: F401

    torch_available = True
except ImportError:  # the ORT-facing checks still run without torch
    torch_available = False

from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec
from tests.ops.moe_re_routing.rerouting_cases import (
    WORKED_COUNTS,
    assert_outputs_same,
    make_model,
    ort_errors,
    random_bits,
    random_counts,
    run_ort,
    run_torch,
    session,
    type_name,
)

TOKEN_TYPES = spec.TOKEN_TYPES
BACKENDS = ("library", "function")


def _run(backend, tokens, counts, scales=None, threads=None, **attrs):
    model = make_model(type_name(tokens), type_name(counts),
                       None if scales is None else type_name(scales),
                       1 if scales is None else scales.ndim, attrs=attrs,
                       functions=backend == "function")
    return run_ort(session(model, library=backend == "library", threads=threads), tokens, counts, scales)


@pytest.mark.parametrize("token_type", TOKEN_TYPES)
@pytest.mark.parametrize("scales", [None, ("float", 1), ("float16", 2), ("bfloat16", 1)],
                         ids=lambda s: "none" if s is None else f"{s[0]}x{s[1]}")
def test_every_token_and_scale_type(token_type, scales):
    rng = np.random.default_rng(1)
    A = 23
    tokens = random_bits(rng, (A, 7), token_type)
    counts = random_counts(rng, 3, 4, A, np.int32)
    s = None if scales is None else random_bits(rng, (A, 3)[: scales[1]], scales[0])
    expected = spec.reference(tokens, counts, s)
    for backend in BACKENDS:
        assert_outputs_same(_run(backend, tokens, counts, s), expected, f"{backend} {token_type}",
                            function_body=backend == "function")



def _random_case(rng):
    n, e = (int(v) for v in rng.integers(1, 7, 2))
    A = int(rng.choice([0, 1, int(rng.integers(2, 300))], p=[0.1, 0.1, 0.8]))
    H = int(rng.integers(1, 40))
    tokens = random_bits(rng, (A, H), str(rng.choice(TOKEN_TYPES)))
    counts = random_counts(rng, n, e, A, rng.choice([np.int32, np.int64]), skew=bool(rng.integers(2)))
    kind = int(rng.integers(3))
    scales = None
    if kind:
        shape = (A,) if kind == 1 else (A, int(rng.integers(1, 4)))
        scales = random_bits(rng, shape, str(rng.choice(spec.SCALE_TYPES)))
    attrs = {"idx_type": int(rng.integers(2)), "expert_token_num_type": int(rng.integers(2))}
    return tokens, counts, scales, attrs


def test_randomized_sweep_torch_reference_library_and_function_agree():
    rng = np.random.default_rng(1234)
    for case in range(40):
        tokens, counts, scales, attrs = _random_case(rng)
        expected = spec.reference(tokens, counts, scales, **attrs)
        what = f"case {case}: tokens {tokens.dtype}{list(tokens.shape)} counts {counts.tolist()} {attrs}"
        if torch_available:
            assert_outputs_same(run_torch(tokens, counts, scales, **attrs), expected, f"torch {what}")
        for backend in BACKENDS:
            assert_outputs_same(_run(backend, tokens, counts, scales, **attrs), expected, f"{backend} {what}",
                                function_body=backend == "function")


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_chunks_with_skewed_counts(threads):
    """Rows spanning many parallel chunks, one huge block among empty and small ones."""
    rng = np.random.default_rng(3)
    counts = np.zeros((4, 8), np.int64)
    counts[1, 5] = 2500
    counts[0, 0], counts[3, 7], counts[2, 5] = 1, 700, 3
    A = int(counts.sum())
    tokens = random_bits(rng, (A, 512), "float")  # 2 KiB rows: several 1 MiB chunks
    scales = rng.random(A).astype(np.float32)
    for idx_type in (0, 1):
        expected = spec.reference(tokens, counts, scales, idx_type=idx_type)
        got = _run("library", tokens, counts, scales, threads=threads, idx_type=idx_type)
        assert_outputs_same(got, expected, f"threads={threads} idx_type={idx_type}")


@pytest.mark.parametrize("threads", [1, 2])
def test_large_output_with_streaming_stores(threads):
    """Above 32 MiB of tokens the kernel writes with non-temporal stores: odd row sizes make every
    block start at an unaligned destination address."""
    rng = np.random.default_rng(7)
    A, H = 4160, 8193  # int8: 34 MB
    tokens = rng.integers(0, 256, (A, H), dtype=np.uint8).view(np.int8)
    counts = random_counts(rng, 8, 16, A, skew=True)
    expected = spec.reference(tokens, counts, idx_type=1)
    got = _run("library", tokens, counts, threads=threads, idx_type=1)
    assert_outputs_same(got, expected, f"threads={threads}")


def test_index_round_trip():
    rng = np.random.default_rng(4)
    A = 97
    tokens = random_bits(rng, (A, 6), "int8")
    counts = random_counts(rng, 5, 3, A)
    pt, _, gather, _ = _run("library", tokens, counts)
    _, _, scatter, _ = _run("library", tokens, counts, idx_type=1)
    assert sorted(gather.tolist()) == list(range(A))
    np.testing.assert_array_equal(tokens[gather], pt)          # gather: permute_tokens = tokens[idx]
    np.testing.assert_array_equal(pt[scatter], tokens)         # scatter: its inverse
    np.testing.assert_array_equal(scatter[gather], np.arange(A))
    np.testing.assert_array_equal(gather[scatter], np.arange(A))


def test_ort_shape_inference_of_the_library_kernel():
    model = make_model("int8", "int32", "bfloat16", 2)
    outs = {o.name: (o.type, o.shape) for o in session(model).get_outputs()}
    assert outs == {
        "permute_tokens": ("tensor(int8)", ["A", "H"]),
        "permute_per_token_scales": ("tensor(bfloat16)", ["A", "S"]),
        "permute_token_idx": ("tensor(int32)", ["A"]),
        "expert_token_num": ("tensor(int32)", ["E"]),
    }
    outs = {o.name: (o.type, o.shape) for o in session(make_model("float8e5m2", "int64")).get_outputs()}
    assert outs["permute_per_token_scales"] == ("tensor(float)", [0])
    assert outs["expert_token_num"] == ("tensor(int64)", ["E"])


@pytest.mark.parametrize("unknown", ["tokens", "per_token_scales"])
def test_unknown_rank_inputs_give_no_scalar_outputs(unknown):
    """With an input of unknown rank the outputs shaped like it stay unknown: they were declared
    scalars, and ORT's optimiser then folded Shape(permute_tokens) to [] (true [6, 2])."""
    import onnxruntime as ort
    from onnx import TensorProto, helper

    tokens = np.arange(12, dtype=np.float32).reshape(6, 2)
    scales = np.arange(6, dtype=np.float32)
    counts = WORKED_COUNTS.astype(np.int64)
    dims = {"tokens": ["A", "H"], "per_token_scales": ["A"]}
    dims[unknown] = None
    inputs = [helper.make_tensor_value_info("tokens", TensorProto.FLOAT, dims["tokens"]),
              helper.make_tensor_value_info("counts", TensorProto.INT64, ["N", "E"]),
              helper.make_tensor_value_info("scales", TensorProto.FLOAT, dims["per_token_scales"])]
    nodes = [helper.make_node(spec.OP_TYPE, ["tokens", "counts", "scales"], list(spec.OUTPUT_NAMES),
                              domain=onnx_schemas.DOMAIN),
             helper.make_node("Shape", ["permute_tokens"], ["tokens_shape"]),
             helper.make_node("Shape", ["permute_per_token_scales"], ["scales_shape"])]
    outputs = [helper.make_tensor_value_info(n, TensorProto.INT64, None) for n in ("tokens_shape", "scales_shape")]
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(onnx_schemas.DOMAIN, 1)],
                              ir_version=10)
    so = ort_custom_ops.session_options(1)
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    tokens_shape, scales_shape = sess.run(None, {"tokens": tokens, "counts": counts, "scales": scales})
    assert tokens_shape.tolist() == [6, 2]
    assert scales_shape.tolist() == [6]


def test_function_body_alone_has_no_custom_nodes():
    # The graph outputs get their shapes from the registered schema's inference (the checker
    # requires a shape on every main-graph output); registering here keeps the test order-free.
    onnx_schemas.register()
    model = make_model("int8", "int64", "float", 1, functions=True)
    (func,) = model.functions
    assert (func.domain, func.name) == ("ascend.moe", "MoeReRouting")
    assert {n.domain for n in func.node} == {""}
    onnx.checker.check_model(onnx.shape_inference.infer_shapes(model, strict_mode=True), full_check=True)




@pytest.mark.parametrize("attr", ["idx_type", "expert_token_num_type"])
def test_bad_attribute_with_typed_graph_outputs_gets_the_library_message(attr):
    """Shape inference declares the outputs even for a node it rejects: ORT used to type them like
    the node's last input (scales, float) and fail with its own "Type Error" on permute_tokens
    (declared float16) before the library could name the attribute."""
    from onnx import TensorProto, helper

    inputs = [helper.make_tensor_value_info("tokens", TensorProto.FLOAT16, ["A", "H"]),
              helper.make_tensor_value_info("counts", TensorProto.INT64, ["N", "E"]),
              helper.make_tensor_value_info("scales", TensorProto.FLOAT, ["A"])]
    types = [TensorProto.FLOAT16, TensorProto.FLOAT, TensorProto.INT32, TensorProto.INT64]
    outputs = [helper.make_tensor_value_info(n, t, None) for n, t in zip(spec.OUTPUT_NAMES, types)]
    node = helper.make_node(spec.OP_TYPE, ["tokens", "counts", "scales"], list(spec.OUTPUT_NAMES),
                            domain=onnx_schemas.DOMAIN, **{attr: 2})
    model = helper.make_model(helper.make_graph([node], "g", inputs, outputs),
                              opset_imports=[helper.make_opsetid("", 20), helper.make_opsetid(onnx_schemas.DOMAIN, 1)],
                              ir_version=10)
    with pytest.raises(ort_errors(), match=re.escape(f"MoeReRouting: attribute '{attr}' must be 0")):
        session(model)


@pytest.mark.parametrize("copy", ["loop", "memcpy"])
def test_both_block_copy_routines(copy):
    """The token blocks are copied by the kernel's SSE2 loop on AMD CPUs with AVX-512 and by
    memcpy elsewhere (measured faster on each, docs/kernel.md); ASCEND_MOE_REROUTING_COPY forces
    either, so both are checked on any machine (a child process: the choice is read once)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    script = f"""
import sys
sys.path.insert(0, {str(root)!r})
import tests.ops.moe_re_routing.test_rerouting_ort as t
t.BACKENDS = ("library",)
t.test_randomized_sweep_torch_reference_library_and_function_agree()
t.test_parallel_chunks_with_skewed_counts(1)
t.test_parallel_chunks_with_skewed_counts(2)
print("ok")
"""
    env = dict(os.environ, ASCEND_MOE_REROUTING_COPY=copy,
               ASCEND_MOE_ORT_LIBRARY=ort_custom_ops.get_library_path())
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0 and "ok" in proc.stdout, proc.stderr[-3000:]
