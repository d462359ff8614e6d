"""MoeFinalizeRoutingV2 and MoeTokenUnpermute semantics (docs/operators.md §8, §9): the reference against
loops written from the Ascend definitions, the C++ kernel and the function body against the reference
over modes, types, K = 1..8, 0 tokens and partial inputs, out-of-range indices in the body, and export."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from ascend_moe_onnx.onnx_schemas import moe_finalize_routing_v2 as fin
from ascend_moe_onnx.onnx_schemas import moe_token_unpermute as unp
from ascend_moe_onnx.onnx_schemas.functions import attach_functions
from tests.cpu_isa import call_on_isa, cpu_isa_paths
from tests.op_table import OPS, node_model, present
from tests.ops.moe_finalize_routing_v2.finalize_cases import finalize_inputs, unpermute_inputs
from tests.ops.moe_re_routing.rerouting_cases import ort_errors, run_feeds, session

FINALIZE = next(op for op in OPS if op.name == "MoeFinalizeRoutingV2")
UNPERMUTE = next(op for op in OPS if op.name == "MoeTokenUnpermute")
BF16 = np.dtype(ml_dtypes.bfloat16)
DTYPES = [np.dtype(np.float32), np.dtype(np.float16), BF16]


def _loop_finalize(inputs: dict, mode: int) -> np.ndarray:
    """torch_npu's documented loop: y[i] += s[i, k] * (x[idx[...]] + bias[expert[i, k]]), -1 = zero row."""
    x = inputs["expanded_x"].astype(np.float64)
    H = x.shape[-1]
    x = x.reshape(-1, H)
    idx = inputs["expanded_row_idx"]
    scales = inputs.get("scales")
    K = 1 if scales is None else scales.shape[1]
    N = idx.shape[0] // K
    out = np.zeros((N, H))
    for name in ("x1", "x2"):
        if inputs.get(name) is not None:
            out += inputs[name].astype(np.float64)
    for i in range(N):
        for k in range(K):
            v = idx[i * K + k] if mode in (2, 3) else idx[k * N + i]
            row = 0.0 if v == -1 else x[v]
            s = 1.0 if scales is None else float(scales[i, k])
            b = 0.0 if inputs.get("bias") is None else inputs["bias"][inputs["expert_idx"][i, k]].astype(np.float64)
            out[i] += s * (row + b)
    return out


def _loop_unpermute(tokens, sorted_indices, probs) -> np.ndarray:
    """Megatron's unpermute as op-plugin's test states it: index_copy by argsort(sorted_indices),
    then the weighted sum over the K slots of each token (rows past P dropped)."""
    N = sorted_indices.shape[0] if probs is None else probs.shape[0]
    K = 1 if probs is None else probs.shape[1]
    P, H = tokens.shape
    flat = np.zeros((N * K, H))
    megatron_sorted = np.argsort(sorted_indices, kind="stable")  # permuted row p holds flat slot megatron_sorted[p]
    flat[megatron_sorted[:P]] = tokens.astype(np.float64)
    flat = flat.reshape(N, K, H)
    if probs is not None:
        flat = flat * probs.astype(np.float64)[:, :, None]
    return flat.sum(axis=1)


def _close(got, expected64, dtype, what=""):
    tol = {np.dtype(np.float32): 1e-5, np.dtype(np.float16): 2e-3, BF16: 1.6e-2}[np.dtype(dtype)]
    np.testing.assert_allclose(np.asarray(got).astype(np.float64), expected64, rtol=tol, atol=tol, err_msg=what)


def _ulp_equal(got, expected, what=""):
    """Equal up to one unit in the last place of the output type, or within 1e-5 where the sum
    cancels (float32 sums in another order, or with fused multiply-adds, differ in the last bits)."""
    g, e = np.asarray(got), np.asarray(expected)
    assert g.dtype == e.dtype and g.shape == e.shape, what
    bits = {4: np.int32, 2: np.int16}[g.dtype.itemsize]
    ulps = np.abs(g.view(bits).astype(np.int64) - e.view(bits).astype(np.int64))
    near = np.abs(g.astype(np.float64) - e.astype(np.float64)) <= 1e-5
    bad = (ulps > 1) & ~near
    assert not bad.any(), (what, g[bad][:5], e[bad][:5])


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
@pytest.mark.parametrize("optional", [True, False])
def test_reference_is_the_documented_loop(mode, optional):
    inputs = finalize_inputs(np.random.default_rng(mode), mode=mode, optional=optional)
    (y,) = fin.reference(**inputs, drop_pad_mode=mode)
    _close(y, _loop_finalize(inputs, mode), np.float32)


def test_unpermute_reference_is_megatrons_unpermute():
    rng = np.random.default_rng(3)
    for dropped, probs in [(0, True), (5, True), (0, False)]:
        inputs = unpermute_inputs(rng, N=7, K=3 if probs else 1, dropped=dropped, probs=probs)
        (y,) = unp.reference(**inputs)
        _close(y, _loop_unpermute(inputs["permuted_tokens"], inputs["sorted_indices"], inputs.get("probs")),
               np.float32)


def test_unpermute_inverts_a_permute():
    """Tokens permuted as npu_moe_token_permute does (rows sorted by expert, sorted_indices the
    inverse of that sort) come back exactly with probabilities 1 / K... up to float32 rounding."""
    rng = np.random.default_rng(4)
    N, K, H, E = 9, 4, 16, 5
    tokens = rng.standard_normal((N, H)).astype(np.float32)
    experts = rng.integers(0, E, (N, K))
    order = np.argsort(experts.reshape(-1), kind="stable")
    permuted = tokens[order // K]
    sorted_indices = np.argsort(order, kind="stable").astype(np.int32)
    y = unp.reference(permuted, sorted_indices, np.full((N, K), 1 / K, np.float32))[0]
    np.testing.assert_allclose(y, tokens, rtol=1e-6, atol=1e-6)


def _kernel_and_body(op, inputs, attrs, body=True):
    model = node_model(op, inputs, attrs, ranks=True)
    feeds = present(inputs)
    got = run_feeds(session(model), feeds)[0]
    got_body = run_feeds(session(attach_functions(model), library=False), feeds)[0] if body else None
    return got, got_body


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_finalize_kernel_and_body_match_the_reference(dtype, mode):
    rng = np.random.default_rng(10 + mode)
    for k, h, optional in [(1, 7, True), (2, 16, False), (5, 35, True), (8, 70, True)]:
        inputs = finalize_inputs(rng, mode=mode, N=9, K=k, H=h, E=max(k, 3), C=20, dtype=dtype,
                                 scale_dtype=np.float16 if k == 5 else np.float32, optional=optional)
        (expected,) = fin.reference(**inputs, drop_pad_mode=mode)
        got, got_body = _kernel_and_body(FINALIZE, inputs, {"drop_pad_mode": mode})
        _ulp_equal(got, expected, f"kernel k={k}")
        _ulp_equal(got_body, expected, f"body k={k}")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.name)
def test_unpermute_kernel_and_body_match_the_reference(dtype):
    rng = np.random.default_rng(30)
    for k, h, dropped in [(1, 5, 0), (2, 48, 3), (8, 100, 9), (11, 37, 4)]:  # K > 8: tail in groups
        inputs = unpermute_inputs(rng, N=11, K=k, H=h, dropped=dropped, dtype=dtype, prob_dtype=BF16)
        inputs["probs"][0, 0] = 0
        (expected,) = unp.reference(**inputs)
        got, got_body = _kernel_and_body(UNPERMUTE, inputs, {})
        _ulp_equal(got, expected, f"kernel k={k}")
        _ulp_equal(got_body, expected, f"body k={k}")


def test_large_output_takes_the_streaming_stores():
    """An output of >= 32 MiB is written with non-temporal stores (a separate code path)."""
    rng = np.random.default_rng(45)
    inputs = unpermute_inputs(rng, N=2048, K=2, H=8192, dtype=BF16)
    got, _ = _kernel_and_body(UNPERMUTE, inputs, {}, body=False)
    _ulp_equal(got, unp.reference(**inputs)[0])


@pytest.mark.parametrize("dtype,hidden", [(BF16, 8200), (np.dtype(np.float32), 4100)], ids=["bfloat16", "float32"])
def test_streaming_stores_on_rows_off_64_byte_boundaries(dtype, hidden):
    """Rows whose bytes are no multiple of 64 start off the cache-line grid (16, 32, 48 bytes in):
    each row's head up to its first 64-byte boundary is written the ordinary way, the rest with
    non-temporal stores, and the tail past the last whole 16 columns through the padded path."""
    rng = np.random.default_rng(46)
    rows = (32 << 20) // (hidden * dtype.itemsize) + 3  # an output past the streaming threshold
    inputs = unpermute_inputs(rng, N=rows, K=2, H=hidden, dtype=dtype)
    got, _ = _kernel_and_body(UNPERMUTE, inputs, {}, body=False)
    _ulp_equal(got, unp.reference(**inputs)[0])


def test_zero_tokens_and_unused_experts():
    rng = np.random.default_rng(40)
    for mode in range(4):
        inputs = finalize_inputs(rng, mode=mode, N=0, K=4, H=9, E=6, C=2)
        got, got_body = _kernel_and_body(FINALIZE, inputs, {"drop_pad_mode": mode})
        assert got.shape == got_body.shape == (0, 9)
    inputs = unpermute_inputs(rng, N=0, K=3, H=9)
    got, got_body = _kernel_and_body(UNPERMUTE, inputs, {})
    assert got.shape == got_body.shape == (0, 9)
    # drop-pad layout where most experts get no row at all
    inputs = finalize_inputs(rng, mode=3, N=2, K=2, H=5, E=8, C=4)
    got, _ = _kernel_and_body(FINALIZE, inputs, {"drop_pad_mode": 3}, body=False)
    _ulp_equal(got, fin.reference(**inputs, drop_pad_mode=3)[0])


@pytest.mark.parametrize("bad", [-2, -3, 6, 2**40])
def test_body_fails_on_out_of_range_indices_instead_of_wrapping(bad):
    """ONNX Gather would wrap a negative index to a row from the end: the body turns every
    out-of-range index (-1 is a zero row) into one that no Gather accepts."""
    rng = np.random.default_rng(50)
    inputs = finalize_inputs(rng, mode=0, N=3, K=2, H=4, index_dtype=np.int64)
    inputs["expanded_row_idx"][2] = bad
    model = attach_functions(node_model(FINALIZE, inputs, {}, ranks=True))
    with pytest.raises(ort_errors(), match="out of data bounds"):
        run_feeds(session(model, library=False), present(inputs))


@pytest.mark.parametrize("bad", [-1, -3, 6, 2**40])
def test_unpermute_body_fails_on_out_of_range_indices_instead_of_wrapping(bad):
    rng = np.random.default_rng(50)
    u = unpermute_inputs(rng, N=3, K=2, H=4, index_dtype=np.int64)
    u["sorted_indices"][1] = bad
    model = attach_functions(node_model(UNPERMUTE, u, {}, ranks=True))
    with pytest.raises(ort_errors(), match="out of data bounds"):
        run_feeds(session(model, library=False), present(u))


def test_body_fails_on_out_of_range_experts():
    rng = np.random.default_rng(51)
    inputs = finalize_inputs(rng, mode=2, N=3, K=2, H=4, E=4)
    inputs["expert_idx"][1, 1] = -1
    model = attach_functions(node_model(FINALIZE, inputs, {"drop_pad_mode": 2}, ranks=True))
    with pytest.raises(ort_errors(), match="out of data bounds"):
        run_feeds(session(model, library=False), present(inputs))


@pytest.mark.parametrize("isa", cpu_isa_paths())
def test_instruction_set_paths_match_the_reference(isa):
    """Every ISA path of the row loop (portable, AVX2 + F16C, AVX-512) gives the reference's
    bfloat16 and float16 outputs up to one ulp."""
    outs = call_on_isa(isa, "tests.ops.moe_finalize_routing_v2.finalize_cases:isa_outputs")
    rng = np.random.default_rng(60)
    expected = []
    for dtype in (BF16, np.dtype(np.float16)):
        inputs = finalize_inputs(rng, mode=1, N=6, K=3, H=40, dtype=dtype)
        expected.append(fin.reference(**inputs, drop_pad_mode=1)[0].view(np.uint16).reshape(-1))
    n = expected[0].size
    _ulp_equal(outs[:n].view(BF16), expected[0].view(BF16), f"{isa} bfloat16")
    _ulp_equal(outs[n:].view(np.float16), expected[1].view(np.float16), f"{isa} float16")


def test_dynamo_export_keeps_the_token_dim_and_runs():
    torch = pytest.importorskip("torch")
    from ascend_moe_onnx import exporters

    class Combine(torch.nn.Module):
        def forward(self, expert_out, row_idx, weights, residual, permuted, sorted_indices):
            a = torch.ops.ascend_moe.moe_finalize_routing_v2(expert_out, row_idx, residual, None, None, weights,
                                                              None, 2)
            b = torch.ops.ascend_moe.moe_token_unpermute(permuted, sorted_indices, weights)
            return a + b

    def call(n, k=3, h=8, seed=0):
        g = torch.Generator().manual_seed(seed)
        return (torch.randn(n * k, h, generator=g), torch.randperm(n * k, generator=g).int(),
                torch.rand(n, k, generator=g), torch.randn(n, h, generator=g),
                torch.randn(n * k, h, generator=g), torch.randperm(n * k, generator=g).int())

    tokens = torch.export.Dim("tokens")
    slots = torch.export.Dim("slots")
    shapes = ({0: slots}, {0: slots}, {0: tokens}, {0: tokens}, {0: slots}, {0: slots})
    model = exporters.export(Combine(), call(4), dynamic_shapes=shapes)
    ops = [n.op_type for n in model.graph.node if n.domain == "ascend.moe"]
    assert ops == ["MoeFinalizeRoutingV2", "MoeTokenUnpermute"]
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param  # symbolic token dim
    args = call(6, seed=1)
    eager = Combine()(*args).numpy()
    names = [i.name for i in model.graph.input]
    feeds = dict(zip(names, [a.numpy() for a in args]))
    np.testing.assert_allclose(run_feeds(session(model), feeds)[0], eager, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(run_feeds(session(model, library=False), feeds)[0], eager, rtol=1e-5, atol=1e-6)


def test_torchscript_export_runs_with_and_without_the_library():
    torch = pytest.importorskip("torch")
    from ascend_moe_onnx import exporters

    class Combine(torch.nn.Module):
        def forward(self, x, idx, weights, residual, permuted, sorted_indices):
            a = torch.ops.ascend_moe.moe_finalize_routing_v2(x, idx, residual, None, None, weights, None, 2)
            b = torch.ops.ascend_moe.moe_token_unpermute(permuted, sorted_indices, weights)
            return a + b, torch.ops.ascend_moe.moe_token_unpermute(permuted, sorted_indices)

    g = torch.Generator().manual_seed(0)
    n, k, h = 4, 3, 8
    args = (torch.randn(n * k, h, generator=g), torch.randperm(n * k, generator=g).int(), torch.rand(n, k, generator=g),
            torch.randn(n, h, generator=g), torch.randn(n * k, h, generator=g),
            torch.randperm(n * k, generator=g).int())
    with pytest.warns(UserWarning, match="overloads"):  # the two unpermute specialisations
        model = exporters.export(Combine(), args, dynamo=False)
    nodes = [(n.op_type, list(n.input)) for n in model.graph.node if n.domain == "ascend.moe"]
    assert nodes[0] == ("MoeFinalizeRoutingV2", ["x", "idx", "residual", "", "", "weights"])
    feeds = dict(zip([i.name for i in model.graph.input], [a.numpy() for a in args]))
    eager = [t.numpy() for t in Combine()(*args)]
    for library in (True, False):
        for got, want in zip(run_feeds(session(model, library=library), feeds), eager):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_benchmark_harness_runs_on_a_tiny_case():
    pytest.importorskip("torch")
    from ascend_moe_onnx.benchmarks import finalize

    row = finalize.run_case(tokens=8, hidden=64, k=2, dtype="bfloat16", threads=1, repeats=1, min_sample_s=1e-4)
    assert set(row["time_s"]) == {"ort-unpermute", "ort-finalize", "ort-finalize+x1", "torch-index_select+bmm",
                                  "torch-index_select+mul+sum", "copy"}
    assert all(v > 0 for v in row["fraction_of_copy"].values())
    assert "fraction of copy" in finalize.report(row)
