"""Export of npu_moe_re_routing: one MoeReRouting node per call with all 4 outputs; the exported
model runs in ORT (library kernel and function body) and matches torch at other token counts."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
import torch

from ascend_moe_onnx import exporters, onnx_schemas
from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec
from tests.ops.moe_re_routing.rerouting_cases import assert_same, random_counts, run_feeds, session, to_numpy

N, E, H = 3, 4, 16
OP = torch.ops.npu.npu_moe_re_routing


class Int8ExpertSide(torch.nn.Module):
    """Expert side of an EP all-to-all: int8 tokens + per-token scales regrouped, then dequantised."""

    def forward(self, tokens, counts, scales):
        pt, ps, idx, etn = OP(tokens, counts, per_token_scales=scales)
        return pt.float() * ps[:, None], pt, idx, etn


class Bf16TwoCalls(torch.nn.Module):
    """bf16 tokens without scales; a second call of another specialisation in the same graph."""

    def forward(self, tokens, counts):
        pt, ps, idx, etn = OP(tokens, counts, idx_type=1, expert_token_num_type=0)
        pt2, _, idx2, etn2 = OP(pt, counts.flip(0))
        return pt, ps, idx, etn, pt2, idx2, etn2


def _inputs(model, tokens, seed=0):
    rng = np.random.default_rng(seed)
    counts = torch.from_numpy(random_counts(rng, N, E, tokens, np.int32))
    if isinstance(model, Int8ExpertSide):
        return (torch.randint(-128, 128, (tokens, H), dtype=torch.int8), counts, torch.rand(tokens))
    return (torch.randn(tokens, H).to(torch.bfloat16), counts)


def _export(model, dynamo=True):
    args = _inputs(model, 6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # overload warning of the two-call model, exporter chatter
        if dynamo:
            a = torch.export.Dim("A")
            dims = ({0: a}, None, {0: a})[: len(args)]
            return exporters.export(model, args, dynamic_shapes=dims)
        names = ["tokens", "counts", "scales"][: len(args)]
        axes = {n: {0: "A"} for n in names if n != "counts"}
        return exporters.export(model, args, dynamo=False, input_names=names, dynamic_axes=axes)


def _compare(model, proto, token_counts=(0, 1, 5, 37)):
    for library in (True, False):
        sess = session(proto, library=library)
        for tokens in token_counts:
            args = _inputs(model, tokens, seed=tokens)
            with torch.no_grad():
                expected = [to_numpy(t) for t in model(*args)]
            got = run_feeds(sess, {i.name: to_numpy(a) for i, a in zip(sess.get_inputs(), args)})
            assert len(got) == len(expected)
            for i, (g, e) in enumerate(zip(got, expected)):
                assert_same(g, e, f"library={library} tokens={tokens} output {i}")


@pytest.fixture(scope="module")
def int8_model():
    model = Int8ExpertSide().eval()
    return model, _export(model)


def _nodes(proto):
    return [n for n in proto.graph.node if n.domain == onnx_schemas.DOMAIN]


def test_one_node_with_all_outputs_and_attributes(int8_model):
    _, proto = int8_model
    (node,) = _nodes(proto)
    assert node.op_type == spec.OP_TYPE and len(node.output) == 4 and len(node.input) == 3
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}
    assert attrs == spec.DEFAULTS
    assert [(f.domain, f.name) for f in proto.functions] == [(onnx_schemas.DOMAIN, spec.OP_TYPE)]


def test_checker_and_shape_inference(int8_model):
    _, proto = int8_model
    onnx_schemas.register()
    inferred = onnx.shape_inference.infer_shapes(proto, strict_mode=True)
    onnx.checker.check_model(inferred, full_check=True)
    dims = [[d.dim_param or d.dim_value for d in o.type.tensor_type.shape.dim] for o in inferred.graph.output]
    assert dims == [["A", H], ["A", H], ["A"], [E]]


def test_int8_expert_side_runs_in_ort_at_other_token_counts(int8_model):
    model, proto = int8_model
    _compare(model, proto)


def test_two_specialisations_in_one_graph():
    model = Bf16TwoCalls().eval()
    proto = _export(model)
    nodes = _nodes(proto)
    assert len(nodes) == 2 and [len(n.input) for n in nodes] == [2, 2]
    _compare(model, proto, (0, 7, 20))


@pytest.mark.parametrize("model_cls", [Int8ExpertSide, Bf16TwoCalls])
def test_torchscript_exporter(model_cls):
    model = model_cls().eval()
    proto = _export(model, dynamo=False)
    nodes = _nodes(proto)
    assert len(nodes) == (1 if model_cls is Int8ExpertSide else 2)
    assert all(len(n.output) == 4 for n in nodes)
    _compare(model, proto, (2, 11))
