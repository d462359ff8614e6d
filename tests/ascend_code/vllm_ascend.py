"""vllm-ascend's single-card fused MoE as ``vllm_ascend/ops/fused_moe/`` and
``vllm_ascend/device/device_op.py`` write it, unquantised.

Router (``router/fused_topk_router.py`` → ``DeviceOperator.moe_gating_top_k``): on A2/A3
``torch.ops._C_ascend.moe_gating_top_k``, on A5 ``torch_npu.npu_moe_gating_top_k`` (renorm applied
afterwards for softmax). Dispatcher (``TokenDispatcherWithAllGather``): ``num_tokens =
hidden_states.shape[:-1].numel()``, ``npu_moe_init_routing_v2`` (count mode). MLP
(``moe_mlp.unquant_apply_mlp``): grouped matmul on transposed ``w1``, npu_swiglu, grouped matmul on
``w2``. Combine: ``npu_moe_token_unpermute`` with the routing weights.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch_npu
from torch import nn

# vllm_ascend/quantization/utils.py reads torch_npu's own dtype names at import
QUANT_DTYPES = (torch_npu.float4_e2m1fn_x2, torch_npu.hifloat8)
SCALE_DTYPES = (torch_npu.float8_e8m0fnu,)


@dataclass
class VllmMoeConfig:
    """The fused-MoE parameters the single-card path reads."""

    hidden_size: int = 32
    intermediate_size: int = 16
    num_experts: int = 16
    top_k: int = 4
    num_expert_group: int = 4
    topk_group: int = 2
    scoring_func: str = "sigmoid"
    renormalize: bool = True
    routed_scaling_factor: float = 1.5
    use_bias: bool = True


class A2DeviceOperator:
    """device_op.BaseDeviceAdaptor's MoE calls (Atlas A2 / A3)."""

    @staticmethod
    def moe_gating_top_k(x, *, k, k_group, group_count, group_select_mode, renorm, norm_type, out_flag,
                         routed_scaling_factor=1.0, eps=1e-20, bias_opt=None):
        topk_weights, topk_ids, out = torch.ops._C_ascend.moe_gating_top_k(
            x, k=k, k_group=k_group, group_count=group_count, group_select_mode=group_select_mode,
            renorm=renorm, norm_type=norm_type, out_flag=out_flag, routed_scaling_factor=routed_scaling_factor,
            eps=eps, bias_opt=bias_opt,
        )
        return topk_weights, topk_ids.to(torch.int32), out

    @staticmethod
    def npu_moe_init_routing(hidden_states, topk_ids, *, scale=None, active_num, expert_num,
                             expert_tokens_num_type=1, expert_tokens_num_flag=True, active_expert_range=None,
                             quant_mode=-1, act_quant_type=None):
        return torch_npu.npu_moe_init_routing_v2(
            hidden_states, topk_ids, scale=scale, active_num=active_num, expert_num=expert_num,
            expert_tokens_num_type=expert_tokens_num_type, expert_tokens_num_flag=expert_tokens_num_flag,
            active_expert_range=active_expert_range, quant_mode=quant_mode,
        )

    @staticmethod
    def npu_moe_token_unpermute(permuted_tokens, sorted_indices, probs):
        return torch_npu.npu_moe_token_unpermute(
            permuted_tokens=permuted_tokens, sorted_indices=sorted_indices, probs=probs
        )


class A5DeviceOperator(A2DeviceOperator):
    """device_op.A5DeviceAdaptor: the router through torch_npu's built-in gating."""

    @staticmethod
    def moe_gating_top_k(x, *, k, k_group, group_count, group_select_mode, renorm, norm_type, out_flag,
                         routed_scaling_factor=1.0, eps=1e-20, bias_opt=None):
        topk_weights, topk_ids, out = torch_npu.npu_moe_gating_top_k(
            x, k=k, bias=bias_opt, k_group=k_group, group_count=group_count,
            group_select_mode=group_select_mode, renorm=0, norm_type=norm_type,
            routed_scaling_factor=routed_scaling_factor, eps=eps,
        )
        if norm_type == 0 and renorm == 1:
            topk_weights = topk_weights / topk_weights.sum(dim=-1, keepdim=True)
        return topk_weights, topk_ids.to(torch.int32), out


class AscendFusedMoE(nn.Module):
    """Router, all-gather dispatcher, unquantised MLP and combine on one card (no expert map).

    ``device`` is ``"A2"`` (A2/A3: ``_C_ascend`` router) or ``"A5"`` (torch_npu router).
    """

    def __init__(self, config: VllmMoeConfig, dtype=torch.float32, device: str = "A2"):
        super().__init__()
        if device not in ("A2", "A5"):
            raise ValueError(f"AscendFusedMoE: device must be 'A2' or 'A5', got {device!r}")
        self.ops = A2DeviceOperator if device == "A2" else A5DeviceOperator
        self.config = config
        self.top_k = config.top_k
        self.num_experts_local = config.num_experts
        self.gate = nn.Linear(config.hidden_size, config.num_experts, bias=False, dtype=torch.float32)
        self.e_score_correction_bias = (nn.Parameter(torch.empty(config.num_experts), requires_grad=False)
                                        if config.use_bias else None)
        # FusedMoE stores w13 [E, 2I, H] and w2 [E, H, I]; unquant_apply_mlp transposes them.
        self.w13_weight = nn.Parameter(torch.empty(config.num_experts, 2 * config.intermediate_size,
                                                   config.hidden_size, dtype=dtype), requires_grad=False)
        self.w2_weight = nn.Parameter(torch.empty(config.num_experts, config.hidden_size, config.intermediate_size,
                                                  dtype=dtype), requires_grad=False)

    def _compute_routing(self, router_logits):
        c = self.config
        norm_type = 0 if c.scoring_func == "softmax" else 1
        topk_weights, topk_ids, _ = self.ops.moe_gating_top_k(
            router_logits, k=self.top_k, k_group=c.topk_group, group_count=c.num_expert_group,
            group_select_mode=1, renorm=int(c.renormalize), norm_type=norm_type, out_flag=False,
            routed_scaling_factor=c.routed_scaling_factor, eps=1e-20, bias_opt=self.e_score_correction_bias,
        )
        return topk_weights, topk_ids

    def token_dispatch(self, hidden_states, topk_ids):
        restore_shape = hidden_states.shape
        num_tokens = hidden_states.shape[:-1].numel()
        sorted_hidden_states, expanded_row_idx, expert_tokens, dynamic_scale = self.ops.npu_moe_init_routing(
            hidden_states,
            topk_ids,
            scale=None,
            active_num=num_tokens * self.top_k,
            expert_num=self.num_experts_local,
            expert_tokens_num_type=1,
            expert_tokens_num_flag=True,
            active_expert_range=[0, self.num_experts_local],
            quant_mode=-1,
        )
        expert_tokens = expert_tokens.to(torch.int64)
        return sorted_hidden_states, expert_tokens, 1, expanded_row_idx, restore_shape

    def unquant_apply_mlp(self, hidden_states, group_list, group_list_type):
        w1 = self.w13_weight.transpose(1, 2)
        w2 = self.w2_weight.transpose(1, 2)
        gate_up_out = torch_npu.npu_grouped_matmul(
            x=[hidden_states], weight=[w1], bias=None, split_item=2, group_list_type=group_list_type,
            group_type=0, group_list=group_list,
        )[0]
        gate_up_out = torch_npu.npu_swiglu(gate_up_out)
        return torch_npu.npu_grouped_matmul(
            x=[gate_up_out], weight=[w2], bias=None, split_item=2, group_list_type=group_list_type,
            group_type=0, group_list=group_list,
        )[0]

    def token_combine(self, hidden_states, expanded_row_idx, topk_weights, restore_shape):
        final_hidden_states = self.ops.npu_moe_token_unpermute(
            permuted_tokens=hidden_states, sorted_indices=expanded_row_idx, probs=topk_weights,
        )
        if len(restore_shape) == 3:
            final_hidden_states = final_hidden_states.view(restore_shape)
        return final_hidden_states

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states.to(torch.float32))
        topk_weights, topk_ids = self._compute_routing(router_logits)
        sorted_states, group_list, group_list_type, expanded_row_idx, restore_shape = self.token_dispatch(
            hidden_states, topk_ids)
        expert_out = self.unquant_apply_mlp(sorted_states, group_list, group_list_type)
        return self.token_combine(expert_out, expanded_row_idx, topk_weights, restore_shape)


class AscendW8A8FusedMoE(AscendFusedMoE):
    """The same layer with vllm-ascend's w8a8 dynamic method (``quantization/methods/w8a8_dynamic.py``,
    MLP ``moe_mlp.quant_apply_mlp`` on the all-gather path: no MC2, no fused gmm-swiglu).

    Parameters as after ``process_weights_after_loading``: ``w13_weight`` int8 [E, H, 2I] and
    ``w2_weight`` int8 [E, I, H] (transposed, contiguous), ``w13_weight_scale_fp32`` float32 [E, 2I],
    ``w2_weight_scale`` [E, H] in the model's dtype. ``dispatch_with_quant``: init routing quantises
    the rows (``quant_mode=1``); otherwise the MLP calls ``npu_dynamic_quant`` first.
    """

    def __init__(self, config: VllmMoeConfig, dtype=torch.float32, device: str = "A2",
                 dispatch_with_quant: bool = True, fused_gmm_swiglu: bool = False):
        super().__init__(config, dtype, device)
        e, h, i = config.num_experts, config.hidden_size, config.intermediate_size
        self.dispatch_with_quant = dispatch_with_quant
        # vllm-ascend's custom fused kernel for gmm1 + swiglu + quant (its MC2 / fusion branch)
        self.fused_gmm_swiglu = fused_gmm_swiglu
        frozen = lambda t: nn.Parameter(t, requires_grad=False)  # noqa: E731
        self.w13_weight = frozen(torch.zeros(e, h, 2 * i, dtype=torch.int8))
        self.w2_weight = frozen(torch.zeros(e, i, h, dtype=torch.int8))
        self.w13_weight_scale_fp32 = frozen(torch.ones(e, 2 * i, dtype=torch.float32))
        self.w2_weight_scale = frozen(torch.ones(e, h, dtype=dtype))

    def load_float_experts(self, w13: torch.Tensor, w2: torch.Tensor) -> AscendW8A8FusedMoE:
        """Quantise float experts in the checkpoint's layout (``w13`` [E, 2I, H], ``w2`` [E, H, I]) per
        output channel, symmetric (``recipes_w8a8.quantize_per_channel``), and load them as vllm-ascend does."""
        from .recipes_w8a8 import quantize_per_channel

        with torch.no_grad():
            q13, s13 = quantize_per_channel(w13.float())
            q2, s2 = quantize_per_channel(w2.float())
            self.w13_weight.copy_(q13.transpose(1, 2).contiguous())
            self.w2_weight.copy_(q2.transpose(1, 2).contiguous())
            self.w13_weight_scale_fp32.copy_(s13)
            self.w2_weight_scale.copy_(s2.to(self.w2_weight_scale.dtype))
        return self

    def token_dispatch(self, hidden_states, topk_ids):
        restore_shape = hidden_states.shape
        num_tokens = hidden_states.shape[:-1].numel()
        sorted_hidden_states, expanded_row_idx, expert_tokens, dynamic_scale = self.ops.npu_moe_init_routing(
            hidden_states, topk_ids, scale=None, active_num=num_tokens * self.top_k,
            expert_num=self.num_experts_local, expert_tokens_num_type=1, expert_tokens_num_flag=True,
            active_expert_range=[0, self.num_experts_local], quant_mode=1 if self.dispatch_with_quant else -1,
        )
        expert_tokens = expert_tokens.to(torch.int64)
        dynamic_scale = dynamic_scale if self.dispatch_with_quant else None
        return sorted_hidden_states, expert_tokens, 1, expanded_row_idx, restore_shape, dynamic_scale

    def quant_apply_mlp(self, hidden_states, w1, w1_scale, w2, w2_scale, group_list, group_list_type=1,
                        dynamic_scale=None):
        if dynamic_scale is None:
            hidden_states, pertoken_scale = torch_npu.npu_dynamic_quant(hidden_states)
        else:
            pertoken_scale = dynamic_scale
        if self.fused_gmm_swiglu:
            cumsum = group_list.cumsum(0) if group_list_type == 1 else group_list
            fused = torch.ops._C_ascend.grouped_matmul_swiglu_quant_weight_nz_tensor_list
            hidden_states, swiglu_out_scale, _ = fused(
                x=hidden_states, weight=w1, weight_scale=w1_scale, x_scale=pertoken_scale, group_list=cumsum,
                swiglu_limit=0.0)
        else:
            _output_dtype = w2_scale[0].dtype if isinstance(w2_scale, list) else w2_scale.dtype
            scale = [w1_scale[0].to(w2_scale[0].dtype)] if isinstance(w1_scale, list) else [w1_scale]
            hidden_states = torch_npu.npu_grouped_matmul(
                x=[hidden_states], weight=w1 if isinstance(w1, list) else [w1], scale=scale, bias=None,
                per_token_scale=[pertoken_scale], split_item=2, group_type=0, group_list=group_list,
                group_list_type=group_list_type, output_dtype=_output_dtype)[0]
            hidden_states = torch_npu.npu_swiglu(hidden_states)
            hidden_states, swiglu_out_scale = torch_npu.npu_dynamic_quant(hidden_states)
        return torch_npu.npu_grouped_matmul(
            x=[hidden_states], weight=w2, scale=w2_scale, bias=None, per_token_scale=[swiglu_out_scale],
            split_item=2, group_list_type=group_list_type, group_type=0, group_list=group_list,
            output_dtype=w2_scale[0].dtype if isinstance(w2_scale, list) else w2_scale.dtype)[0]

    def forward(self, hidden_states):
        router_logits = self.gate(hidden_states.to(torch.float32))
        topk_weights, topk_ids = self._compute_routing(router_logits)
        sorted_states, group_list, group_list_type, expanded_row_idx, restore_shape, dynamic_scale = \
            self.token_dispatch(hidden_states, topk_ids)
        expert_out = self.quant_apply_mlp(sorted_states, [self.w13_weight], [self.w13_weight_scale_fp32],
                                          [self.w2_weight], [self.w2_weight_scale], group_list, group_list_type,
                                          dynamic_scale=dynamic_scale)
        return self.token_combine(expert_out, expanded_row_idx, topk_weights, restore_shape)
