"""GroupedMatmul: the CPU kernel on every instruction-set path the CPU has (ASCEND_MOE_CPU_ISA, a
fresh process each) and with 1 and 2 intra-op threads (same bits), for every element type and both
weight layouts, on shapes that exercise the vector tails, k ranges that do not divide into the
kernel's 4 streams, groups of more rows than one register tile and one row block, groups whose
weights are split over several work items (k ranges summed in partials); unused groups' weights
are never read; rows past the last group are zero in every layer; torch export (dynamo and
TorchScript) of a two-matmul expert MLP runs in ONNX Runtime with and without the library."""

from __future__ import annotations

import numpy as np
import pytest

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import grouped_matmul as spec
from tests.cpu_isa import call_on_isa, cpu_isa_paths
from tests.op_table import OPS, node_model
from tests.ops.grouped_matmul.grouped_matmul_cases import make_inputs, make_quant_inputs

pytest.importorskip("onnxruntime")
OP = next(op for op in OPS if op.name == spec.OP_TYPE)
RTOL = {"float": 1e-5, "float16": 2e-3, "bfloat16": 1.6e-2, "int32": 0}


def cases():
    """(inputs, attributes, element type) on awkward shapes."""
    rng = np.random.default_rng(31)
    out = []
    shapes = [([1, 0, 2, 1], 70, 33), ([5, 9, 0], 129, 600), ([70, 3], 37, 45), ([0, 1], 3, 17), ([2], 1, 1)]
    for dtype in ("float", "float16", "bfloat16"):
        for t in (0, 1):
            for i, (counts, K, N) in enumerate(shapes):
                glt = (i + t) % 2
                inputs = make_inputs(rng, counts, K, N, dtype, rows=sum(counts) + (i % 3), transpose_weight=t,
                                     bias=(None, "x", "float")[i % 3], group_list_type=glt,
                                     index=np.int32 if i == 1 else np.int64)
                out.append((inputs, dict(group_list_type=glt, transpose_weight=t), dtype))
    # groups of more than the kernel's 4 MiB work item: k ranges summed in partials (float32,
    # bfloat16), or row ranges of 2 MiB ([E, N, K])
    for dtype, t, K, N in (("float", 0, 1024, 1100), ("bfloat16", 0, 2100, 1100), ("float16", 1, 1500, 1500)):
        inputs = make_inputs(rng, [3, 0, 2], K, N, dtype, rows=6, transpose_weight=t, bias="float")
        out.append((inputs, dict(group_list_type=1, transpose_weight=t), dtype))
    out += quant_cases(rng)
    out += dequant_cases(rng)
    return out


def quant_cases(rng):
    """Quantized (inputs, attributes, y's type): vector tails in columns (N not a multiple of 32)
    and in k (K not a multiple of 4), 1 to 9 rows per group, per-channel and per-group scales,
    both layouts, k blocks shared by several row tiles, and groups split by columns (weights past
    the kernel's 4 MiB item)."""
    out = []
    for t in (0, 1):
        for weight, K, N, groups in (("int8", 37, 40, 1), ("int8", 96, 72, 3), ("int4", 64, 40, 2),
                                     ("int4", 48, 72, 1)):
            for dtype in ("float", "bfloat16"):
                inputs = make_quant_inputs(rng, [1, 0, 6, 2], K, N, weight, dtype, rows=11, transpose_weight=t,
                                           groups=groups, offset=groups == 1, bias="float")
                out.append((inputs, dict(group_list_type=1, transpose_weight=t), dtype))
        for K, N, bias, y in ((37, 40, "int32", 16), (130, 72, None, 6), (64, 33, "int32", 1)):
            inputs = make_quant_inputs(rng, [2, 5, 0, 1], K, N, dtype="int8", rows=9, transpose_weight=t, bias=bias)
            if y == 6:
                del inputs["scale"], inputs["per_token_scale"]
            out.append((inputs, dict(group_list_type=1, transpose_weight=t, output_dtype=y),
                        {16: "bfloat16", 6: "int32", 1: "float"}[y]))
    # more rows than one register tile and wide rows: k in blocks reused from L2 by the row tiles
    for weight, K in (("int8", 300), ("int4", 600)):
        inputs = make_quant_inputs(rng, [9, 1], K, 2048, weight, "float", groups=2 if weight == "int4" else 1)
        out.append((inputs, dict(group_list_type=1), "float"))
    inputs = make_quant_inputs(rng, [7, 2], 301, 2056, dtype="int8", bias="int32")
    out.append((inputs, dict(group_list_type=1, output_dtype=1), "float"))
    # int4 [E, N, K] words need K % 8 == 0: 1120 (groups of 112: full 32-input steps and a tail)
    for weight, t, K in (("int8", 0, 1100), ("int4", 0, 1100), ("int8", 1, 1100), ("int4", 1, 1120)):
        inputs = make_quant_inputs(rng, [2, 0, 1], K, 4096 if weight == "int8" else 8000, weight, "float",
                                   transpose_weight=t, groups=10 if weight == "int4" else 1)
        out.append((inputs, dict(group_list_type=1, transpose_weight=t), "float"))
    return out


DEQUANT_ROWS_KN4 = 32  # grouped_matmul_quant.cc's kDequantRowsKN4: int4 [E, K, N] items dequantize once from here
ROW_BLOCK = 64  # its kRowBlock: rows of one group per item


def dequant_cases(rng):
    """int4 antiquant groups on both sides of the dequantize-once switch ([E, K, N]: just below,
    at, above it, and past one item's rows, whose last item falls below it again; [E, N, K]
    dequantizes for any rows, on AVX-512 it looks the nibbles up instead), per channel and per group,
    with and without offset and bias, every x type: tails in N and K, several float32 panels per item (K x 2056 [E, K, N] and 2000 x N
    [E, N, K] weights) with antiquant group boundaries inside a panel."""
    counts = [DEQUANT_ROWS_KN4 - 1, DEQUANT_ROWS_KN4, 0, 1, DEQUANT_ROWS_KN4 + 1, ROW_BLOCK + 6]
    shapes = [  # (layout, K, N, scale groups)
        (0, 37, 40, 1), (0, 120, 2048, 5), (0, 74, 2056, 2), (1, 48, 41, 1), (1, 2000, 72, 4), (1, 2000, 38, 5),
    ]
    out = []
    for i, (t, K, N, groups) in enumerate(shapes):
        dtype = ("float", "float16", "bfloat16")[i % 3]
        inputs = make_quant_inputs(rng, counts, K, N, "int4", dtype, rows=sum(counts) + 1, transpose_weight=t,
                                   groups=groups, offset=i % 2 == 0, bias=(None, "x", "float")[i % 3])
        out.append((inputs, dict(group_list_type=1, transpose_weight=t), dtype))
    return out


def isa_outputs() -> dict:
    """y (as float32) of every case with 1 and 2 intra-op threads (run on one ISA path by call_on_isa)."""
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session

    out = {}
    for i, (inputs, attrs, _) in enumerate(cases()):
        model = node_model(OP, inputs, attrs, ranks=True)
        for threads in (1, 2):
            y = run_feeds(session(model, threads=threads), inputs)[0]
            out[f"{i}_{threads}"] = y if y.dtype == np.int32 else y.astype(np.float32)
    return out


@pytest.mark.parametrize("isa", sorted({"avx512" if p.startswith("avx512") else p for p in cpu_isa_paths()}))
def test_every_isa_path_matches_the_reference(isa):
    got = call_on_isa(isa, "tests.ops.grouped_matmul.test_grouped_matmul:isa_outputs")
    for i, (inputs, attrs, dtype) in enumerate(cases()):
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        want = expected if expected.dtype == np.int32 else expected.astype(np.float32)
        np.testing.assert_allclose(got[f"{i}_1"], want, rtol=RTOL[dtype], atol=RTOL[dtype], err_msg=f"{isa} case {i}")
        np.testing.assert_array_equal(got[f"{i}_1"], got[f"{i}_2"], err_msg=f"{isa} case {i}: threads")


def test_unused_groups_weights_are_not_read():
    """NaN weights and bias in the groups without rows never reach y (nor rows outside groups)."""
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session

    rng = np.random.default_rng(32)
    for t in (0, 1):
        inputs = make_inputs(rng, [3, 0, 2, 0], 40, 24, rows=7, bias="float", transpose_weight=t)
        for e in (1, 3):
            inputs["weight"][e] = np.nan
            inputs["bias"][e] = np.nan
        inputs["x"][5:] = np.nan  # rows past the last group
        attrs = dict(group_list_type=1, transpose_weight=t)
        (y,) = run_feeds(session(node_model(OP, inputs, attrs, ranks=True), threads=2), inputs)
        assert np.isfinite(y).all()
        assert not y[5:].any()
        (expected,) = spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES], **attrs)
        np.testing.assert_allclose(y[:5], expected[:5], rtol=1e-5, atol=1e-5)


def test_rows_past_the_last_group_are_zero_in_every_layer():
    import torch

    from ascend_moe_onnx import exporters  # noqa: F401  (defines the ops)
    from ascend_moe_onnx.onnx_schemas.functions import attach_functions
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session

    rng = np.random.default_rng(33)
    inputs = make_inputs(rng, [1, 2], 8, 6, rows=6, bias="x", group_list_type=0)
    model = node_model(OP, inputs, {}, ranks=True)
    outs = {"reference": spec.reference(*[inputs.get(n) for n in spec.INPUT_NAMES])[0],
            "kernel": run_feeds(session(model), inputs)[0],
            "body": run_feeds(session(attach_functions(model), library=False), inputs)[0],
            "torch": torch.ops.ascend_moe.grouped_matmul(*[torch.from_numpy(inputs[n]) for n in spec.INPUT_NAMES[:4]]
                                                          ).numpy()}
    for name, y in outs.items():
        assert y.shape == (6, 6) and not y[3:].any() and y[:3].all(), name


class _ExpertMlp:
    """The recipes' expert MLP on rows grouped by expert: gmm(w13) -> SwiGLU -> gmm(w2), weights
    held as [E, N, K] (the checkpoint layout) and used transposed, as both Ascend call sites do."""

    @staticmethod
    def module(E=4, H=16, I=8):
        import torch

        class Mlp(torch.nn.Module):
            def __init__(self):
                super().__init__()
                g = torch.Generator().manual_seed(5)
                self.w13 = torch.nn.Parameter(torch.randn(E, 2 * I, H, generator=g) / H**0.5, requires_grad=False)
                self.w2 = torch.nn.Parameter(torch.randn(E, H, I, generator=g) / I**0.5, requires_grad=False)

            def forward(self, x, group_list):
                gmm = torch.ops.ascend_moe.grouped_matmul
                h = gmm(x, self.w13, group_list, group_list_type=1, transpose_weight=1)
                gate, up = h.chunk(2, dim=-1)
                h = torch.nn.functional.silu(gate) * up
                return gmm(h, self.w2, group_list, group_list_type=1, transpose_weight=1)

        return Mlp().eval()


@pytest.mark.parametrize("dynamo", [True, False])
def test_export_runs_with_and_without_the_library(dynamo, tmp_path):
    import onnxruntime as ort
    import torch

    from ascend_moe_onnx import exporters, ort_custom_ops

    model = _ExpertMlp.module()
    x, counts = torch.randn(9, 16), torch.tensor([3, 0, 4, 1])
    expected = model(x, counts).numpy()
    if dynamo:
        onx = exporters.export(model, (x, counts), dynamic_shapes=({0: torch.export.Dim("rows")}, None))
    else:
        onx = exporters.export(model, (x, counts), dynamo=False, input_names=["x", "group_list"],
                               dynamic_axes={"x": {0: "rows"}})
    nodes = [n for n in onx.graph.node if n.op_type == spec.OP_TYPE]
    assert len(nodes) == 2 and all(n.domain == onnx_schemas.DOMAIN for n in nodes)
    assert not [n for n in onx.graph.node if n.op_type == "Transpose"]
    names = [i.name for i in onx.graph.input]
    for rows, c in ((9, counts), (5, torch.tensor([0, 2, 0, 1]))):  # other row counts, rows past the groups
        xr = x[:rows]
        want = model(xr, c).numpy() if rows != 9 else expected
        feeds = dict(zip(names, (xr.numpy(), c.numpy())))
        with_lib = ort_custom_ops.inference_session(onx).run(None, feeds)[0]
        without = ort.InferenceSession(onx.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        np.testing.assert_allclose(with_lib, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(without, want, rtol=1e-5, atol=1e-5)
        assert not want[int(c.sum()):].any()


class _QuantMlp:
    """The Ascend w8a8 / antiquant expert calls through the torch_npu stand-in: W8A8 (int8 rows,
    per-token scales, weights [E, N, K] used transposed, int32 sums then bfloat16 y) and W4A16
    (bfloat16 rows, int4 weights in int32 words [E, N, K/8] used transposed, per-group scales)."""

    @staticmethod
    def module(E=3, H=32, N=16, G=2):
        import torch

        from ascend_moe_onnx.exporters import torch_npu as tn
        from ascend_moe_onnx.onnx_schemas.grouped_matmul import pack_int4

        class Mlp(torch.nn.Module):
            def __init__(self):
                super().__init__()
                g = torch.Generator().manual_seed(7)
                self.w8 = torch.randint(-128, 128, (E, N, H), generator=g, dtype=torch.int8)
                self.scale = torch.rand(E, N, generator=g) * 1e-3
                w4 = torch.randint(-8, 8, (E, N, H), generator=g, dtype=torch.int8).numpy()
                self.w4 = torch.from_numpy(pack_int4(w4))
                self.a_scale = (torch.rand(E, G, N, generator=g) * 0.1).to(torch.bfloat16)
                self.a_offset = torch.randn(E, G, N, generator=g).to(torch.bfloat16)

            def forward(self, xq, pts, xb, counts):
                sums = tn.npu_grouped_matmul([xq], [self.w8.transpose(1, 2)], group_list=counts, split_item=3,
                                             group_type=0, group_list_type=1, output_dtype=torch.int32)[0]
                y8 = tn.npu_grouped_matmul([xq], [self.w8.transpose(1, 2)], scale=[self.scale],
                                           per_token_scale=[pts], group_list=counts, split_item=3, group_type=0,
                                           group_list_type=1, output_dtype=torch.bfloat16)[0]
                y4 = tn.npu_grouped_matmul([xb], [self.w4.transpose(1, 2)], antiquant_scale=[self.a_scale],
                                           antiquant_offset=[self.a_offset], group_list=counts, split_item=3,
                                           group_type=0, group_list_type=1)[0]
                return sums, y8, y4

        return Mlp().eval()


def test_quantized_calls_export_and_run_with_and_without_the_library():
    import torch

    from ascend_moe_onnx import exporters
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session, to_numpy

    model = _QuantMlp.module()
    g = torch.Generator().manual_seed(3)
    rows = torch.export.Dim("rows")
    M = 7
    args = (torch.randint(-128, 128, (M, 32), generator=g, dtype=torch.int8), torch.rand(M, generator=g) * 0.01,
            torch.randn(M, 32, generator=g).to(torch.bfloat16), torch.tensor([3, 0, 2]))
    onx = exporters.export(model, args, dynamic_shapes=({0: rows}, {0: rows}, {0: rows}, None))
    nodes = [n for n in onx.graph.node if n.op_type == spec.OP_TYPE]
    assert len(nodes) == 3 and not [n for n in onx.graph.node if n.op_type == "Transpose"]
    expected = [to_numpy(t) for t in model(*args)]
    assert not expected[0][5:].any() and expected[0].dtype == np.int32
    feeds = dict(zip([i.name for i in onx.graph.input], [to_numpy(a) for a in args]))
    with_lib = run_feeds(session(onx), feeds)
    without = run_feeds(session(onx, library=False), feeds)
    for got in (with_lib, without):
        np.testing.assert_array_equal(got[0], expected[0])
        for g_, e in zip(got[1:], expected[1:]):
            np.testing.assert_allclose(g_.astype(np.float32), e.astype(np.float32), rtol=1.6e-2, atol=1e-2)
