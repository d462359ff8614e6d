"""Ascend MoE layers written as their sources write them (tests/ascend_code, calling torch_npu after
``install()``): eager against a dense per-token reference, export (dynamo; legacy where the code
allows), ONNX Runtime with the custom-op library and through the function bodies, at the export
token count and another."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx
import pytest
import torch
from torch.export import Dim

from ascend_moe_onnx import exporters
from tests import ascend_code
from tests.ascend_code import recipes_deepseek as rd
from tests.ascend_code import recipes_softmax as rs
from tests.ascend_code import vllm_ascend as va
from tests.ascend_code_cases import (
    FINALIZE,
    GATING,
    GMM,
    INIT_ROUTING,
    RE_ROUTING,
    UNPERMUTE,
    assert_fused,
    fill,
    moe_sum,
    ort_outputs,
    rel_err,
    sigmoid_grouped_routing,
    softmax_routing,
    swiglu_expert,
)

EXPORT_TOKENS, OTHER_TOKENS = 6, 11
TOL = 1e-5


def _deepseek_reference(m: rd.DeepseekV3MoE, x):
    c = m.config
    idx, w = sigmoid_grouped_routing(x.float() @ m.gate.weight, m.gate.e_score_correction_bias, c.num_experts_per_tok,
                                     c.n_group, c.topk_group, c.routed_scaling_factor)
    # ids >= n_routed_experts: LongCat's identity experts
    routed = moe_sum(x, idx, w, lambda e, r: r.double() if e >= c.n_routed_experts else
                     swiglu_expert(r, m.experts.w13_weight[e], m.experts.w2_weight[e]))
    shared = swiglu_expert(x, m.shared_experts.gate_up_proj.weight, m.shared_experts.down_proj.weight)
    return routed + shared


def _qwen3_reference(m: rs.Qwen3MoeSparseMoeBlock, x):
    idx, w = softmax_routing(x.float() @ m.gate.weight, m.top_k, m.norm_topk_prob)
    return moe_sum(x, idx, w, lambda e, r: swiglu_expert(r, m.experts.w13_weight[e], m.experts.w2_weight[e]))


def _gpt_oss_reference(m: rs.GptOssMLP, x):
    ex = m.experts
    idx, w = softmax_routing(m.router(x), m.top_k, True)

    def expert(e, r):
        h = r.double() @ ex.gate_up_proj[e].double() + ex.gate_up_proj_bias[e].double()
        gate, up = h[..., ::2].clamp(max=ex.limit), h[..., 1::2].clamp(-ex.limit, ex.limit)
        return ((up + 1) * gate * torch.sigmoid(gate * ex.alpha)) @ ex.down_proj[e].double() + ex.down_proj_bias[e]

    return moe_sum(x, idx, w, expert)


def _vllm_reference(m: va.AscendFusedMoE, x):
    c = m.config
    idx, w = sigmoid_grouped_routing(m.gate(x.float()), m.e_score_correction_bias, c.top_k, c.num_expert_group,
                                     c.topk_group, c.routed_scaling_factor)
    return moe_sum(x, idx, w, lambda e, r: swiglu_expert(r, m.w13_weight[e].t(), m.w2_weight[e].t()))


def _expert_rank_reference(m: rd.DeepseekV3ExpertRank, tokens, counts):
    per_rank = counts.view(m.moe_ep_size, -1)
    experts = torch.arange(per_rank.shape[1]).repeat(m.moe_ep_size)
    row_expert = torch.repeat_interleave(experts, per_rank.reshape(-1))
    rows = [swiglu_expert(tokens[r:r + 1], m.experts.w13_weight[e], m.experts.w2_weight[e])[0]
            for r, e in enumerate(row_expert.tolist())]
    return torch.stack(rows)


def _tokens(model, n, seed):
    g = torch.Generator().manual_seed(seed)
    if isinstance(model, rd.DeepseekV3ExpertRank):
        e_local = model.experts.w13_weight.shape[0]
        counts = torch.zeros(model.moe_ep_size * e_local, dtype=torch.int64)
        slots = torch.randint(0, counts.numel(), (n,), generator=g)
        counts.index_add_(0, slots, torch.ones(n, dtype=torch.int64))
        return torch.randn(n, model.experts.w13_weight.shape[1], generator=g), counts
    return (torch.randn(n, model.hidden_dim if hasattr(model, "hidden_dim") else model.config.hidden_size,
                        generator=g),)


@dataclass
class Path:
    """One Ascend call sequence: its layer, dense reference and the fused nodes its export holds."""

    build: Callable[[], torch.nn.Module]
    reference: Callable
    fused: list
    dim: object = None  # the token dim's Dim (default: a named Dim)
    # The legacy (TorchScript) exporter records Python ints as constants: paths that pass a size
    # computed from a shape (init routing's active_num) export for one token count only there.
    legacy: bool = False
    load: Callable | None = None  # after fill: weights that random normals cannot give (int8 experts)
    tol: float = TOL  # eager vs the dense reference
    ort_tol: float = TOL  # ONNX Runtime vs eager


# w8a8 (docs/ascend-code.md): eager against the dense reference on the dequantised weights differs by
# the activations' int8 rounding, per token, twice per expert (measured <= 1.7e-2); ONNX Runtime
# against eager by float32 ulps (measured <= 2.2e-7) and, where a value before rounding lies within
# ulps of a rounding boundary, by one int8 step of one intermediate value.
W8A8_TOL, W8A8_ORT_TOL = 3e-2, 1e-3


def _float_experts(e, h, i, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(e, h, 2 * i, generator=g) * 0.3, torch.randn(e, i, h, generator=g) * 0.3, g


def _load_deepseek_w8a8(m: rd.DeepseekV3MoE) -> None:
    c = m.config
    w13, w2, g = _float_experts(c.n_routed_experts, c.hidden_size, c.moe_intermediate_size, 11)
    smooth_1 = torch.rand(c.n_routed_experts, c.hidden_size, generator=g) + 0.5
    smooth_2 = torch.rand(c.n_routed_experts, c.moe_intermediate_size, generator=g) + 0.5
    m.experts.load_float_experts(w13, w2, smooth_1, smooth_2)


def _load_vllm_w8a8(m: va.AscendW8A8FusedMoE) -> None:
    c = m.config
    w13, w2, _ = _float_experts(c.num_experts, c.hidden_size, c.intermediate_size, 12)
    m.load_float_experts(w13.transpose(1, 2), w2.transpose(1, 2))  # the checkpoint's [out, in]


def _dequantised(q, channel_scale, smooth=None):
    """[E, in, out] float weights an int8 layer stands for: q · channel scale, rows divided back by
    the smoothing scale the activations are multiplied with."""
    w = q.double() * channel_scale.double()[:, None, :]
    return w if smooth is None else w * smooth.double()[:, :, None]


def _deepseek_w8a8_reference(m: rd.DeepseekV3MoE, x):
    c, ex = m.config, m.experts
    w13 = _dequantised(ex.w13_weight, ex.w13_weight_scale, ex.smooth_scale_1)
    w2 = _dequantised(ex.w2_weight, ex.w2_weight_scale.float(), ex.smooth_scale_2)
    idx, w = sigmoid_grouped_routing(x.float() @ m.gate.weight, m.gate.e_score_correction_bias, c.num_experts_per_tok,
                                     c.n_group, c.topk_group, c.routed_scaling_factor)
    routed = moe_sum(x, idx, w, lambda e, r: swiglu_expert(r, w13[e], w2[e]))
    shared = swiglu_expert(x, m.shared_experts.gate_up_proj.weight, m.shared_experts.down_proj.weight)
    return routed + shared


def _vllm_w8a8_reference(m: va.AscendW8A8FusedMoE, x):
    c = m.config
    w13 = _dequantised(m.w13_weight, m.w13_weight_scale_fp32)
    w2 = _dequantised(m.w2_weight, m.w2_weight_scale)
    idx, w = sigmoid_grouped_routing(m.gate(x.float()), m.e_score_correction_bias, c.top_k, c.num_expert_group,
                                     c.topk_group, c.routed_scaling_factor)
    return moe_sum(x, idx, w, lambda e, r: swiglu_expert(r, w13[e], w2[e]))


PATHS = {
    "recipes_deepseek_tp": Path(lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(), path="tp"), _deepseek_reference,
                                [GATING, INIT_ROUTING, GMM, GMM, FINALIZE]),
    "recipes_deepseek_decode": Path(lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(), path="dispatch_combine"),
                                    _deepseek_reference, [GATING, INIT_ROUTING, GMM, GMM, FINALIZE]),
    "recipes_deepseek_tp_copy_experts": Path(
        lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(n_copy_experts=4), path="tp"), _deepseek_reference,
        [GATING, INIT_ROUTING, GMM, GMM, FINALIZE]),
    "recipes_deepseek_decode_copy_experts": Path(
        lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(n_copy_experts=4), path="dispatch_combine"),
        _deepseek_reference, [GATING, INIT_ROUTING, GMM, GMM, FINALIZE]),
    "recipes_ep_receiving_rank": Path(lambda: rd.DeepseekV3ExpertRank(rd.DeepseekMoeConfig(), moe_ep_size=4),
                                      _expert_rank_reference, [RE_ROUTING, GMM, GMM], legacy=True),
    "recipes_qwen3_softmax": Path(lambda: rs.Qwen3MoeSparseMoeBlock(rs.SoftmaxMoeConfig()), _qwen3_reference,
                                  [GATING, INIT_ROUTING, GMM, GMM, FINALIZE]),
    "recipes_gpt_oss_v1_routing": Path(lambda: rs.GptOssMLP(rs.SoftmaxMoeConfig()), _gpt_oss_reference,
                                       [GATING, GMM, GMM, FINALIZE]),
    "vllm_ascend_a2": Path(lambda: va.AscendFusedMoE(va.VllmMoeConfig(), device="A2"), _vllm_reference,
                           [GATING, INIT_ROUTING, GMM, GMM, UNPERMUTE]),
    "vllm_ascend_a5": Path(lambda: va.AscendFusedMoE(va.VllmMoeConfig(), device="A5"), _vllm_reference,
                           [GATING, INIT_ROUTING, GMM, GMM, UNPERMUTE]),
    "recipes_deepseek_tp_w8a8": Path(
        lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(gmm_quant_mode="w8a8int8"), path="tp"),
        _deepseek_w8a8_reference, [GATING, INIT_ROUTING, GMM, GMM, FINALIZE], load=_load_deepseek_w8a8,
        tol=W8A8_TOL, ort_tol=W8A8_ORT_TOL),
    "recipes_deepseek_decode_w8a8": Path(
        lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(gmm_quant_mode="w8a8int8"), path="dispatch_combine"),
        _deepseek_w8a8_reference, [GATING, INIT_ROUTING, GMM, GMM, FINALIZE], load=_load_deepseek_w8a8,
        tol=W8A8_TOL, ort_tol=W8A8_ORT_TOL),
    "vllm_ascend_a2_w8a8": Path(
        lambda: va.AscendW8A8FusedMoE(va.VllmMoeConfig(), device="A2"), _vllm_w8a8_reference,
        [GATING, INIT_ROUTING, GMM, GMM, UNPERMUTE], load=_load_vllm_w8a8, tol=W8A8_TOL,
        ort_tol=W8A8_ORT_TOL),
    "vllm_ascend_a2_w8a8_fused_gmm_swiglu": Path(
        lambda: va.AscendW8A8FusedMoE(va.VllmMoeConfig(), device="A2", fused_gmm_swiglu=True),
        _vllm_w8a8_reference, [GATING, INIT_ROUTING, GMM, GMM, UNPERMUTE], dim=Dim.AUTO, load=_load_vllm_w8a8,
        tol=W8A8_TOL, ort_tol=W8A8_ORT_TOL),
    "vllm_ascend_a5_w8a8_mlp_quant": Path(
        lambda: va.AscendW8A8FusedMoE(va.VllmMoeConfig(), device="A5", dispatch_with_quant=False),
        _vllm_w8a8_reference, [GATING, INIT_ROUTING, GMM, GMM, UNPERMUTE], load=_load_vllm_w8a8,
        tol=W8A8_TOL, ort_tol=W8A8_ORT_TOL),
}

_EXPORTED: dict = {}


def _model(name):
    model = fill(PATHS[name].build(), seed=sum(map(ord, name)))
    if PATHS[name].load is not None:
        PATHS[name].load(model)
    process = getattr(model, "process_weights_after_loading", None)
    if process is not None:  # the recipes' load step: NZ weights (torch_npu.npu_format_cast)
        process()
    return model


def _exported(name):
    if name not in _EXPORTED:
        model = _model(name)
        args = _tokens(model, EXPORT_TOKENS, 1)
        dim = PATHS[name].dim or Dim("tokens", min=2)
        dims = tuple({0: dim} if a.dim() == 2 else None for a in args)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            _EXPORTED[name] = model, exporters.export(model, args, dynamic_shapes=dims)
    return _EXPORTED[name]


def test_install_makes_import_torch_npu_work():
    import torch_npu

    from ascend_moe_onnx.exporters import torch_npu as stand_in

    assert ascend_code is not None and torch_npu is stand_in.install() is stand_in
    assert torch.ops._C_ascend.moe_gating_top_k_hash.default is not None


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.parametrize("tokens", [1, EXPORT_TOKENS, OTHER_TOKENS])
def test_eager_matches_dense_reference(name, tokens):
    model = _model(name)
    args = _tokens(model, tokens, 2)
    with torch.no_grad():
        got = model(*args)
        expected = PATHS[name].reference(model, *args)
    assert rel_err(got, expected) <= PATHS[name].tol


@pytest.mark.parametrize("name", PATHS)
def test_export_has_fused_nodes(name):
    _, proto = _exported(name)
    assert_fused(proto, PATHS[name].fused)
    assert {n.domain for n in proto.graph.node} <= {"", "ai.onnx", "ascend.moe"}  # no aten fallback


def test_init_routing_keeping_every_row_exports_no_slice():
    """The recipes' active_num = num_tokens * top_k (a SymInt that covers every pair) keeps every
    expanded row: no Slice (a copy of all of them) between init routing and the grouped matmul."""
    _, proto = _exported("recipes_deepseek_tp")
    assert "Slice" not in {n.op_type for n in proto.graph.node}


@pytest.mark.parametrize("name", PATHS)
@pytest.mark.parametrize("library", [True, False], ids=["library", "function_bodies"])
@pytest.mark.parametrize("tokens", [EXPORT_TOKENS, OTHER_TOKENS])
def test_onnx_runtime_matches_eager(name, library, tokens):
    model, proto = _exported(name)
    args = _tokens(model, tokens, 3)
    with torch.no_grad():
        expected = model(*args)
    feeds = {i.name: a.numpy() for i, a in zip(proto.graph.input, args)}
    got = ort_outputs(proto, feeds, library)[0]
    assert rel_err(torch.from_numpy(np.asarray(got)), expected) <= PATHS[name].ort_tol


@pytest.mark.parametrize("name", [n for n, p in PATHS.items() if p.legacy])
def test_legacy_export_runs_in_onnx_runtime(name):
    model = _model(name)
    args = _tokens(model, EXPORT_TOKENS, 1)
    names = [f"input{i}" for i in range(len(args))]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, args, dynamo=False, input_names=names, dynamic_axes={names[0]: {0: "tokens"}})
    assert_fused(proto, PATHS[name].fused)
    for tokens in (EXPORT_TOKENS, OTHER_TOKENS):
        args = _tokens(model, tokens, 4)
        with torch.no_grad():
            expected = model(*args)
        for library in (True, False):
            got = ort_outputs(proto, dict(zip(names, (a.numpy() for a in args))), library)[0]
            assert rel_err(torch.from_numpy(np.asarray(got)), expected) <= TOL


def test_recipes_w8a8_experts_clamped_swiglu():
    """The recipe's ``swiglu_limit`` (swiglu_mode 1: gate / up interleaved, both clamped) against the
    dense computation on the dequantised weights."""
    from tests.ascend_code.recipes_w8a8 import W8A8Int8MoEGMM

    e, h, i, limit = 3, 16, 8, 0.5
    w13, w2, g = _float_experts(e, h, i, 13)
    experts = W8A8Int8MoEGMM(e, h, i, torch.float32).load_float_experts(w13, w2)
    x, counts = torch.randn(9, h, generator=g), torch.tensor([4, 0, 5])
    with torch.no_grad():
        got = experts(x, counts, group_list_type=1, swiglu_limit=limit)
    d13, d2 = _dequantised(experts.w13_weight, experts.w13_weight_scale), _dequantised(experts.w2_weight,
                                                                                      experts.w2_weight_scale.float())
    rows = []
    for r, ex in enumerate([0] * 4 + [2] * 5):
        v = x[r:r + 1].double() @ d13[ex]
        gate, up = v[:, 0::2].clamp(max=limit), v[:, 1::2].clamp(-limit, limit)
        rows.append((gate * torch.sigmoid(gate) * up) @ d2[ex])
    assert rel_err(got, torch.cat(rows)) <= W8A8_TOL
    with torch.no_grad():
        assert rel_err(experts(x, counts, group_list_type=1), got) > W8A8_TOL  # the clamp is in effect


BF16_PATHS = {
    "recipes_qwen3_softmax": lambda: rs.Qwen3MoeSparseMoeBlock(rs.SoftmaxMoeConfig(), dtype=torch.bfloat16),
    "vllm_ascend_a2": lambda: va.AscendFusedMoE(va.VllmMoeConfig(), dtype=torch.bfloat16, device="A2"),
    "recipes_deepseek_tp": lambda: rd.DeepseekV3MoE(rd.DeepseekMoeConfig(), torch.bfloat16, path="tp"),
    "vllm_ascend_a2_w8a8": lambda: va.AscendW8A8FusedMoE(va.VllmMoeConfig(), dtype=torch.bfloat16, device="A2"),
}
# Paths that multiply bfloat16 matrices outside the MoE ops (the recipes' DeepSeek shared expert):
# ONNX Runtime's CPU provider has no bfloat16 MatMul, so they are exported with bfloat16_in_float32.
BF16_IN_FLOAT32 = {"recipes_deepseek_tp"}
BF16_TOL = 3e-2  # cli/verify.py's bfloat16 tolerance


@pytest.mark.parametrize("name", BF16_PATHS)
def test_bfloat16_export_matches_eager_and_reference(name):
    model = fill(BF16_PATHS[name](), seed=7)
    if PATHS[name].load is not None:
        PATHS[name].load(model)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        proto = exporters.export(model, (_tokens(model, EXPORT_TOKENS, 1)[0].bfloat16(),),
                                 dynamic_shapes=({0: PATHS[name].dim or Dim("tokens", min=2)},),
                                 bfloat16_in_float32=name in BF16_IN_FLOAT32)
    assert_fused(proto, PATHS[name].fused)
    if name in BF16_IN_FLOAT32:
        assert not _bf16_arithmetic(proto)
    for tokens in (EXPORT_TOKENS, OTHER_TOKENS):
        x = _tokens(model, tokens, 5)[0].bfloat16()
        with torch.no_grad():
            eager = model(x)
            assert rel_err(eager, PATHS[name].reference(model, x)) <= max(BF16_TOL, PATHS[name].tol)
        for library in (True, False):
            got = ort_outputs(proto, {proto.graph.input[0].name: _bf16(x)}, library)[0]
            assert rel_err(torch.from_numpy(np.asarray(got, dtype=np.float32)), eager.float()) <= BF16_TOL


def _bf16_arithmetic(proto) -> list[str]:
    """Standard nodes that compute on bfloat16 values (none of them runs on ORT's CPU provider)."""
    from ascend_moe_onnx.exporters.bfloat16_compute import FLOAT32_OPS

    g = proto.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*g.input, *g.output, *g.value_info)}
    types.update({i.name: i.data_type for i in g.initializer})
    return [n.name for n in g.node if n.op_type in FLOAT32_OPS and n.domain == ""
            and any(types.get(v) == onnx.TensorProto.BFLOAT16 for v in (*n.input, *n.output))]


def test_bfloat16_in_float32_leaves_other_graphs_alone():
    """The pass rewrites only bfloat16 arithmetic: a float32 graph keeps every node."""
    from ascend_moe_onnx.exporters.bfloat16_compute import compute_bfloat16_in_float32

    _, proto = _exported("recipes_deepseek_tp")
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    assert compute_bfloat16_in_float32(copy) == 0 and copy == proto


def _bf16(x: torch.Tensor) -> np.ndarray:
    """A bfloat16 tensor as an ml_dtypes array (what tests.ort_values feeds ORT)."""
    import ml_dtypes

    return x.view(torch.int16).numpy().view(ml_dtypes.bfloat16)
