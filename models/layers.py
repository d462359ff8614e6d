"""Shared pieces of the MoE blocks: the config, dtype handling, SwiGLU experts and the routed block.

Numerics. A block has one activation/weight dtype (float32, float16 or bfloat16). ONNX Runtime's
CPU provider has no bfloat16 kernel for any arithmetic op (MatMul, Add, Mul, Sigmoid, Where,
Expand, ...; only data movement: Cast, Gather, Reshape, Slice, Concat, Transpose, ScatterND), so
the export path of a bfloat16 block computes in float32 and rounds every op's result to bfloat16
(``rounded``): the same values a bfloat16 kernel with float32 accumulation produces, up to
summation order. float16 and float32 blocks compute in their own dtype (ORT runs float16 on CPU,
inserting float32 casts where it lacks a float16 kernel). The plain-torch reference path uses
native torch ops in the block's dtype, so the comparison also checks that emulation.

Experts. The export path computes only the T*k routed rows, with the formulation chosen per
export (``experts_formulation``: ``ort``, ``onnx`` or ``padded``; see models.experts). ``padded``
is the earlier formulation: one batched computation over a zero-padded ``[E, C, H]`` buffer
(C = most rows any expert gets), E*C rows instead of T*k. The reference path loops over experts in
eager torch (the Hugging Face formulation).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, cast

import torch
import torch.nn.functional as F

from ascend_moe_onnx import exporters  # noqa: F401  (defines the torch ops)
from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import DEFAULTS as GATING_DEFAULTS
from ascend_moe_onnx.onnx_schemas.moe_re_routing import DEFAULTS as RE_ROUTING_DEFAULTS

from . import experts as routed_experts
from .numerics import matmul_t, rounded, swiglu, swiglu_native


@dataclass
class MoEConfig:
    """Sizes and routing attributes of one MoE block (a preset is one of these)."""

    hidden: int
    experts: int
    top_k: int
    intermediate: int
    shared: int = 0  # shared experts, fused into one SwiGLU of width shared * intermediate
    norm_type: int = GATING_DEFAULTS["norm_type"]  # 0 softmax, 1 sigmoid, 2 sqrt(softplus)
    bias: bool = False  # e_score_correction_bias (selection only)
    group_count: int = GATING_DEFAULTS["group_count"]
    k_group: int = GATING_DEFAULTS["k_group"]
    group_select_mode: int = GATING_DEFAULTS["group_select_mode"]
    renorm: int = GATING_DEFAULTS["renorm"]
    routed_scaling_factor: float = GATING_DEFAULTS["routed_scaling_factor"]
    router_fp32: bool = True  # router logits computed and kept in float32
    swiglu_limit: float = 0.0  # DeepSeek-V4 clamp (0 = none)
    act_fp32: bool = False  # SwiGLU activation in float32, rounded once (DeepSeek-V4)
    hash: bool = False  # hash layer: input_ids + tid2eid table
    vocab: int = 0  # tid2eid rows
    image_tokens: bool = False  # additional_token_mask input + additional_bias buffer
    ranks: int = 0  # expert-parallel block: source ranks N (local experts = experts)
    quant: str = ""  # expert-parallel block: "int8" (with per-token scales) or "" (plain)
    idx_type: int = RE_ROUTING_DEFAULTS["idx_type"]  # expert-parallel block: MoeReRouting idx_type

    def replace(self, **changes: Any) -> MoEConfig:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """The dtype the export path computes in: float32 for bfloat16 blocks, else the dtype."""
    return torch.float32 if dtype == torch.bfloat16 else dtype


def padded_positions(expert: torch.Tensor, num_experts: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Row ``pos`` of each entry inside its expert's bucket (order kept) and the counts per expert."""
    onehot = (expert[:, None] == torch.arange(num_experts)[None, :]).to(torch.int64)
    pos = torch.gather(torch.cumsum(onehot, 0), 1, expert[:, None]).squeeze(1) - 1
    return pos, onehot.sum(0)


class GroupedExperts(torch.nn.Module):
    """E SwiGLU experts with stacked weights ``gate_proj``/``up_proj`` [E, I, H], ``down_proj`` [E, H, I].

    ``forward`` is the padded-bucket formulation described in the module docstring.
    """

    def __init__(self, experts: int, hidden: int, intermediate: int, dtype: torch.dtype,
                 limit: float = 0.0, act_fp32: bool = False):
        super().__init__()
        self.dtype, self.limit, self.act_fp32 = dtype, limit, act_fp32
        self.num_experts = experts
        self.gate_proj = torch.nn.Parameter(torch.empty(experts, intermediate, hidden, dtype=dtype))
        self.up_proj = torch.nn.Parameter(torch.empty(experts, intermediate, hidden, dtype=dtype))
        self.down_proj = torch.nn.Parameter(torch.empty(experts, hidden, intermediate, dtype=dtype))

    def forward(self, x: torch.Tensor, expert: torch.Tensor, pos: torch.Tensor, capacity: int) -> torch.Tensor:
        """Rows ``x`` [P, H] (compute dtype) through expert ``expert[p]``, bucket row ``pos[p]``;
        ``capacity`` is the bucket size (>= every count). Returns [P, H]."""
        buf = x.new_zeros((self.num_experts, capacity, x.shape[-1]))
        buf = torch.index_put(buf, (expert, pos), x)
        biases = None  # an HF view with biases (gpt-oss): [E, I] -> [E, 1, I]
        if getattr(self, "gate_bias", None) is not None:
            biases = tuple(getattr(self, n).to(x.dtype).unsqueeze(1) for n in ("gate_bias", "up_bias", "down_bias"))
        out = swiglu(buf, self.gate_proj, self.up_proj, self.down_proj, self.dtype, self.limit,
                     self.act_fp32, biases, getattr(self, "alpha", 1.0), getattr(self, "beta", 0.0))
        return out[expert, pos]

    def expert_native(self, e: int, x: torch.Tensor) -> torch.Tensor:
        """Reference: expert ``e`` on rows ``x`` with native torch ops."""
        return swiglu_native(x, self.gate_proj[e], self.up_proj[e], self.down_proj[e], self.limit,
                             self.act_fp32)


class SharedExpert(torch.nn.Module):
    """The always-active shared expert(s), one SwiGLU (weights [I, H] / [H, I])."""

    def __init__(self, hidden: int, intermediate: int, dtype: torch.dtype, limit: float = 0.0,
                 act_fp32: bool = False):
        super().__init__()
        self.dtype, self.limit, self.act_fp32 = dtype, limit, act_fp32
        self.gate_proj = torch.nn.Parameter(torch.empty(intermediate, hidden, dtype=dtype))
        self.up_proj = torch.nn.Parameter(torch.empty(intermediate, hidden, dtype=dtype))
        self.down_proj = torch.nn.Parameter(torch.empty(hidden, intermediate, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Export path on compute-dtype rows."""
        return swiglu(x, self.gate_proj, self.up_proj, self.down_proj, self.dtype, self.limit, self.act_fp32)

    def forward_native(self, x: torch.Tensor) -> torch.Tensor:
        """Reference path with native torch ops."""
        return swiglu_native(x, self.gate_proj, self.up_proj, self.down_proj, self.limit, self.act_fp32)


def init_random(module: torch.nn.Module, seed: int = 0) -> None:
    """Fill every parameter/persistent float buffer with seeded random values of a sensible scale (tiny
    tests): matrices ~ N(0, 1/fan_in), vectors ~ N(0, 0.1^2); values are rounded to the tensor's dtype.
    Non-persistent buffers (rotary ``inv_freq``, masks) are derived from the config, not weights: they
    keep their values, so a saved and reloaded model computes what the in-memory one does."""
    g = torch.Generator().manual_seed(seed)
    saved = module.state_dict(keep_vars=True)
    buffers = [(name, t) for name, t in module.named_buffers() if name in saved]
    with torch.no_grad():
        for name, t in list(module.named_parameters()) + buffers:
            if name.endswith("tid2eid"):  # hash table: random expert ids, duplicates allowed
                cfg = getattr(module, "cfg", None)
                experts = cfg.experts if cfg is not None else int(t.max()) + 1
                t.copy_(torch.randint(0, experts, t.shape, generator=g))
                continue
            if not t.is_floating_point():
                continue
            std = t.shape[-1] ** -0.5 if t.dim() >= 2 else 0.1
            t.copy_((torch.randn(t.shape, generator=g) * std).to(t.dtype))


class RoutedMoE(torch.nn.Module):
    """A routed MoE block: router (``gate``), E routed SwiGLU experts, optional shared expert.

    ``forward`` is the export path: router logits -> one MoeGatingTopKHash call -> experts.
    ``forward_native`` is the plain-torch reference of the published model (no custom ops);
    subclasses supply its router (``route_native``). Both return ``(output [T, H], expert_idx
    [T, k] int32)``.
    """

    input_names: tuple = ("hidden_states",)
    output_names: tuple = ("output", "expert_idx")
    experts_formulation: str = routed_experts.DEFAULT  # models.experts.FORMULATIONS

    def __init__(self, cfg: MoEConfig, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.cfg, self.dtype, self.compute = cfg, dtype, compute_dtype(dtype)
        router_dtype = torch.float32 if cfg.router_fp32 else dtype
        self.gate = torch.nn.Module()
        self.gate.weight = torch.nn.Parameter(torch.empty(cfg.experts, cfg.hidden, dtype=router_dtype))
        if cfg.bias:
            self.gate.register_buffer("e_score_correction_bias", torch.zeros(cfg.experts, dtype=router_dtype))
        self.experts = GroupedExperts(cfg.experts, cfg.hidden, cfg.intermediate, dtype,
                                      cfg.swiglu_limit, cfg.act_fp32)
        self.shared_experts = (SharedExpert(cfg.hidden, cfg.shared * cfg.intermediate, dtype,
                                            cfg.swiglu_limit, cfg.act_fp32) if cfg.shared else None)

    # ---- routing --------------------------------------------------------------------------------
    def router_logits(self, x: torch.Tensor) -> torch.Tensor:
        """Router logits [T, E]: float32 when the model keeps them float32, else in the block dtype."""
        if self.cfg.router_fp32:
            return F.linear(x.float(), self._router_weight().float())
        return matmul_t(x.to(self.compute), self._router_weight()).to(self.dtype)

    def router_logits_native(self, x: torch.Tensor) -> torch.Tensor:
        """Reference router logits: ``F.linear`` in float32 or natively in the block dtype."""
        if self.cfg.router_fp32:
            return F.linear(x.float(), self._router_weight().float())
        return F.linear(x, self._router_weight().to(x.dtype))

    def _router_weight(self) -> torch.Tensor:
        # ``gate`` is a bare Module holding HF's ``gate.weight`` parameter [E, H].
        return cast(torch.Tensor, self.gate.weight)

    def gating_attributes(self) -> dict:
        """The MoeGatingTopKHash attributes of this block."""
        c = self.cfg
        return dict(k_group=c.k_group, group_count=c.group_count, group_select_mode=c.group_select_mode,
                    renorm=c.renorm, norm_type=c.norm_type,
                    routed_scaling_factor=c.routed_scaling_factor)

    def route(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Export-path routing: torch_npu's ``npu_moe_gating_top_k`` -> (weights, expert_idx)."""
        bias = getattr(self.gate, "e_score_correction_bias", None)
        y, idx, _ = torch.ops.npu.npu_moe_gating_top_k(logits, self.cfg.top_k, bias=bias,
                                                        **self.gating_attributes())
        return y, idx

    def route_native(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference routing of the published model -> (weights [T, k], expert_idx [T, k])."""
        raise NotImplementedError

    def selection_scores(self, inputs: dict) -> torch.Tensor:
        """Scores the experts are ranked by, float32 [T, E] (to tell near-ties from real mismatches)."""
        raise NotImplementedError

    # ---- forward --------------------------------------------------------------------------------
    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Export path (custom op + routed experts) -> (output, expert_idx)."""
        named = dict(zip(self.input_names, inputs))
        x = named["hidden_states"]
        w, idx = self.route(self.router_logits(x), named)
        xc = x.to(self.compute)
        # The shared expert runs inside the experts' call where the formulation can (one read of
        # all the block's expert weights by one kernel), else after it.
        shared = self.shared_experts if routed_experts.folds_shared(self.experts_formulation) else None
        if self.experts_formulation == "padded":
            routed = self._padded_experts(xc, w, idx)
        else:
            routed = routed_experts.routed(self.experts, xc, w, idx, self.experts_formulation, shared)
        out = rounded(routed.to(self.compute), self.dtype)
        if self.shared_experts is not None and shared is None:
            out = rounded(out + self.shared_experts(xc), self.dtype)
        return out.to(self.dtype), idx

    def _padded_experts(self, xc, w, idx):
        """The ``padded`` formulation: [E, C, H] buckets -> weighted sum over the k slots (float32)."""
        T, k = idx.shape
        flat = idx.reshape(-1).to(torch.int64)
        pos, counts = padded_positions(flat, self.cfg.experts)
        capacity = counts.max().item()
        torch._check(capacity >= 0)
        rows = xc[torch.arange(T * k) // k]  # one row per (token, slot)
        y = self.experts(rows, flat, pos, capacity)
        # Weighted sum over the k slots in float32, rounded once (DeepSeek's moe_infer does the same).
        return (y.float().reshape(T, k, xc.shape[-1]) * w.float().reshape(T, k, 1)).sum(1)

    def forward_native(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Plain-torch reference (no custom ops) -> (output, expert_idx int32)."""
        named = dict(zip(self.input_names, inputs))
        x = named["hidden_states"]
        w, idx = self.route_native(self.router_logits_native(x), named)
        out = torch.zeros(x.shape, dtype=torch.float32)
        for e in range(self.cfg.experts):
            tok, slot = torch.where(idx == e)
            if tok.numel():
                h = self.experts.expert_native(e, x[tok])
                out.index_add_(0, tok, h.float() * w[tok, slot, None].float())
        out = out.to(self.dtype)
        if self.shared_experts is not None:
            out = out + self.shared_experts.forward_native(x)
        return out, idx.to(torch.int32)

    # ---- inputs ---------------------------------------------------------------------------------
    def example_inputs(self, tokens: int, seed: int = 0) -> tuple:
        """Random inputs for ``tokens`` tokens, in ``input_names`` order."""
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(tokens, self.cfg.hidden, generator=g).to(self.dtype)
        named = {"hidden_states": x}
        if "input_ids" in self.input_names:
            named["input_ids"] = torch.randint(0, self.cfg.vocab, (tokens,), generator=g)
        if "additional_token_mask" in self.input_names:
            named["additional_token_mask"] = torch.rand(tokens, generator=g) < 0.3
        return tuple(named[n] for n in self.input_names)

    def dynamic_shapes(self) -> tuple:
        """``dynamic_shapes`` for export: every input's dim 0 is the token count."""
        tokens = torch.export.Dim("tokens")
        return (tuple({0: tokens} for _ in self.input_names),)
