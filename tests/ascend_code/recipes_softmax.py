"""cann-recipes-infer's softmax-routed MoE layers, as ``models/qwen3_moe/models/modeling_qwen3_moe.py``
and ``models/gpt_oss/models/modeling_gpt_oss.py`` write them, on one device, unquantised.

- Qwen3-MoE: ``npu_moe_gating_top_k_softmax(logits, None, k)`` → renormalise (norm_topk_prob) →
  ``npu_moe_init_routing_v2`` → grouped matmul / npu_swiglu / grouped matmul →
  ``npu_moe_finalize_routing`` (drop_pad_mode 2);
- GPT-OSS: ``npu_moe_gating_top_k_softmax`` (its ``row_idx``) → first-version
  ``npu_moe_init_routing`` → ``npu_moe_compute_expert_tokens`` → grouped matmul with biases and
  cumsum group list, clamped interleaved SwiGLU → ``npu_moe_finalize_routing`` (drop_pad_mode 0).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch_npu
from torch import nn

from .recipes_deepseek import FusedMoEGMM, ReplicatedLinear


@dataclass
class SoftmaxMoeConfig:
    """The config fields the recipes' softmax-routed layers read."""

    hidden_size: int = 32
    moe_intermediate_size: int = 16
    num_experts: int = 8
    num_experts_per_tok: int = 2
    norm_topk_prob: bool = True
    swiglu_limit: float = 7.0
    swiglu_alpha: float = 1.702


class Qwen3MoeSparseMoeBlock(nn.Module):
    """Qwen3-MoE's layer on its ``moe_infer_tp`` path (moe_tp_size 1)."""

    def __init__(self, config: SoftmaxMoeConfig, dtype=torch.float32):
        super().__init__()
        self.config = config
        self.top_k = config.num_experts_per_tok
        self.num_experts = config.num_experts
        self.hidden_dim = config.hidden_size
        self.norm_topk_prob = config.norm_topk_prob
        self.gate = ReplicatedLinear(config.hidden_size, config.num_experts, torch.float32)
        self.experts = FusedMoEGMM(config.num_experts, config.hidden_size, config.moe_intermediate_size, dtype)
        # the recipe builds its decode row index on the device at construction (unused on this path)
        self.row_idx_decode = torch.arange(0, 2 * self.top_k, dtype=torch.int32).view(self.top_k, -1).permute(
            1, 0).contiguous().npu()

    def _forward_gate(self, hidden_states):
        hidden_states = hidden_states.view(-1, hidden_states.shape[-1])
        logits = self.gate(hidden_states.to(torch.float32))
        topk_weight, topk_idx, row_idx = torch_npu.npu_moe_gating_top_k_softmax(logits, None, k=self.top_k)
        if self.top_k > 1 and self.norm_topk_prob:
            denominator = topk_weight.sum(dim=-1, keepdim=True) + 1e-20
            topk_weight = topk_weight / denominator
        return topk_idx, topk_weight, None, row_idx

    def forward(self, hidden_states):
        topk_idx, topk_weight, _, row_idx = self._forward_gate(hidden_states)
        topk_idx = topk_idx.to(torch.int32)
        return self.moe_infer_tp(hidden_states, topk_idx, topk_weight)

    def moe_infer_tp(self, hidden_states, topk_idx, topk_weight):
        token_count, h = hidden_states.shape
        hidden_states = hidden_states.view(-1, h)
        routing_args = {
            "expert_idx": topk_idx,
            "active_num": token_count * self.top_k,
            "expert_num": self.num_experts,
            "expert_tokens_num_type": 1,
            "expert_tokens_num_flag": True,
            "active_expert_range": [0, self.num_experts],
            "quant_mode": -1
        }
        expanded_x, expanded_row_idx, tokens_per_expert, pertoken_scale = torch_npu.npu_moe_init_routing_v2(
            hidden_states, **routing_args
        )
        hidden_states_ordered_by_experts = self.experts(expanded_x, tokens_per_expert, group_list_type=1)
        hidden_states = torch_npu.npu_moe_finalize_routing(
            hidden_states_ordered_by_experts,
            skip1=None, skip2=None,
            bias=None,
            scales=topk_weight.to(hidden_states_ordered_by_experts.dtype),
            expanded_src_to_dst_row=expanded_row_idx,
            export_for_source_row=None, drop_pad_mode=2
        )
        return hidden_states.view(token_count, self.hidden_dim)


class GptOssExperts(nn.Module):
    """GPT-OSS experts: interleaved gate/up with biases, clamped SwiGLU (``(up + 1) * glu``)."""

    def __init__(self, config: SoftmaxMoeConfig, dtype):
        super().__init__()
        e, h, i = config.num_experts, config.hidden_size, config.moe_intermediate_size
        self.gate_up_proj = nn.Parameter(torch.empty(e, h, 2 * i, dtype=dtype), requires_grad=False)
        self.gate_up_proj_bias = nn.Parameter(torch.empty(e, 2 * i, dtype=dtype), requires_grad=False)
        self.down_proj = nn.Parameter(torch.empty(e, i, h, dtype=dtype), requires_grad=False)
        self.down_proj_bias = nn.Parameter(torch.empty(e, h, dtype=dtype), requires_grad=False)
        self.limit, self.alpha = config.swiglu_limit, config.swiglu_alpha

    def forward(self, hidden_states, expert_tokens):
        # group_list_type=None as op-plugin's MoE tests pass it: torch_npu reads it as 0 (cumsum)
        mm1_mm3 = torch_npu.npu_grouped_matmul([hidden_states], [self.gate_up_proj],
            group_list=expert_tokens, split_item=3, group_type=0, group_list_type=None,
            bias=[self.gate_up_proj_bias])[0]
        gate, up = mm1_mm3[..., ::2], mm1_mm3[..., 1::2]
        gate = gate.clamp(min=None, max=self.limit)
        up = up.clamp(min=-self.limit, max=self.limit)
        glu = gate * torch.sigmoid(gate * self.alpha)
        return torch_npu.npu_grouped_matmul(
            [((up + 1) * glu)], [self.down_proj],
            group_list=expert_tokens, group_type=0, split_item=3, bias=[self.down_proj_bias])[0]


class GptOssMLP(nn.Module):
    """GPT-OSS's MoE layer: router with bias, first-version init routing, finalize mode 0."""

    def __init__(self, config: SoftmaxMoeConfig, dtype=torch.float32):
        super().__init__()
        self.num_experts = config.num_experts
        self.hidden_dim = config.hidden_size
        self.top_k = config.num_experts_per_tok
        self.router = nn.Linear(config.hidden_size, config.num_experts, bias=True, dtype=dtype)
        self.experts = GptOssExperts(config, dtype)

    def forward(self, hidden_states):
        router_scores, router_indices, row_idx = self._forward_router(hidden_states)
        hidden_states_ordered_by_experts, routing_weights, expanded_row_idx, expert_idx \
            = self.moe_infer_fusion(hidden_states, router_indices, router_scores, row_idx)
        hidden_states = torch_npu.npu_moe_finalize_routing(
            hidden_states_ordered_by_experts,
            skip1=None, skip2=None,
            bias=None,
            scales=routing_weights,
            expanded_src_to_dst_row=expanded_row_idx,
            export_for_source_row=expert_idx
        )
        return hidden_states.view(-1, self.hidden_dim)

    def _forward_router(self, hidden_states):
        hidden_states = hidden_states.view(-1, self.hidden_dim)
        router_logits = self.router(hidden_states)
        topk_weight, topk_idx, row_idx = torch_npu.npu_moe_gating_top_k_softmax(router_logits, None, k=self.top_k)
        denominator = topk_weight.sum(dim=-1, keepdim=True) + 1e-20
        topk_weight = topk_weight / denominator
        return topk_weight, topk_idx, row_idx

    def moe_infer_fusion(self, x, topk_ids, topk_weight, row_idx):
        token_count, h = x.shape
        hidden_states = x.view(-1, h)
        routing_weights = topk_weight.to(x.dtype)
        expert_idx = topk_ids.int()
        expanded_x, expanded_row_idx, expanded_expert_idx = torch_npu.npu_moe_init_routing(
            hidden_states,
            row_idx=row_idx,
            expert_idx=expert_idx,
            active_num=token_count
        )
        expert_tokens = torch_npu.npu_moe_compute_expert_tokens(expanded_expert_idx, self.num_experts)
        expert_tokens = expert_tokens.to(torch.int64)
        hidden_states_ordered_by_experts = self.experts(expanded_x, expert_tokens=expert_tokens)
        return hidden_states_ordered_by_experts, routing_weights, expanded_row_idx, expert_idx
