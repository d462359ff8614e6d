"""Width-changing bit views while exporting (exporters.bit_views) and the opset of float8 programs:
rows viewed as a wider type, moved by init routing and viewed back export as the rows moved; a view
anything else reads is still refused; a program with float8 values exports at opset 21."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters, ort_custom_ops
from ascend_moe_onnx.exporters import bit_views
from ascend_moe_onnx.exporters import torch_npu as tn

# the module (the package's ``export`` is the function)
export_mod = importlib.import_module("ascend_moe_onnx.exporters.export")


class _RoutedAsBfloat16(torch.nn.Module):
    """Recipes' MXFP8 double routing: float8 rows routed as bfloat16 pairs, then viewed back."""

    def __init__(self, experts=4):
        super().__init__()
        self.experts = experts

    def forward(self, x, idx):
        x_q, scale = tn.npu_dynamic_mx_quant(x, dst_type=torch.float8_e4m3fn)
        expanded, row_idx, counts, _ = tn.npu_moe_init_routing_v2(
            x_q.view(torch.bfloat16), expert_idx=idx, active_num=idx.shape[0] * idx.shape[1],
            expert_num=self.experts, expert_tokens_num_type=1, expert_tokens_num_flag=True,
            active_expert_range=[0, self.experts], quant_mode=-1)
        rows = expanded.view(x_q.dtype)
        return rows.float(), row_idx, counts, scale


def _export(model, args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exporters.export(model, args, **kwargs)


def _session(proto):
    return ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                providers=["CPUExecutionProvider"])


def test_rows_viewed_as_a_wider_type_route_and_view_back_export_and_match():
    model = _RoutedAsBfloat16()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(5, 64, generator=g) * 30
    idx = torch.randint(0, 4, (5, 2), generator=g, dtype=torch.int32)
    proto = _export(model, (x, idx), dynamic_shapes=({0: Dim("tokens", min=2)}, {0: Dim("tokens", min=2)}))
    assert {o.domain: o.version for o in proto.opset_import}[""] == export_mod.FLOAT8_OPSET
    assert "MoeInitRoutingV3" in {n.op_type for n in proto.graph.node if n.domain == "ascend.moe"}
    sess = _session(proto)
    names = [i.name for i in sess.get_inputs()]
    for tokens, seed in ((5, 1), (11, 2)):
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(tokens, 64, generator=g) * 30
        x[0, :3] = torch.tensor([-0.0, 0.0, -0.0])
        idx = torch.randint(0, 4, (tokens, 2), generator=g, dtype=torch.int32)
        want = model(x, idx)
        got = sess.run(None, dict(zip(names, (x.numpy(), idx.numpy()))))
        # float8 rows compared as their float32 values' bits: negative zeros come back as such
        np.testing.assert_array_equal(got[0].view(np.uint32), want[0].numpy().view(np.uint32))
        for g_out, w_out in zip(got[1:3], want[1:3]):
            np.testing.assert_array_equal(g_out, w_out.numpy())


class _ViewRead(torch.nn.Module):
    def forward(self, x):
        return x.to(torch.float8_e4m3fn).view(torch.bfloat16).float()


def test_a_width_changing_view_that_is_read_is_still_refused():
    # bfloat16 values made of float8 bytes: no ONNX Runtime translation, never a silent other value
    with pytest.raises(Exception, match="view"):
        _export(_ViewRead(), (torch.randn(4, 8),))


def test_views_are_recorded_only_while_exporting():
    x = torch.randn(4, 8).to(torch.float8_e4m3fn)
    assert bit_views.source_of(x.view(torch.bfloat16)) is None
    with bit_views.recording():
        v = x.view(torch.bfloat16)
        assert bit_views.source_of(v) is x
        assert x.view(torch.uint8) is not x  # same width: an ordinary view, not recorded
        assert bit_views.source_of(x.view(torch.uint8)) is None
        assert v.view(torch.float8_e4m3fn) is x
    assert bit_views.source_of(v) is None


class _Float8Reshape(torch.nn.Module):
    def forward(self, x):
        q = x.to(torch.float8_e4m3fn)
        return q.reshape(x.shape[0], 2, -1).float()


class _NoGradFloat8Reshape(_Float8Reshape):
    def forward(self, x):
        with torch.no_grad():  # traced into a nested graph
            return super().forward(x)


@pytest.mark.parametrize("model", [_Float8Reshape(), _NoGradFloat8Reshape()], ids=["plain", "no_grad"])
def test_a_float8_program_exports_at_opset_21_and_runs(model):
    x = torch.randn(3, 8) * 10
    proto = _export(model, (x,))
    assert {o.domain: o.version for o in proto.opset_import}[""] == export_mod.FLOAT8_OPSET
    np.testing.assert_array_equal(_session(proto).run(None, {proto.graph.input[0].name: x.numpy()})[0],
                                  model(x).numpy())


def test_the_default_opset_stays_without_float8_and_a_requested_one_is_kept():
    proto = _export(torch.nn.Linear(4, 4), (torch.randn(2, 4),))
    assert {o.domain: o.version for o in proto.opset_import}[""] == export_mod.DEFAULT_OPSET
    proto = _export(_Float8Reshape(), (torch.randn(3, 8),), opset_version=20)
    assert {o.domain: o.version for o in proto.opset_import}[""] == 20
