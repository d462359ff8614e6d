"""MoeInitRoutingV3 and MoeTokenPermute semantics (worked examples of the Ascend definitions), the
C++ kernel and the function body against the NumPy reference on random cases of every mode, and the
dynamo export of a routing block with a dynamic token count (the generic layer and bad-case checks
are in tests/test_op_table.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from ascend_moe_onnx import onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_init_routing_v3 as init_spec
from ascend_moe_onnx.onnx_schemas import moe_token_permute as permute_spec
from tests.ops.moe_init_routing_v3 import init_routing_cases as cases

# 3 tokens, k = 2; expert of each flat pair p = token * 2 + slot.
IDX = np.array([[2, 0], [0, 2], [1, 0]], np.int32)
X = np.arange(3 * 4, dtype=np.float32).reshape(3, 4)


def _init(x=X, idx=IDX, scale=None, offset=None, **attrs):
    return init_spec.reference(x, idx, scale, offset, **{"expert_num": 3, **attrs})


def test_stable_sort_gather_and_scatter_index():
    """Pairs sorted by expert, ties by flat position: order 1, 2, 5, 4, 0, 3."""
    ex, gather, counts, _ = _init(expert_tokens_num_type=1)
    order = [1, 2, 5, 4, 0, 3]
    np.testing.assert_array_equal(ex, X[np.array(order) // 2])
    np.testing.assert_array_equal(gather, np.argsort(order))  # row_idx_type 0: row of each pair
    np.testing.assert_array_equal(counts, [3, 1, 2])
    _, scatter, cumsum, _ = _init(row_idx_type=1)  # 1: pair of each row
    np.testing.assert_array_equal(scatter, order)
    np.testing.assert_array_equal(cumsum, [3, 4, 6])


def test_active_range_drops_pairs_and_marks_them():
    """Range [1, 3): pairs of expert 0 dropped (-1), rows past the 3 kept pairs zero."""
    ex, gather, counts, _ = _init(active_expert_start=1, active_expert_end=3, expert_tokens_num_type=1)
    assert ex.shape == (6, 4)
    np.testing.assert_array_equal(ex[:3], X[[2, 0, 1]])  # pairs 4 (e1), 0 (e2), 3 (e2)
    assert not ex[3:].any()
    np.testing.assert_array_equal(gather, [1, -1, -1, 2, 0, -1])
    np.testing.assert_array_equal(counts, [1, 2])
    _, scatter, kv, _ = _init(active_expert_start=1, row_idx_type=1, expert_tokens_num_type=2)
    np.testing.assert_array_equal(scatter, [4, 0, 3, -1, -1, -1])
    np.testing.assert_array_equal(kv, [[1, 1], [2, 2], [0, 0]])


def test_active_num_cuts_rows_but_not_the_index():
    ex, gather, _, scale = _init(scale=np.array([1.0, 2.0, 3.0], np.float32), active_num=4)
    assert ex.shape == (4, 4) and scale.shape == (4,)
    np.testing.assert_array_equal(scale, [1, 2, 3, 3])  # tokens 0, 1, 2, 2
    np.testing.assert_array_equal(gather, np.argsort([1, 2, 5, 4, 0, 3]))  # may point past row 4


def test_drop_pad_keeps_the_first_pairs_per_expert():
    """Capacity 2: expert 0 has pairs 1, 2, 5 -> keeps 1, 2; counts are before the drop."""
    ex, idx, counts, scale = _init(drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1,
                                   scale=np.array([1.0, 2.0, 3.0], np.float32))
    assert ex.shape == (3, 2, 4)
    np.testing.assert_array_equal(ex[0], X[[0, 1]])
    np.testing.assert_array_equal(ex[1], np.stack([X[2], np.zeros(4, np.float32)]))
    np.testing.assert_array_equal(ex[2], X[[0, 1]])
    np.testing.assert_array_equal(idx, [4, 0, 1, 5, 2, -1])
    np.testing.assert_array_equal(counts, [3, 1, 2])
    np.testing.assert_array_equal(scale, [1, 2, 3, 0, 1, 2])


def test_dynamic_quant_rounds_half_to_even_and_zero_rows():
    x = np.array([[254.0, 1.0, -3.0, 0.0], [0, 0, 0, 0], [1, 2, 3, 4]], np.float32)
    ex, _, _, scale = _init(x=x, quant_mode=1)
    assert ex.dtype == np.int8
    # row 0: s = 2, values 127, 0.5 -> 0, -1.5 -> -2, 0
    np.testing.assert_array_equal(ex[np.flatnonzero(np.array([1, 2, 5, 4, 0, 3]) // 2 == 0)[0]], [127, 0, -2, 0])
    assert scale.max() == np.float32(254) / np.float32(127)
    zero_rows = np.flatnonzero(scale == 0)
    assert zero_rows.size == 2 and not ex[zero_rows].any()


def test_static_quant_in_float16_steps():
    x = np.array([[0.1, 200.0, -300.0, 2.5]] * 3, np.float32)
    ex, _, _, scale = _init(x=x, quant_mode=0, scale=np.array([0.5], np.float32), offset=np.array([0.25], np.float32))
    np.testing.assert_array_equal(ex[0], [0, 100, -128, 2])  # 1.5 rounds to 2; saturates at -128
    assert not scale.any()


def test_zero_tokens():
    x, idx = X[:0], IDX[:0]
    ex, gather, counts, scale = _init(x=x, idx=idx, expert_tokens_num_type=1)
    assert ex.shape == (0, 4) and gather.shape == (0,) and scale.shape == (0,)
    np.testing.assert_array_equal(counts, [0, 0, 0])
    ex, *_ = _init(x=x, idx=idx, drop_pad_mode=1, expert_capacity=2, expert_tokens_num_type=1)
    assert ex.shape == (3, 2, 4) and not ex.any()


def test_token_permute_index_is_the_inverse_sort():
    """sorted_indices[p] = sorted position of pair p (what npu_moe_token_unpermute takes)."""
    permuted, sorted_indices = permute_spec.reference(X, IDX)
    order = np.array([1, 2, 5, 4, 0, 3])
    np.testing.assert_array_equal(permuted, X[order // 2])
    np.testing.assert_array_equal(sorted_indices, np.argsort(order))
    assert permute_spec.reference(X, IDX, num_out_tokens=4)[0].shape == (4, 4)
    assert permute_spec.reference(X, IDX, num_out_tokens=-5)[0].shape == (1, 4)
    assert permute_spec.reference(X, IDX, num_out_tokens=-9)[0].shape == (0, 4)
    np.testing.assert_array_equal(permute_spec.reference(X, IDX[:, 0])[0], X[[1, 2, 0]])


def test_init_routing_v1_worked_example():
    from ascend_moe_onnx.onnx_schemas import moe_init_routing as v1

    row_idx = np.array([[0, 3], [1, 4], [2, 5]], np.int32)
    ex, row, experts = v1.reference(X, row_idx, IDX, active_num=3)
    np.testing.assert_array_equal(ex, X[[0, 1, 2, 2, 0, 1]])
    np.testing.assert_array_equal(row, [4, 1, 3, 0, 5, 2])
    np.testing.assert_array_equal(experts, [0, 0, 0, 1, 2, 2])
    assert v1.reference(X, row_idx, IDX, active_num=1)[0].shape == (2, 4)


def test_compute_expert_tokens_is_the_end_of_each_experts_rows():
    import torch

    from ascend_moe_onnx.exporters.moe_init_routing import compute_expert_tokens

    out = compute_expert_tokens(torch.tensor([0, 0, 0, 1, 1, 2], dtype=torch.int32), 4)
    assert out.dtype == torch.int32 and out.tolist() == [3, 5, 6, 6]


# ---- kernel and function body against the reference, random cases ---------------------------------


def _random_init_cases():
    rng = np.random.default_rng(5)
    out = []
    for i in range(12):
        n, k, e = int(rng.integers(0, 40)), int(rng.integers(1, 5)), int(rng.integers(1, 9))
        x_type = ["float", "float16", "bfloat16", "int8"][i % 4]
        quant = [-1, -1, 1, 0][i % 4] if x_type != "int8" else -1
        start = int(rng.integers(0, e))
        end = int(rng.integers(start + 1, e + 1))
        attrs = dict(expert_num=e, quant_mode=quant, row_idx_type=i % 2, expert_tokens_num_type=i % 3,
                     active_expert_start=start, active_expert_end=end,
                     active_num=int(rng.choice([-1, 0, 1, n * k + 3, max(1, n * k // 2)])))
        scale = {-1: "token", 0: "one", 1: "smooth" if i % 3 else None}[quant]
        if i % 5 == 4:  # drop/pad
            attrs.update(drop_pad_mode=1, expert_capacity=int(rng.integers(1, 5)), expert_tokens_num_type=1,
                         row_idx_type=0, active_expert_start=0, active_expert_end=-1)
            start, end = 0, e
            scale = "smooth1" if quant == 1 else scale
        inputs = cases.init_inputs(rng, n=n, h=int(rng.integers(1, 24)), k=k, e=e, x_type=x_type,
                                   idx_type=[np.int32, np.int64][i % 2], scale=scale, offset=quant == 0,
                                   start=start, end=end)
        out.append((inputs, attrs))
    return out


@pytest.mark.parametrize("library", [True, False], ids=["kernel", "function-body"])
@pytest.mark.parametrize("case", range(12))
def test_init_routing_matches_reference(case, library):
    inputs, attrs = _random_init_cases()[case]
    expected = init_spec.reference(*[inputs.get(n) for n in init_spec.INPUT_NAMES], **attrs)
    got = cases.run(init_spec, inputs, attrs, library=library, threads=2)
    cases.assert_outputs_equal(got, expected, str(attrs))


@pytest.mark.parametrize("library", [True, False], ids=["kernel", "function-body"])
def test_token_permute_matches_reference_on_wide_ids(library):
    """Ids spread over [0, 2**31 - 1): the kernel's comparison-sort path (the range is too wide to count)."""
    rng = np.random.default_rng(6)
    tokens = rng.standard_normal((50, 3)).astype(np.float32)
    indices = rng.integers(0, 2**31 - 1, (50, 2)).astype(np.int64)
    indices[::7, 1] = indices[::7, 0]  # ties
    expected = permute_spec.reference(tokens, indices, num_out_tokens=60)
    cases.assert_outputs_equal(cases.run(permute_spec, {"tokens": tokens, "indices": indices},
                                         dict(num_out_tokens=60), library=library), expected)


def test_kernel_rows_split_over_threads():
    """Enough rows (34 MiB) for several parallel chunks: 4 threads give the reference's bytes."""
    rng = np.random.default_rng(7)
    inputs = cases.init_inputs(rng, n=300, h=7168, k=8, e=64, x_type="bfloat16", scale="token")
    attrs = dict(expert_num=64, expert_tokens_num_type=1, row_idx_type=1)
    expected = init_spec.reference(*[inputs.get(n) for n in init_spec.INPUT_NAMES], **attrs)
    cases.assert_outputs_equal(cases.run(init_spec, inputs, attrs, library=True, threads=4), expected)


# ---- export ------------------------------------------------------------------------------------


def test_dynamo_export_keeps_the_token_count_dynamic():
    """A vllm-ascend-like dispatch: active_num = num_tokens * top_k (a SymInt), range of one EP rank,
    then a token permute: one node per call, the model runs at other token counts with and without
    the library and matches torch."""
    import torch

    from ascend_moe_onnx import exporters
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session, to_numpy, to_torch

    class Dispatch(torch.nn.Module):
        def forward(self, x, topk_ids):
            n = x.shape[0]
            ex, idx, counts, _ = torch.ops.ascend_moe.moe_init_routing_v3(
                x, topk_ids, None, None, n * topk_ids.shape[1], -1, 8, 0, 1, True, -1, [2, 6], 0)
            pt, si = torch.ops.ascend_moe.moe_token_permute(x, topk_ids, n * 2)
            k = topk_ids.shape[1]
            row_idx = torch.arange(n * k, dtype=torch.int32).reshape(k, n).t().contiguous()
            v1_x, v1_row, v1_experts = torch.ops.ascend_moe.moe_init_routing(x, row_idx, topk_ids, n)
            return ex, idx, counts, pt, si, v1_x, v1_row, v1_experts

    rng = np.random.default_rng(8)

    def args(n):
        return (to_torch(rng.standard_normal((n, 16)).astype(np.float32)),
                to_torch(rng.integers(0, 8, (n, 2)).astype(np.int32)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tokens = torch.export.Dim("tokens")
        model = exporters.export(Dispatch(), args(5), dynamic_shapes=({0: tokens}, {0: tokens}))
    ops = [n.op_type for n in model.graph.node if n.domain == onnx_schemas.DOMAIN]
    assert sorted(ops) == ["MoeInitRouting", "MoeInitRoutingV3", "MoeTokenPermute"]
    for n in (0, 1, 9):
        x, ids = args(n)
        expected = [to_numpy(t) for t in Dispatch()(x, ids)]
        feeds = {i.name: to_numpy(t) for i, t in zip(model.graph.input, (x, ids))}
        for library in (True, False):
            got = run_feeds(session(model, library=library), feeds)
            cases.assert_outputs_equal(got, expected, f"{n} tokens, library={library}")


def test_torchscript_export_of_the_three_ops():
    """The legacy exporter (dynamo=False): one node per call, outputs equal to torch's."""
    import torch

    from ascend_moe_onnx import exporters
    from tests.ops.moe_re_routing.rerouting_cases import run_feeds, session

    class Calls(torch.nn.Module):
        def forward(self, x, ids, row):
            a = torch.ops.ascend_moe.moe_init_routing_v3(x, ids, None, None, -1, -1, 8, 0, 2, True, -1, [1, 5], 1)
            b = torch.ops.ascend_moe.moe_token_permute(x, ids, 4)
            c = torch.ops.ascend_moe.moe_init_routing(x, row, ids, 3)
            return (*a, *b, *c)

    x, ids = torch.randn(5, 16), torch.randint(0, 8, (5, 2), dtype=torch.int32)
    row = torch.arange(10, dtype=torch.int32).reshape(2, 5).t().contiguous()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = exporters.export(Calls(), (x, ids, row), dynamo=False, input_names=["x", "ids", "row"])
    assert [n.op_type for n in model.graph.node if n.domain == onnx_schemas.DOMAIN] == [
        "MoeInitRoutingV3", "MoeTokenPermute", "MoeInitRouting"]
    got = run_feeds(session(model), {"x": x.numpy(), "ids": ids.numpy(), "row": row.numpy()})
    cases.assert_outputs_equal(got, [t.numpy() for t in Calls()(x, ids, row)])
