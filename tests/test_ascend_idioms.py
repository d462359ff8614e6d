"""What public Ascend MoE code does besides the MoE operators, and the torch_npu stand-in's edges:
``.data`` reads in forward, NZ format casts at load, torch_npu's dtype names, ``Tensor.npu()``, a
named token Dim through ``shape[:-1].numel()``, bfloat16 Clip, finalize's row -1, the grouped
matmul's argument forms, and the bad inputs torch_npu refuses (eagerly and in the exported graph)."""

from __future__ import annotations

import importlib
import sys
import warnings

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters, ort_custom_ops
from ascend_moe_onnx.exporters import torch_npu as tn

T, H, E, K = 7, 8, 6, 2


def _export(model, args, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exporters.export(model, args, **kw)


def _session(proto, library=True):
    opts = ort.SessionOptions()
    if library:
        opts.register_custom_ops_library(ort_custom_ops.get_library_path())
    return ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"])


# ---- .data in forward ----------------------------------------------------------------------------

class _DataReads(torch.nn.Module):
    """The recipes' linear layer: ``torch.matmul(x, self.weight.data)``, and a buffer read the same way."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3), requires_grad=False)
        self.register_buffer("offset", torch.randn(3))

    def forward(self, x):
        return torch.matmul(x, self.weight.data) + self.offset.data


def test_data_in_forward_exports_the_parameter_itself():
    model = _DataReads()
    proto = _export(model, (torch.randn(5, 4),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    initializers = {i.name: i for i in proto.graph.initializer}
    # the weights stay the module's (named) initializers, not constants copied from a trace
    assert {"weight", "offset"} <= set(initializers), sorted(initializers)
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "tokens"
    sess = _session(proto, library=False)
    for n in (2, 9):
        x = torch.randn(n, 4)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], model(x).detach().numpy(), rtol=1e-5,
                                   atol=1e-6)
    # nothing stays behind: no torch function mode, and .data is torch's own again
    assert torch._C._len_torch_function_stack() == 0
    assert model.weight.data is not model.weight and not isinstance(model.weight.data, torch.nn.Parameter)


def test_data_in_forward_reads_the_weights_at_export_time_not_a_stale_copy():
    model = _DataReads()
    _export(model, (torch.randn(5, 4),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    with torch.no_grad():
        model.weight.mul_(2)
    proto = _export(model, (torch.randn(5, 4),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    x = torch.randn(3, 4)
    np.testing.assert_allclose(_session(proto, False).run(None, {"x": x.numpy()})[0], model(x).numpy(), rtol=1e-5,
                               atol=1e-6)


class _DataDependentSplits(torch.nn.Module):
    """An EP prefill's one-rank shape: split sizes as Python ints from the routed counts
    (``[int(n) for n in counts.cpu().tolist()]``), then a weight read through ``.data``. Non-strict
    tracing cannot keep those ints symbolic; strict tracing can, and must read ``.data`` alike."""

    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(4, 3))  # requires grad, as a loaded model's do

    def forward(self, x, counts):
        splits = [int(n) for n in counts.view(2, -1).sum(1).cpu().tolist()]
        first, second = torch.split(x, splits)
        return torch.cat([torch.matmul(first, self.weight.data), 2 * torch.matmul(second, self.weight.data)])


def test_data_dependent_split_sizes_export_with_data_reads():
    from torch._dynamo.variables.tensor import TensorVariable
    rule = TensorVariable.method_attr_data
    model = _DataDependentSplits()
    proto = _export(model, (torch.randn(9, 4), torch.tensor([2, 1, 3, 3])),
                    dynamic_shapes=({0: Dim("tokens")}, None), input_names=["x", "counts"])
    # the parameter stays the module's initializer under its own name
    assert "weight" in {i.name for i in proto.graph.initializer}
    sess = _session(proto, library=False)
    for n, counts in ((9, [2, 1, 3, 3]), (6, [0, 1, 5, 0])):
        x, c = torch.randn(n, 4), torch.tensor(counts)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy(), "counts": c.numpy()})[0],
                                   model(x, c).detach().numpy(), rtol=1e-5, atol=1e-6)
    # dynamo's own rule for .data is back
    assert TensorVariable.method_attr_data is rule


def _export_splits_and_match(model, atol):
    """Export a split-sizes model with a dynamic token dim; ORT matches eager at other counts."""
    proto = _export(model, (torch.randn(9, 4), torch.tensor([2, 1, 3, 3])),
                    dynamic_shapes=({0: Dim("tokens")}, None), input_names=["x", "counts"])
    sess = _session(proto, library=False)
    x, c = torch.randn(6, 4), torch.tensor([0, 1, 5, 0])
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy(), "counts": c.numpy()})[0],
                               model(x, c).detach().numpy(), rtol=1e-5, atol=atol)


STEP_SCALE = 3.0  # read through a module lookup in forward, as per-step metadata modules are


class _ModuleLookupInForward(_DataDependentSplits):
    """The same splits, with a module looked up by name inside forward (a recipe reads its
    per-step metadata so): strict tracing must evaluate the lookup as eager code does."""

    def forward(self, x, counts):
        return super().forward(x, counts) * importlib.import_module(__name__).STEP_SCALE


def test_module_lookup_in_forward_exports_in_strict_mode_and_leaves_dynamo_as_it_was():
    from torch._dynamo.trace_rules import _polyfilled_function_ids
    _export_splits_and_match(_ModuleLookupInForward(), atol=1e-6)
    # the folding rule was export's only: dynamo refuses the call again outside it
    assert id(importlib.import_module) not in _polyfilled_function_ids
    torch._dynamo.reset()
    with pytest.raises(Exception, match="import_module"):
        torch.compile(lambda t: t * importlib.import_module("math").pi, fullgraph=True, backend="eager")(torch.ones(2))


# ---- formats, dtype names, Tensor.npu -------------------------------------------------------------

def test_format_cast_keeps_values_and_records_the_format():
    layer = torch.nn.Linear(4, 3)
    before = layer.weight.detach().clone()
    assert tn.get_npu_format(layer.weight) == tn.Format.ND == 2
    layer.weight.data = tn.npu_format_cast(layer.weight.data.contiguous(), 29)  # the recipes' load step
    assert torch.equal(layer.weight.detach(), before)
    assert tn.get_npu_format(layer.weight) == tn.Format.FRACTAL_NZ
    assert str(tn.get_npu_format(layer.weight)) == "FRACTAL_NZ"
    nz = layer.weight.data
    assert tn.npu_format_cast(nz, tn.Format.FRACTAL_NZ) is nz  # already in that format: torch_npu returns self
    back = tn.npu_format_cast(layer.weight.data, layer.bias)  # the .Tensor overload: dst's format (ND)
    assert tn.get_npu_format(back) == tn.Format.ND and tn.get_npu_format(layer.weight) == tn.Format.FRACTAL_NZ
    t = torch.randn(2, 2)
    assert tn.npu_format_cast_(t, 29) is t and tn.get_npu_format(t) == 29


@pytest.mark.parametrize("fmt", [7, -1, "NZ", True])
def test_format_cast_refuses_an_unknown_format(fmt):
    with pytest.raises(ValueError, match="npu_format_cast: argument 'acl_format'"):
        tn.npu_format_cast(torch.randn(2), fmt)


def test_dtype_names_are_torch_npus_values():
    tn.install()
    # vllm-ascend's unit tests pin the same three values (tests/ut/conftest.py)
    assert (tn.float4_e2m1fn_x2, tn.hifloat8, tn.float8_e8m0fnu) == (296, 290, 293)
    import torch_npu  # the installed stand-in

    for name in ("float4_e1m2fn_x2", "float6_e3m2", "float6_e2m3", "float8_e5m2", "float8_e4m3fn", "int4",
                 "uint1", "bfloat16"):
        assert isinstance(getattr(torch_npu, name), int)


def test_npu_methods_keep_tensors_and_modules_on_the_cpu():
    tn.install()
    t = torch.arange(4)
    assert t.npu() is t
    m = torch.nn.Linear(2, 2)
    assert m.npu() is m


# ---- torch.histc of integer ids (vllm-ascend's all-to-all dispatcher) ----------------------------

class _TokensPerExpert(torch.nn.Module):
    """vllm-ascend's all-to-all dispatcher: tokens per expert as ``torch.histc`` of int32 ids."""

    def forward(self, topk_ids):
        return torch.histc(topk_ids, bins=E, min=0, max=E)


def test_histc_of_integer_ids_counts_like_torch_npu_and_exports():
    tn.install()
    ids = torch.randint(0, E, (T, K), dtype=torch.int32)
    counts = torch.histc(ids, bins=E, min=0, max=E)
    # torch_npu's aclnnHistc: the counts in the input's dtype
    assert counts.dtype == torch.int32
    assert counts.tolist() == torch.bincount(ids.flatten(), minlength=E).tolist()
    # equal-width bins over [min, max], max in the last one, values outside not counted
    assert ids.new_tensor([0, 1, 5, 6, 9, -1]).histc(3, 0, 6).tolist() == [2, 0, 2]
    # min == max: the data's range
    assert torch.histc(torch.tensor([3, 5, 5], dtype=torch.int64), bins=2).tolist() == [1, 2]
    proto = _export(_TokensPerExpert(), (ids,), dynamic_shapes=({0: Dim("tokens")},), input_names=["ids"])
    sess = _session(proto, library=False)
    for n in (3, 11):
        x = torch.randint(0, E, (n, K), dtype=torch.int32)
        np.testing.assert_array_equal(sess.run(None, {"ids": x.numpy()})[0], _TokensPerExpert()(x).numpy())


def test_histc_of_floats_is_torchs_own_and_bad_integer_calls_are_named():
    tn.install()
    x = torch.tensor([0.5, 1.5, 1.7, 3.0])
    assert torch.histc(x, bins=3, min=0, max=3).tolist() == [1.0, 2.0, 1.0]
    with pytest.raises(RuntimeError, match="bins must be > 0"):  # torch's float kernel's own message
        torch.histc(x, bins=0)
    ids = torch.arange(4, dtype=torch.int32)
    with pytest.raises(ValueError, match="histc: argument 'bins' must be > 0"):
        torch.histc(ids, bins=0)
    with pytest.raises(ValueError, match="histc: argument 'max' must be larger than min"):
        torch.histc(ids, bins=2, min=3, max=1)
    out = torch.empty(0, dtype=torch.int32)
    assert torch.histc(ids, bins=2, min=0, max=4, out=out) is out and out.tolist() == [2, 2]


class _ReceivedTokensPermuted(torch.nn.Module):
    """vllm-ascend's all-to-all dispatcher on one rank: per-expert counts from ``torch.histc`` of the
    int32 ids, expert ids repeated by those counts (a data-dependent length), the received rows
    permuted by them, a branch on the permuted row count, un-permuted to the input's shape."""

    def forward(self, x, ids):
        counts = torch.histc(ids, bins=E, min=0, max=E)
        order = torch.repeat_interleave(torch.arange(E, dtype=torch.int32), counts)
        rows, sorted_indices = tn.npu_moe_token_permute(x, order)
        if rows.shape[0] > 0:
            rows = tn.npu_moe_token_unpermute(rows * 2, sorted_indices, restore_shape=x.shape)
        return rows


def test_rows_permuted_by_data_dependent_expert_ids_export():
    tn.install()
    model = _ReceivedTokensPermuted()
    ids = torch.randint(0, E, (T,), dtype=torch.int32)
    proto = _export(model, (torch.randn(T, H), ids), dynamic_shapes=({0: Dim("tokens")}, {0: Dim("tokens")}),
                    input_names=["x", "ids"])
    sess = _session(proto)
    for n in (3, 11):
        x, i = torch.randn(n, H), torch.randint(0, E, (n,), dtype=torch.int32)
        np.testing.assert_allclose(sess.run(None, {"x": x.numpy(), "ids": i.numpy()})[0], model(x, i).numpy(),
                                   rtol=1e-6, atol=1e-6)


class _ReleasesDeadStorage(_DataDependentSplits):
    """The dispatcher frees a dead intermediate's memory (``t.untyped_storage().resize_(0)``) in a
    forward that strict tracing takes (data-dependent split sizes)."""

    def forward(self, x, counts):
        scaled = x * 3
        y = super().forward(scaled, counts)
        scaled.untyped_storage().resize_(0)
        return y


def test_storage_release_of_a_dead_tensor_exports_as_nothing():
    _export_splits_and_match(_ReleasesDeadStorage(), atol=1e-5)


class _SqueezeOfTokens(torch.nn.Module):
    """omni-infer's ``activation_scale=pertoken_scale.squeeze(0)`` on per-token scales: a no-op for a
    dynamic token dimension (it is not 1)."""

    def forward(self, x):
        return x.sum(-1).squeeze(0) * 2


def test_squeeze_of_a_dynamic_dimension_exports_as_the_no_op_torch_traced():
    proto = _export(_SqueezeOfTokens(), (torch.randn(5, 3),), dynamic_shapes=({0: Dim("tokens")},),
                    input_names=["x"])
    assert "Squeeze" not in {n.op_type for n in proto.graph.node}
    sess = _session(proto, library=False)
    x = torch.randn(7, 3)
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy()})[0], _SqueezeOfTokens()(x).numpy(), rtol=1e-6)


# ---- named Dim through shape[:-1].numel(), bfloat16 Clip -----------------------------------------

class _Numel(torch.nn.Module):
    def forward(self, h):
        n = h.shape[:-1].numel()
        return h + torch.arange(n, dtype=h.dtype)[:, None]


def test_numel_token_count_keeps_a_named_dim():
    proto = _export(_Numel(), (torch.randn(5, 4),), dynamic_shapes=({0: Dim("tokens", min=2)},))
    assert proto.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "tokens"
    sess = _session(proto, library=False)
    for n in (3, 9):
        h = torch.randn(n, 4)
        np.testing.assert_allclose(sess.run(None, {"h": h.numpy()})[0], _Numel()(h).numpy())


class _ClampBf16(torch.nn.Module):
    def forward(self, x):
        return torch.clamp(x * 2, min=-1.0, max=1.5)


def test_bfloat16_clip_runs_under_bfloat16_in_float32():
    from tests import ort_values

    x = torch.randn(5, 4).to(torch.bfloat16)
    proto = _export(_ClampBf16(), (x,), dynamic_shapes=({0: Dim("tokens", min=2)},), bfloat16_in_float32=True)
    assert "Clip" in [n.op_type for n in proto.graph.node]
    y = torch.randn(6, 4).to(torch.bfloat16)
    got = ort_values.run(_session(proto, library=False), {"x": y.float().numpy().astype(ml_dtypes.bfloat16)})[0]
    np.testing.assert_array_equal(np.asarray(got, dtype=np.float32), _ClampBf16()(y).float().numpy())


# ---- finalize: row -1 ---------------------------------------------------------------------------

def test_finalize_row_minus_one_is_a_zero_row_with_its_bias():
    g = torch.Generator().manual_seed(3)
    rows = torch.randn(T * K, H, generator=g)
    idx = torch.randperm(T * K, generator=g).to(torch.int32)
    idx[[1, 6]] = -1  # pairs whose experts lay outside init routing's active range
    scales = torch.rand(T, K, generator=g)
    bias = torch.randn(E, H, generator=g)
    experts = torch.randint(0, E, (T, K), generator=g, dtype=torch.int32)
    got = tn.npu_moe_finalize_routing(rows, None, None, bias, scales, idx, experts, drop_pad_mode=2)
    # op-plugin's moe_finalize_routing_np: row -1 reads as 0, its scales * bias term stays
    padded = torch.cat([rows, torch.zeros(1, H)])
    slot = idx.long().view(T, K).where(idx.long().view(T, K) >= 0, T * K)
    want = (scales[..., None] * (padded[slot] + bias[experts.long()])).sum(1)
    torch.testing.assert_close(got, want)

    class _Finalize(torch.nn.Module):
        def forward(self, rows, idx):
            return tn.npu_moe_finalize_routing(rows, None, None, bias, scales, idx, experts, drop_pad_mode=2)

    proto = _export(_Finalize(), (rows, idx))
    assert "MoeFinalizeRoutingV2" in [n.op_type for n in proto.graph.node]
    for library in (True, False):
        out = _session(proto, library).run(None, {"rows": rows.numpy(), "idx": idx.numpy()})[0]
        np.testing.assert_allclose(out, want.numpy(), rtol=1e-5, atol=1e-6)


def test_finalize_refuses_rows_below_minus_one():
    rows = torch.randn(T * K, H)
    idx = torch.arange(T * K, dtype=torch.int32)
    idx[3] = -2
    with pytest.raises(ValueError, match=r"'expanded_row_idx' must be -1 \(no row\) or in \[0, N\*K\)"):
        tn.npu_moe_finalize_routing(rows, None, None, None, torch.ones(T, K), idx, None, drop_pad_mode=2)


# ---- grouped matmul: argument forms torch_npu takes ------------------------------------------------

def _gmm_inputs():
    g = torch.Generator().manual_seed(5)
    return torch.randn(T, H, generator=g), torch.randn(3, H, 5, generator=g)


def test_grouped_matmul_group_list_type_none_is_cumsum():
    x, w = _gmm_inputs()
    ends = torch.tensor([2, 2, T])
    (none,) = tn.npu_grouped_matmul([x], [w], group_list=ends, group_type=0, group_list_type=None, split_item=3)
    (zero,) = tn.npu_grouped_matmul([x], [w], group_list=ends, group_type=0, group_list_type=0, split_item=3)
    torch.testing.assert_close(none, zero)
    torch.testing.assert_close(none[2:], x[2:] @ w[2])


def test_grouped_matmul_scale_as_per_expert_tensors():
    g = torch.Generator().manual_seed(6)
    x = torch.randint(-8, 8, (T, H), generator=g, dtype=torch.int8)
    w = torch.randint(-8, 8, (3, H, 5), generator=g, dtype=torch.int8)
    scale = torch.rand(3, 5, generator=g)
    tokens = torch.rand(T, generator=g)
    call = dict(per_token_scale=[tokens], group_list=torch.tensor([2, 0, 5]), group_type=0, group_list_type=1,
                split_item=3, output_dtype=torch.float32)
    (stacked,) = tn.npu_grouped_matmul([x], [w], scale=[scale], **call)
    (listed,) = tn.npu_grouped_matmul([x], [w], scale=list(scale.unbind(0)), **call)  # op-plugin's w8a8 test
    torch.testing.assert_close(listed, stacked)
    with pytest.raises(ValueError, match="npu_grouped_matmul: argument 'scale'"):
        tn.npu_grouped_matmul([x], [w], scale=list(scale.unbind(0))[:2], **call)


@pytest.mark.parametrize("pairs, message", [
    ([[0, 2], [5, 5]], r"group ids in \[0, 3\)"),       # id 5 with E = 3 (was read as expert 2)
    ([[-1, 2], [2, 5]], r"group ids in \[0, 3\)"),      # -1 (was read as expert 0)
    ([[2, 5], [0, 2]], "ascending group order"),        # out of order (was re-sorted)
    ([[0, 9], [2, -2]], "non-negative counts"),
])
def test_grouped_matmul_key_value_group_list_refuses_bad_pairs(pairs, message):
    x, w = _gmm_inputs()
    kv = torch.tensor(pairs, dtype=torch.int64)
    with pytest.raises(ValueError, match=f"npu_grouped_matmul: argument 'group_list' must .*{message}"):
        tn.npu_grouped_matmul([x], [w], group_list=kv, group_type=0, group_list_type=2, split_item=3)


def test_grouped_matmul_key_value_group_list_checked_in_the_exported_graph():
    x, w = _gmm_inputs()

    class _Gmm(torch.nn.Module):
        def forward(self, x, kv):
            return tn.npu_grouped_matmul([x], [w], group_list=kv, group_type=0, group_list_type=2, split_item=3)[0]

    good = torch.tensor([[0, 2], [2, 5], [0, 0]])
    proto = _export(_Gmm(), (x, good))
    sess = _session(proto)
    np.testing.assert_allclose(sess.run(None, {"x": x.numpy(), "kv": good.numpy()})[0],
                               _Gmm()(x, good).numpy(), rtol=1e-5, atol=1e-6)
    for bad in ([[0, 2], [5, 5], [0, 0]], [[2, 5], [0, 2], [0, 0]], [[-1, 2], [2, 5], [0, 0]]):
        with pytest.raises(Exception, match="out of|index|bounds"):
            sess.run(None, {"x": x.numpy(), "kv": np.array(bad, np.int64)})


class _GmmForms(torch.nn.Module):
    """The three non-MoE forms of npu_grouped_matmul (op-plugin's test_npu_grouped_matmul_0 / _2 / _6)."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(11)
        self.w = [torch.randn(H, 5, generator=g), torch.randn(H, 3, generator=g), torch.randn(6, 5, generator=g)]
        self.b = [torch.randn(5, generator=g), torch.randn(3, generator=g)]

    def forward(self, x, x3, k_sizes):
        ungrouped = tn.npu_grouped_matmul([x, x3], self.w[:2], bias=self.b, group_type=-1, split_item=0)
        (joined,) = tn.npu_grouped_matmul([x, x[:4, :6]], [self.w[0], self.w[2]], group_type=0, split_item=2)
        (k_split,) = tn.npu_grouped_matmul([x], [self.w[0]], group_list=k_sizes, group_type=2, group_list_type=1,
                                           split_item=3)
        return (*ungrouped, joined, k_split)


def test_grouped_matmul_lists_and_k_split_match_their_products_and_export():
    g = torch.Generator().manual_seed(12)
    x, x3, k_sizes = torch.randn(T, H, generator=g), torch.randn(2, 3, H, generator=g), torch.tensor([3, 0, 5])
    m = _GmmForms()
    got = m(x, x3, k_sizes)
    w, b = m.w, m.b
    want = (x @ w[0] + b[0], x3 @ w[1] + b[1], torch.cat([x @ w[0], x[:4, :6] @ w[2]]),
            torch.stack([x[:, :3] @ w[0][:3], torch.zeros(T, 5), x[:, 3:] @ w[0][3:]]))
    for y, ref in zip(got, want):
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    sess = _session(_export(m, (x, x3, k_sizes)), library=False)  # standard ONNX only
    other = torch.tensor([1, 6, 1])
    outs = sess.run(None, {"x": x.numpy(), "x3": x3.numpy(), "k_sizes": other.numpy()})
    for y, ref in zip(outs, m(x, x3, other)):
        np.testing.assert_allclose(y, ref.numpy(), rtol=1e-5, atol=1e-5)


def test_grouped_matmul_forms_compute_16_bit_in_float32_rounded_once():
    g = torch.Generator().manual_seed(13)
    x, w = torch.randn(T, 64, generator=g).half(), torch.randn(64, 5, generator=g).half()
    (y,) = tn.npu_grouped_matmul([x], [w], group_type=-1)
    assert y.dtype == torch.float16
    assert torch.equal(y, (x.float() @ w.float()).half())


@pytest.mark.parametrize("call, message", [
    (dict(group_type=None), "'group_type' is required .*Requires manual passing group_type"),
    (dict(group_type=1), "'group_type' must be -1 .*The group type must be -1, 0 or 2"),
    (dict(group_type=-1, group_list=torch.tensor([T])), "'group_list' must be None with group_type=-1"),
    (dict(group_type=-1, split_item=3), "'split_item' must be 0 or 1 with group_type=-1"),
    (dict(group_type=2, group_list=torch.tensor([2, 2]), split_item=3), "'group_list' must split K = 8"),
    (dict(group_type=2, group_list=torch.tensor([8]), split_item=0), "'split_item' must be 2 or 3"),
    (dict(group_type=-1, antiquant_scale=[torch.ones(5)]), "'antiquant_scale'"),
])
def test_grouped_matmul_forms_refuse_what_torch_npu_refuses(call, message):
    x, w = _gmm_inputs()
    with pytest.raises(RuntimeError, match=f"npu_grouped_matmul: argument {message}"):
        tn.npu_grouped_matmul([x], [w[0]], **call)


# ---- gating softmax: E up to torch_npu's limit ----------------------------------------------------

def test_gating_softmax_takes_more_experts_than_the_hash_router():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(5, 5120, generator=g)  # op-plugin's test size
    y, idx, row_idx = tn.npu_moe_gating_top_k_softmax(x, None, k=8)
    want = torch.softmax(x, -1).topk(8, -1)
    torch.testing.assert_close(y, want.values)
    assert torch.equal(idx, want.indices.to(torch.int32))
    assert row_idx.shape == (5, 8)
    with pytest.raises(ValueError, match="npu_moe_gating_top_k_softmax: argument 'k'"):
        tn.npu_moe_gating_top_k_softmax(torch.randn(2, 2048), None, k=1025)


# ---- float8 tokens with e8m0 scales -------------------------------------------------------------

def test_float8_tokens_with_e8m0_scales_route_in_init_routing_and_get_a_named_error_in_re_routing():
    # op-plugin's MX init routing test: float8 rows with their e8m0 block scales move unchanged
    x = torch.randn(32, 14).to(torch.float8_e4m3fn)
    idx = torch.stack([torch.randperm(32)[:5] for _ in range(32)]).to(torch.int32)
    scale = torch.arange(64, dtype=torch.uint8).reshape(32, 1, 2)
    ex, row_idx, _, ex_scale = tn.npu_moe_init_routing_v2(
        x, idx, scale=scale.view(torch.float8_e8m0fnu), active_num=160, expert_num=32, expert_tokens_num_type=1,
        expert_tokens_num_flag=True, active_expert_range=[0, 16], row_idx_type=1)
    active = int((idx < 16).sum())
    source = row_idx[:active].long() // 5
    assert ex.dtype == torch.float8_e4m3fn and torch.equal(ex[:active].view(torch.uint8), x.view(torch.uint8)[source])
    assert ex_scale.dtype == torch.uint8 and torch.equal(ex_scale[:active], scale[source])
    # re-routing takes e8m0 block scales, one row per token (tests/test_torch_npu_grouped_matmul_mx.py);
    # a flat vector is no such row
    tokens = torch.randn(4, 64).to(torch.float8_e4m3fn)
    with pytest.raises(ValueError, match="per_token_scales"):
        tn.npu_moe_re_routing(tokens, torch.tensor([[2, 2]]), per_token_scales=torch.ones(4).to(torch.float8_e8m0fnu))


# ---- first-version init routing: torch_npu's refusals, eagerly and in the graph ----------------------

def _init_routing_inputs():
    g = torch.Generator().manual_seed(8)
    x = torch.randn(T, H, generator=g)
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    row_idx = torch.arange(T * K, dtype=torch.int32).view(K, T).t().contiguous()
    return x, row_idx, idx


def test_init_routing_v1_refuses_what_torch_npu_refuses():
    x, row_idx, idx = _init_routing_inputs()
    with pytest.raises(ValueError, match="active_num"):
        tn.npu_moe_init_routing(x, row_idx, idx, -1)
    repeated = row_idx.clone()
    repeated[0, 0] = repeated[1, 0]
    with pytest.raises(ValueError, match="row_idx"):
        tn.npu_moe_init_routing(x, repeated, idx, T)
    with pytest.raises(ValueError, match="expert_idx"):
        tn.npu_moe_init_routing(x, row_idx, idx.to(torch.int64), T)


def test_init_routing_v1_exports_its_node_which_checks_row_idx():
    x, row_idx, idx = _init_routing_inputs()

    class _Route(torch.nn.Module):
        def forward(self, x, row_idx, idx):
            return tn.npu_moe_init_routing(x, row_idx, idx, x.shape[0])

    proto = _export(_Route(), (x, row_idx, idx), dynamic_shapes=({0: Dim("T", min=2)}, {0: Dim("T", min=2)},
                                                                 {0: Dim("T", min=2)}))
    assert "MoeInitRouting" in [n.op_type for n in proto.graph.node]
    sess = _session(proto)
    feeds = {"x": x.numpy(), "row_idx": row_idx.numpy(), "idx": idx.numpy()}
    for got, want in zip(sess.run(None, feeds), _Route()(x, row_idx, idx)):
        np.testing.assert_array_equal(got, want.numpy())
    repeated = row_idx.clone()
    repeated[0, 0] = repeated[1, 0]
    with pytest.raises(Exception, match="row_idx"):
        sess.run(None, feeds | {"row_idx": repeated.numpy()})


# ---- dispatch / combine: ori_x and zero / copy / constant experts on one rank -----------------------

def _special_routing(special):
    g = torch.Generator().manual_seed(9)
    x = torch.randn(T, H, generator=g)
    idx = torch.stack([torch.randperm(E + special, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    w = torch.rand(T, K, generator=g)
    return x, idx, w


def _one_rank(fn, *args, **kw):
    return fn(*args, "ep", 1, 0, E, **kw)


def test_combine_takes_ori_x_without_special_experts():
    x, idx, w = _special_routing(0)
    out = _one_rank(tn.npu_moe_distribute_dispatch_v2, x, idx)
    expand_x, _, assist, counts, ep_counts, tp_counts, _ = out
    plain = tn.npu_moe_distribute_combine_v2(expand_x * 2, idx, assist, ep_counts, w, "ep", 1, 0, E)
    with_ori = tn.npu_moe_distribute_combine_v2(expand_x * 2, idx, assist, ep_counts, w, "ep", 1, 0, E, ori_x=x)
    torch.testing.assert_close(with_ori, plain)
    torch.testing.assert_close(plain, 2 * (w[..., None] * x[:, None, :]).sum(1))


def test_dispatch_combine_zero_copy_and_constant_experts():
    zero, copy, const = 1, 2, 1
    x, idx, w = _special_routing(zero + copy + const)
    g = torch.Generator().manual_seed(10)
    a1, a2, v = (torch.randn(const, H, generator=g) for _ in range(3))
    special = dict(zero_expert_num=zero, copy_expert_num=copy, const_expert_num=const)
    expand_x, _, assist, counts, ep_counts, _, _ = _one_rank(tn.npu_moe_distribute_dispatch_v2, x, idx, **special)
    routed = int((idx < E).sum())
    assert counts.shape == (E,) and int(counts.sum()) == routed
    y = tn.npu_moe_distribute_combine_v2(expand_x * 3, idx, assist, ep_counts, w, "ep", 1, 0, E, ori_x=x,
                                         const_expert_alpha_1=a1, const_expert_alpha_2=a2, const_expert_v=v,
                                         **special)
    # op-plugin's docs: Moe(ori_x) = 0 (zero), ori_x (copy), alpha_1·ori_x + alpha_2·v (constant)
    want = torch.zeros(T, H)
    for t in range(T):
        for j in range(K):
            e = int(idx[t, j])
            if e < E:
                out = 3 * x[t]
            elif e < E + zero:
                out = torch.zeros(H)
            elif e < E + zero + copy:
                out = x[t]
            else:
                c = e - E - zero - copy
                out = a1[c] * x[t] + a2[c] * v[c]
            want[t] += w[t, j] * out
    torch.testing.assert_close(y, want, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="argument 'ori_x'"):
        tn.npu_moe_distribute_combine_v2(expand_x, idx, assist, ep_counts, w, "ep", 1, 0, E, **special)


def test_installed_module_is_the_stand_in():
    assert tn.install() is sys.modules["torch_npu"] is tn
