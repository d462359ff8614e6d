"""Export of MoeGatingTopKHash: one node per call, full checker, ORT (library and function body)
agrees with torch at token counts other than the export example."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch

from ascend_moe_onnx import exporters, onnx_schemas, ort_custom_ops
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import DEFAULTS, OP_TYPE
from tests.ops.moe_gating_top_k_hash.gating_cases import assert_routing_equal

HIDDEN, EXPERTS, TABLE = 32, 16, 40


class GroupedRouter(torch.nn.Module):
    """DeepSeek-V3-like: sigmoid, bias, groups with top-2 score."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.register_buffer("bias", torch.randn(EXPERTS) * 0.1)

    def forward(self, h):
        y, idx, out = torch.ops.custom.npu_moe_gating_top_k(
            self.gate(h), 4, bias=self.bias, k_group=2, group_count=4, group_select_mode=1,
            norm_type=1, routed_scaling_factor=2.5, out_flag=True)
        return y, idx, out


class HashRouter(torch.nn.Module):
    """DeepSeek-V4-like hash layer with image tokens routed by additional_bias."""

    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(HIDDEN, EXPERTS, bias=False)
        self.register_buffer("tid2eid", torch.randint(0, EXPERTS, (TABLE, 3), dtype=torch.int32))
        self.register_buffer("image_bias", torch.randn(EXPERTS) * 0.1)

    def forward(self, h, input_ids, image_mask):
        y, idx, _ = torch.ops.custom.npu_moe_gating_top_k(
            self.gate(h), 3, input_ids=input_ids, tid2eid=self.tid2eid,
            additional_bias=self.image_bias, additional_token_mask=image_mask, norm_type=2,
            routed_scaling_factor=1.5)
        # a second call of another specialisation in the same graph (torch_npu's front end)
        y2, idx2, _ = torch.ops.npu.npu_moe_gating_top_k(self.gate(h), 2, renorm=1)
        return y, idx, y2, idx2


def _inputs(model, tokens, batch=None):
    lead = (tokens,) if batch is None else (batch, tokens)
    h = torch.randn(*lead, HIDDEN)
    if isinstance(model, GroupedRouter):
        return (h,)
    return (h, torch.randint(0, TABLE, lead), torch.rand(lead) < 0.3)


def _feeds(session, args):
    return {i.name: a.numpy() for i, a in zip(session.get_inputs(), args)}


def _export(model, dynamo=True, batch=None):
    torch.manual_seed(0)
    args = _inputs(model, 4, batch)
    if dynamo:
        dims = {0: torch.export.Dim("tokens")} if batch is None else {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}
        return exporters.export(model, args, dynamic_shapes=tuple(dims for _ in args))
    names = ["h", "input_ids", "image_mask"][: len(args)]
    return exporters.export(model, args, dynamo=False, input_names=names,
                            dynamic_axes={n: {0: "tokens"} for n in names})


def _sessions(proto):
    data = proto.SerializeToString()
    with_lib = ort.InferenceSession(data, ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    without = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    return {"library": with_lib, "function": without}


def _compare(model, proto, token_counts, batch=None):
    for name, session in _sessions(proto).items():
        for tokens in token_counts:
            args = _inputs(model, tokens, batch)
            with torch.no_grad():
                expected = [t.numpy() for t in model(*args)]
            got = session.run(None, _feeds(session, args))
            assert len(got) == len(expected)
            for g, e in zip(got, expected):
                assert g.shape == e.shape, (name, tokens)
                if e.dtype == np.int32:
                    assert_routing_equal(g, e)
                else:
                    np.testing.assert_allclose(g, e, rtol=5e-6, atol=1e-7, err_msg=f"{name} tokens={tokens}")


@pytest.fixture(scope="module")
def grouped():
    torch.manual_seed(0)
    model = GroupedRouter().eval()
    return model, _export(model)


def test_one_node_per_call_with_every_attribute(grouped):
    _, proto = grouped
    nodes = [n for n in proto.graph.node if n.domain == onnx_schemas.DOMAIN]
    assert [n.op_type for n in nodes] == [OP_TYPE]
    node = nodes[0]
    assert {a.name for a in node.attribute} == set(DEFAULTS)
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["k"] == 4 and attrs["group_count"] == 4 and attrs["group_select_mode"] == 1
    assert len(node.output) == 3
    assert list(node.input)[1] != ""  # bias in its slot


def test_checker_and_shape_inference(grouped):
    _, proto = grouped
    onnx_schemas.register()
    onnx.checker.check_model(proto, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    dims = [[d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim] for o in inferred.graph.output]
    assert dims == [["tokens", 4], ["tokens", 4], ["tokens", EXPERTS]]


def test_grouped_router_runs_in_ort_at_other_token_counts(grouped):
    model, proto = grouped
    _compare(model, proto, (1, 3, 37))


def test_hash_router_with_middle_absent_inputs():
    torch.manual_seed(1)
    model = HashRouter().eval()
    proto = _export(model)
    nodes = [n for n in proto.graph.node if n.domain == onnx_schemas.DOMAIN]
    assert len(nodes) == 2
    assert nodes[0].input[1] == "" and all(nodes[0].input[i] for i in (0, 2, 3, 4, 5))
    assert list(nodes[1].input) == [nodes[1].input[0]]  # trailing absent inputs dropped
    _compare(model, proto, (2, 9))


def test_three_dimensional_x_with_two_dynamic_dims():
    torch.manual_seed(2)
    model = GroupedRouter().eval()
    proto = _export(model, batch=2)
    _compare(model, proto, (1, 5), batch=3)


@pytest.mark.parametrize("model_cls", [GroupedRouter, HashRouter])
def test_torchscript_exporter(model_cls):
    torch.manual_seed(3)
    model = model_cls().eval()
    proto = _export(model, dynamo=False)
    assert sum(n.domain == onnx_schemas.DOMAIN for n in proto.graph.node) == (1 if model_cls is GroupedRouter else 2)
    _compare(model, proto, (1, 6))


def test_external_data_keeps_weights_beside_the_model(tmp_path):
    torch.manual_seed(4)
    model = GroupedRouter().eval()
    path = tmp_path / "router.onnx"
    proto = exporters.export(model, _inputs(model, 4), path, external_data=True,
                             dynamic_shapes=({0: torch.export.Dim("tokens")},))
    assert (tmp_path / "router.onnx.data").is_file()
    assert any(t.data_location == onnx.TensorProto.EXTERNAL for t in proto.graph.initializer)
    session = ort.InferenceSession(str(path), ort_custom_ops.session_options(),
                                   providers=["CPUExecutionProvider"])
    args = _inputs(model, 7)
    with torch.no_grad():
        expected = [t.numpy() for t in model(*args)]
    for got, exp in zip(session.run(None, _feeds(session, args)), expected):
        np.testing.assert_allclose(got, exp, rtol=5e-6, atol=1e-7)


def test_external_data_needs_a_path():
    with pytest.raises(ValueError, match="external_data needs a path"):
        exporters.export(GroupedRouter(), _inputs(GroupedRouter(), 4), external_data=True)


def _metadata(proto) -> list:
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs

    props = []
    for g in walk_graphs(proto.graph):
        props += list(g.metadata_props) + [m for n in g.node for m in n.metadata_props]
        props += [m for v in (*g.input, *g.output, *g.value_info, *g.initializer) for m in v.metadata_props]
    return props + [m for f in proto.functions for n in f.node for m in n.metadata_props]


@pytest.mark.parametrize("dynamo", [True, False])
def test_exported_files_carry_no_exporter_metadata(tmp_path, dynamo):
    """torch.onnx's node metadata (stack traces with this machine's absolute paths, module names)
    is removed by default; ``keep_metadata=True`` keeps it for debugging."""
    model = GroupedRouter()
    args = _inputs(model, 4)
    path = tmp_path / "router.onnx"
    exporters.export(model, args, path, dynamo=dynamo)
    data = path.read_bytes()
    assert _metadata(onnx.load(str(path))) == []
    assert str(Path(__file__).resolve().parent).encode() not in data and b"site-packages" not in data
    if dynamo:
        kept = exporters.export(model, args, keep_metadata=True)
        assert any(str(Path(__file__).resolve().parent) in m.value for m in _metadata(kept))
