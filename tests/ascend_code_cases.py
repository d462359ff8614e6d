"""Dense per-token references for the layers of tests/ascend_code, written from the operators'
definitions (no torch_npu stand-in call), and shared helpers for their tests."""

from __future__ import annotations

import numpy as np
import onnx
import torch
import torch.nn.functional as F

from ascend_moe_onnx import onnx_schemas

# Fused ascend.moe op types each exported path must contain (docs/ascend-code.md's op map).
GATING, RE_ROUTING = "MoeGatingTopKHash", "MoeReRouting"
INIT_ROUTING = ("MoeInitRoutingV2", "MoeInitRoutingV3")
GMM, FINALIZE = "GroupedMatmul", "MoeFinalizeRoutingV2"
PERMUTE, UNPERMUTE = "MoeTokenPermute", "MoeTokenUnpermute"


def fill(module: torch.nn.Module, seed: int = 0, scale: float = 0.3) -> torch.nn.Module:
    """Random parameters (normal * scale), reproducible; returns the module in eval mode."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            p.copy_((torch.randn(p.shape, generator=g) * scale).to(p.dtype))
    return module.eval()


def rel_err(got: torch.Tensor, expected: torch.Tensor) -> float:
    """max |got - expected| / max |expected| in float64."""
    got, expected = torch.as_tensor(got).double(), torch.as_tensor(expected).double()
    assert got.shape == expected.shape, (got.shape, expected.shape)
    return float((got - expected).abs().max() / expected.abs().max().clamp(min=1e-30))


def _grouped_choice(select: torch.Tensor, k: int, groups: int, topk_group: int) -> torch.Tensor:
    """Indices of the k best experts per row among the topk_group best groups (group score: top-2 sum)."""
    t, e = select.shape
    per = select.view(t, groups, e // groups)
    group_score = per.topk(2, dim=-1).values.sum(-1)
    keep = group_score.topk(topk_group, dim=-1).indices
    mask = torch.zeros(t, groups, dtype=torch.bool).scatter(1, keep, True)
    masked = torch.where(mask[:, :, None], per, torch.tensor(-torch.inf)).view(t, e)
    return masked.topk(k, dim=-1).indices


def sigmoid_grouped_routing(logits, bias, k, groups, topk_group, scale):
    """DeepSeek-V3 routing: sigmoid scores, biased grouped selection, renormalised weights * scale."""
    s = logits.double().sigmoid()
    idx = _grouped_choice(s + bias.double(), k, groups, topk_group)
    w = s.gather(1, idx)
    return idx, w / (w.sum(-1, keepdim=True) + 1e-20) * scale


def softmax_routing(logits, k, renormalise: bool):
    """Softmax top-k routing, optionally renormalised over the k chosen weights."""
    s = logits.double().softmax(-1)
    w, idx = s.topk(k, dim=-1)
    return idx, (w / (w.sum(-1, keepdim=True) + 1e-20) if renormalise else w)


def swiglu_expert(x, w13, w2):
    """silu(gate) * up with ``[gate | up] = x @ w13``, then ``@ w2`` (float64)."""
    gate, up = (x.double() @ w13.double()).chunk(2, dim=-1)
    return (F.silu(gate) * up) @ w2.double()


def moe_sum(x, idx, w, expert) -> torch.Tensor:
    """``out[t] = Σ_j w[t, j] · expert(e, x[t])`` token by token."""
    rows = []
    for t in range(x.shape[0]):
        rows.append(sum(w[t, j] * expert(int(idx[t, j]), x[t:t + 1])[0] for j in range(idx.shape[1])))
    return torch.stack(rows) if rows else torch.zeros(0, x.shape[1], dtype=torch.float64)


def op_types(model: onnx.ModelProto) -> list[str]:
    """Op types of the main graph's nodes, in order."""
    return [n.op_type for n in model.graph.node]


def defined(op_type) -> bool:
    """Whether the project defines the ascend.moe operator (any of a tuple of names)."""
    onnx_schemas.register()
    names = op_type if isinstance(op_type, tuple) else (op_type,)
    return any(onnx.defs.has(n, onnx_schemas.DOMAIN) for n in names)


def assert_fused(model: onnx.ModelProto, expected: list) -> None:
    """Every expected fused op type (a name or a tuple of alternatives) the project defines is in
    the graph, as often as listed; no 3-D weight is gathered row by row once GroupedMatmul exists."""
    types = op_types(model)
    for op in set(expected):
        if not defined(op):
            continue
        names = op if isinstance(op, tuple) else (op,)
        want = sum(1 for e in expected if e == op)
        got = sum(types.count(n) for n in names)
        assert got >= want, (op, got, want, types)
    if GMM in expected and defined(GMM):
        weights = {i.name for i in model.graph.initializer if len(i.dims) == 3}
        gathered = [n for n in model.graph.node if n.op_type == "Gather" and n.input[0] in weights]
        assert not gathered, f"per-row weight gathers: {[n.name for n in gathered]}"


def ort_outputs(model: onnx.ModelProto, feeds: dict, library: bool) -> list[np.ndarray]:
    """Run the model on CPU with (custom-op library) or without (function bodies) the library."""
    from tests import ort_values
    from tests.ops.moe_re_routing.rerouting_cases import session

    return ort_values.run(session(model, library=library), feeds)
