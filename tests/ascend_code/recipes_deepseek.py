"""cann-recipes-infer's DeepSeek-V3 MoE layer as its ``modeling_deepseek.py`` (class DeepseekV3MoE)
and ``module/fuse_moe_gmm.py`` write it, reduced to one device.

The call sequences and arguments are the recipe's: ``_forward_gate`` (npu_moe_gating_top_k,
sigmoid, grouped top-2-sum selection), the shared expert (gate_up matmul, npu_swiglu, down
matmul), ``moe_infer_tp`` (npu_moe_init_routing_v2 → FusedMoEGMM → npu_moe_finalize_routing with
the shared expert as ``skip1``, drop_pad_mode 2), ``moe_infer_dispatch_combine`` (MC2
dispatch_v2 → FusedMoEGMM → combine_v2 + shared expert) and ``forward_expert`` (the EP receiving
rank: npu_moe_re_routing → FusedMoEGMM → un-sort). Weights are stored as after the recipe's
``process_weights_after_loading`` (transposed to ``[in, out]``), which also casts the expert weights
to the NPU's NZ format (``enable_weight_nz``, the recipe's default); linear layers read
``self.weight.data`` in forward, as ``module/linear.py`` does. ``n_copy_experts`` adds LongCat's
identity ("zero computation") experts, ids ``[E, E + n_copy_experts)``: the TP path masks them out
of init routing (``active_expert_range``, their rows -1 in finalize) and adds ``weight · x``, the
decode path passes them to dispatch / combine as ``copy_expert_num`` with ``ori_x``. With ``gmm_quant_mode="w8a8int8"``
the routed experts are the recipe's w8a8 int8 method (recipes_w8a8): init routing (TP path) or
dispatch (decode path, ``quant_mode=2``) quantises the rows with ``smooth_scale_1`` and the experts
run int8.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch_npu
from torch import nn

from .recipes_w8a8 import W8A8Int8MoEGMM


@dataclass
class DeepseekMoeConfig:
    """The config fields the recipe's MoE layer reads."""

    hidden_size: int = 32
    moe_intermediate_size: int = 16
    n_routed_experts: int = 16
    num_experts_per_tok: int = 4
    n_group: int = 4
    topk_group: int = 2
    routed_scaling_factor: float = 2.5
    n_shared_experts: int = 1
    # LongCat's identity experts (ids E .. E + n_copy_experts - 1; the gate scores them too)
    n_copy_experts: int = 0
    # config.quant_config.gmm_quant_mode: "w16a16" (float experts) or "w8a8int8" (recipes_w8a8)
    gmm_quant_mode: str = "w16a16"


class ReplicatedLinear(nn.Module):
    """module/linear.py's unquantised linear: weight ``[in, out]`` after loading, read in forward as
    ``self.weight.data``."""

    def __init__(self, input_size: int, output_size: int, params_dtype=torch.float32):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(input_size, output_size, dtype=params_dtype), requires_grad=False)

    def forward(self, x):
        origin_shape = x.size()
        x = x.reshape(-1, origin_shape[-1])
        out = torch.matmul(x, self.weight.data)
        return out.view(*origin_shape[:-1], out.shape[-1])


class DeepseekV3SharedExpert(nn.Module):
    """The shared expert: merged gate/up projection, npu_swiglu, down projection."""

    def __init__(self, config: DeepseekMoeConfig, dtype):
        super().__init__()
        inter = config.moe_intermediate_size * config.n_shared_experts
        self.gate_up_proj = ReplicatedLinear(config.hidden_size, 2 * inter, dtype)
        self.down_proj = ReplicatedLinear(inter, config.hidden_size, dtype)

    def forward(self, x):
        merged_x = self.gate_up_proj(x)
        intermediate_hidden_states = torch_npu.npu_swiglu(merged_x)
        return self.down_proj(intermediate_hidden_states)


class FusedMoEGMM(nn.Module):
    """module/fuse_moe_gmm.py: w13 ``[E, H, 2I]`` and w2 ``[E, I, H]`` (transposed at loading)."""

    def __init__(self, num_experts: int, hidden_size: int, intermediate_size: int, dtype):
        super().__init__()
        self.w13_weight = nn.Parameter(torch.empty(num_experts, hidden_size, 2 * intermediate_size, dtype=dtype),
                                       requires_grad=False)
        self.w2_weight = nn.Parameter(torch.empty(num_experts, intermediate_size, hidden_size, dtype=dtype),
                                      requires_grad=False)

    def process_weights_after_loading(self, enable_weight_nz: bool = True):
        """The recipe's load-time step: expert weights to the NPU's NZ format (values unchanged)."""
        if enable_weight_nz:
            self.w13_weight.data = torch_npu.npu_format_cast(self.w13_weight.data.contiguous(), 29)  # 29: format nz
            self.w2_weight.data = torch_npu.npu_format_cast(self.w2_weight.data.contiguous(), 29)  # 29: format nz

    def forward(self, x, expert_tokens, group_list_type: int = 0, pertoken_scale=None):
        mm1_mm3 = torch_npu.npu_grouped_matmul([x], [self.w13_weight],
            group_list=expert_tokens, group_type=0, group_list_type=group_list_type, split_item=3)[0]
        mm1_mm3 = torch_npu.npu_swiglu(mm1_mm3)
        out = torch_npu.npu_grouped_matmul(
            [mm1_mm3], [self.w2_weight],
            group_list=expert_tokens, group_type=0, group_list_type=group_list_type, split_item=3)[0]
        return out


class DeepseekV3MoE(nn.Module):
    """DeepseekV3MoE on one device: ``path="tp"`` is ``moe_infer_tp`` (moe_tp_size 1, no
    all-reduce), ``path="dispatch_combine"`` is the MC2 decode path with ep_world_size 1.

    The recipe takes the fused gate only for 256 / 384 experts; this layer takes it at any size.
    """

    def __init__(self, config: DeepseekMoeConfig, dtype=torch.float32, path: str = "tp"):
        super().__init__()
        if path not in ("tp", "dispatch_combine"):
            raise ValueError(f"DeepseekV3MoE: path must be 'tp' or 'dispatch_combine', got {path!r}")
        self.config, self.path = config, path
        self.hidden_dim = config.hidden_size
        self.top_k = config.num_experts_per_tok
        self.num_experts = self.n_routed_experts = config.n_routed_experts
        self.routed_scaling_factor = config.routed_scaling_factor
        self.n_group, self.topk_group = config.n_group, config.topk_group
        self.n_shared_experts = config.n_shared_experts
        self.shared_expert_rank_num = 0
        self.moe_ep_size = self.moe_tp_size = 1
        self.gmm_quant_mode = config.gmm_quant_mode
        if config.gmm_quant_mode not in ("w16a16", "w8a8int8"):
            raise ValueError(f"DeepseekV3MoE: gmm_quant_mode must be 'w16a16' or 'w8a8int8', got "
                             f"{config.gmm_quant_mode!r}")
        experts = W8A8Int8MoEGMM if "a8" in self.gmm_quant_mode else FusedMoEGMM
        self.experts = experts(config.n_routed_experts, config.hidden_size, config.moe_intermediate_size, dtype)
        self.num_copy_experts = config.n_copy_experts
        scored = config.n_routed_experts + config.n_copy_experts
        self.gate = ReplicatedLinear(config.hidden_size, scored, torch.float32)
        self.gate.e_score_correction_bias = nn.Parameter(torch.empty(scored), requires_grad=False)
        self.shared_experts = DeepseekV3SharedExpert(config, dtype)

    def process_weights_after_loading(self, enable_weight_nz: bool = True):
        """The recipe's load-time step for the routed experts (NZ format when ``enable_weight_nz``)."""
        process = getattr(self.experts, "process_weights_after_loading", None)
        if process is not None:
            process(enable_weight_nz)

    def _forward_gate(self, hidden_states):
        num_tokens, h = hidden_states.shape
        hidden_states = hidden_states.view(-1, h).to(torch.float32)
        logits = self.gate(hidden_states)
        topk_weight, topk_idx, _ = torch_npu.npu_moe_gating_top_k(
            logits,
            k=self.top_k,
            bias=self.gate.e_score_correction_bias.float(),
            k_group=self.topk_group,
            group_count=self.n_group,
            group_select_mode=1,
            renorm=0,
            norm_type=1,
            routed_scaling_factor=self.routed_scaling_factor,
            eps=1e-20
        )
        return topk_idx, topk_weight, None

    def set_mc2_kwargs(self):
        mc2_group_name = "moe_ep_group_mc2"
        self.dispatch_kwargs = {
            "x_active_mask": None, "expert_shard_type": 0, "shared_expert_rank_num": self.shared_expert_rank_num,
            "moe_expert_num": self.n_routed_experts, "global_bs": 0,
            "scales": self.experts.smooth_scale_1 if "a8" in self.gmm_quant_mode else None,
            "quant_mode": 2 if "a8" in self.gmm_quant_mode else 0,
            "group_ep": mc2_group_name, "ep_world_size": self.moe_ep_size, "ep_rank_id": 0,
            "group_tp": mc2_group_name, "tp_world_size": self.moe_tp_size, "tp_rank_id": 0,
            "comm_alg": "fullmesh_v2",
        }
        if self.num_copy_experts:
            self.dispatch_kwargs["copy_expert_num"] = self.num_copy_experts
        self.combine_kwargs = {
            "x_active_mask": None, "expert_shard_type": 0, "shared_expert_rank_num": self.shared_expert_rank_num,
            "moe_expert_num": self.n_routed_experts, "copy_expert_num": self.num_copy_experts, "global_bs": 0,
            "group_ep": mc2_group_name,
            "ep_world_size": self.moe_ep_size, "ep_rank_id": 0, "group_tp": mc2_group_name,
            "tp_world_size": self.moe_tp_size, "tp_rank_id": 0,
        }

    def forward(self, hidden_states):
        topk_idx, topk_weight, _ = self._forward_gate(hidden_states)
        topk_idx = topk_idx.to(torch.int32)
        hidden_states_share = self.shared_experts(hidden_states.view(-1, hidden_states.shape[-1]))
        if self.path == "tp":
            return self.moe_infer_tp(hidden_states, topk_idx, topk_weight, hidden_states_share)
        return self.moe_infer_dispatch_combine(hidden_states, topk_idx, topk_weight, hidden_states_share)

    def moe_infer_tp(self, x, topk_ids, topk_weight, hidden_states_share):
        num_tokens, h = x.shape
        if self.num_copy_experts:
            # LongCat-Flash-Lite: identity experts (ids >= n_routed_experts) leave init routing
            # (rows -1) and add weight · x
            identity_mask = (topk_ids >= self.n_routed_experts)
            zero_expert_weight = topk_weight * identity_mask.to(topk_weight.dtype)
            topk_weight = topk_weight * (topk_ids < self.n_routed_experts).to(topk_weight.dtype)
            hidden_states_share = hidden_states_share + (zero_expert_weight.sum(-1, keepdim=True) * x).to(x.dtype)
        routing_args = {
            "expert_idx": topk_ids,
            "active_num": num_tokens * self.top_k,
            "expert_num": self.num_experts + self.num_copy_experts,
            "expert_tokens_num_type": 1,
            "expert_tokens_num_flag": True,
            "active_expert_range": [0, self.num_experts],
            "quant_mode": -1
        }
        if "a8" in self.gmm_quant_mode:
            routing_args.update({
                "scale": self.experts.smooth_scale_1,
                "expert_tokens_num_type": 2,
                "quant_mode": 1,
                "row_idx_type": 0,
                "drop_pad_mode": 0
            })
        expanded_x, expanded_row_idx, tokens_per_expert, dynamic_scale = torch_npu.npu_moe_init_routing_v2(
            x, **routing_args
        )
        moe_args = {"group_list_type": 1}
        if "a8" in self.gmm_quant_mode:
            moe_args.update({"group_list_type": 2, "pertoken_scale": dynamic_scale})
        hidden_states_ordered_by_experts = self.experts(expanded_x, tokens_per_expert, **moe_args)
        hidden_states = torch_npu.npu_moe_finalize_routing(
            hidden_states_ordered_by_experts,
            skip1=hidden_states_share, skip2=None,
            bias=None,
            scales=topk_weight.to(hidden_states_ordered_by_experts.dtype),
            expanded_src_to_dst_row=expanded_row_idx,
            export_for_source_row=None, drop_pad_mode=2
        )
        return hidden_states

    def moe_infer_dispatch_combine(self, x, topk_ids, topk_weight, hidden_states_share):
        self.set_mc2_kwargs()
        output = torch_npu.npu_moe_distribute_dispatch_v2(x=x, expert_ids=topk_ids, **self.dispatch_kwargs)
        expand_x, dynamic_scale, expand_idx, expert_token_num, ep_recv_counts, tp_recv_counts = output[:6]
        gmm_args = {"x": expand_x, "expert_tokens": expert_token_num, "group_list_type": 1}
        if "a8" in self.gmm_quant_mode:
            gmm_args.update({"pertoken_scale": dynamic_scale})
        hidden_states_ordered_by_experts = self.experts(**gmm_args)
        combine_args = {
            "expand_x": hidden_states_ordered_by_experts,
            "expert_ids": topk_ids,
            "ori_x": x,
            "assist_info_for_combine": expand_idx,
            "expert_scales": topk_weight.to(torch.float32),
            "ep_send_counts": ep_recv_counts,
            "tp_send_counts": tp_recv_counts,
            **self.combine_kwargs
        }
        hidden_states = torch_npu.npu_moe_distribute_combine_v2(**combine_args)
        return hidden_states + hidden_states_share


class DeepseekV3ExpertRank(nn.Module):
    """The EP receiving rank (the recipe's ``forward_expert``): tokens gathered from ``moe_ep_size``
    ranks regrouped by local expert, the local experts, and the un-sort back to arrival order."""

    def __init__(self, config: DeepseekMoeConfig, moe_ep_size: int, dtype=torch.float32):
        super().__init__()
        self.moe_ep_size = moe_ep_size
        experts_per_rank = config.n_routed_experts // moe_ep_size
        self.experts = FusedMoEGMM(experts_per_rank, config.hidden_size, config.moe_intermediate_size, dtype)

    def forward(self, gathered_tokens, tokens_per_expert_group):
        hidden_states_ordered_by_experts, gathered_pertoken_scale, gathered_ids_unsort, tokens_per_local_expert = \
            torch_npu.npu_moe_re_routing(gathered_tokens, tokens_per_expert_group.view(self.moe_ep_size, -1),
                                         per_token_scales=None)
        hidden_states_ordered_by_experts = self.experts(
            x=hidden_states_ordered_by_experts, expert_tokens=tokens_per_local_expert, group_list_type=1)
        new_x = torch.index_select(hidden_states_ordered_by_experts, 0, gathered_ids_unsort.float().argsort().int())
        return new_x
