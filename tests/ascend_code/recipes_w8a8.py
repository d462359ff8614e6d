"""cann-recipes-infer's w8a8 expert computation (``gmm_quant_mode`` ``"w8a8int8"``, the recipe's name
for int8 weights and int8 per-token dynamic activations) as
``module/quantization/compressed_tensors/compressed_tensors_moe_gmm.py``'s
``CompressedTensorW8A8Int8MoEGMMMethod`` writes it, and its weights as the recipe's loader holds them.

``apply``: grouped matmul of the int8 rows (from init routing's ``quant_mode=1``) with int8 w13 to
int32, ``npu_dequant_swiglu_quant`` (w13 scale × per-token scale, swiglu with the left half
activated, smoothing by ``smooth_scale_2``, dynamic quantisation), grouped matmul with int8 w2
dequantised by the w2 scale and the new per-token scale.
"""

from __future__ import annotations

import torch
import torch_npu
from torch import nn

from ascend_moe_onnx.onnx_schemas import weight_quant


def quantize_per_channel(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """A checkpoint's int8 weight and float32 scale from float ``w`` [E, out, in]: per output channel,
    symmetric, by ``onnx_schemas.weight_quant.quantize`` (docs/quantization.md's rounding)."""
    q, scale = weight_quant.quantize(w.detach().float().cpu().numpy(), bits=8)
    return torch.from_numpy(q), torch.from_numpy(scale)


class W8A8Int8MoEGMM(nn.Module):
    """FusedMoEGMM with the w8a8 int8 method, parameters as after ``process_weights_after_loading``:
    ``w13_weight`` int8 [E, H, 2I], ``w2_weight`` int8 [E, I, H] (transposed from the checkpoint's
    [out, in]), ``w13_weight_scale`` float32 [E, 2I], ``w2_weight_scale`` [E, H] (bfloat16 unless
    the model is float16, as the recipe creates it), ``smooth_scale_1`` [E, H] and
    ``smooth_scale_2`` [E, I] float32.

    ``final_output_dtype`` defaults to the model's dtype (the recipe's default is bfloat16, the dtype
    of its models).
    """

    def __init__(self, num_experts: int, hidden_size: int, intermediate_size: int, dtype):
        super().__init__()
        e, h, i = num_experts, hidden_size, intermediate_size
        self.dtype = dtype
        scale_dtype = torch.float32 if dtype == torch.float16 else torch.bfloat16
        frozen = lambda t: nn.Parameter(t, requires_grad=False)  # noqa: E731
        self.w13_weight = frozen(torch.zeros(e, h, 2 * i, dtype=torch.int8))
        self.w2_weight = frozen(torch.zeros(e, i, h, dtype=torch.int8))
        self.w13_weight_scale = frozen(torch.ones(e, 2 * i, dtype=torch.float32))
        self.w2_weight_scale = frozen(torch.ones(e, h, dtype=scale_dtype))
        self.smooth_scale_1 = frozen(torch.ones(e, h, dtype=torch.float32))
        self.smooth_scale_2 = frozen(torch.ones(e, i, dtype=torch.float32))

    def load_float_experts(self, w13: torch.Tensor, w2: torch.Tensor, smooth_1: torch.Tensor | None = None,
                           smooth_2: torch.Tensor | None = None) -> W8A8Int8MoEGMM:
        """Quantise float experts ``w13`` [E, H, 2I] and ``w2`` [E, I, H] (the float layer's
        ``[in, out]`` layout) as a w8a8 checkpoint holds them and load them as the recipe does.

        Smoothing scales (SmoothQuant: activations times s, weight rows divided by s) default to 1;
        the quantised layer then approximates ``x @ w13`` / ``h @ w2``.
        """
        e, h, i2 = w13.shape
        s1 = torch.ones(e, h) if smooth_1 is None else smooth_1.float()
        s2 = torch.ones(e, i2 // 2) if smooth_2 is None else smooth_2.float()
        with torch.no_grad():
            # checkpoint layout [E, out, in]; the loader transposes to [E, in, out]
            q13, sc13 = quantize_per_channel((w13.float() / s1[..., None]).transpose(1, 2))
            q2, sc2 = quantize_per_channel((w2.float() / s2[..., None]).transpose(1, 2))
            self.w13_weight.copy_(q13.transpose(1, 2).contiguous())
            self.w2_weight.copy_(q2.transpose(1, 2).contiguous())
            self.w13_weight_scale.copy_(sc13)
            self.w2_weight_scale.copy_(sc2.to(self.w2_weight_scale.dtype))
            self.smooth_scale_1.copy_(s1)
            self.smooth_scale_2.copy_(s2)
        return self

    def forward(self, x, expert_tokens, group_list_type: int = 0, pertoken_scale=None, final_output_dtype=None,
                **kwargs):
        final_output_dtype = final_output_dtype or self.dtype
        hidden_size = x.size(-1)
        if pertoken_scale is None:
            x, pertoken_scale = torch_npu.npu_dynamic_quant(x)
        if pertoken_scale.dim() > 1:
            pertoken_scale = pertoken_scale.reshape(-1)
            x = x.view(-1, hidden_size)
        mm1_mm3 = torch_npu.npu_grouped_matmul(
            [x], [self.w13_weight], group_list=expert_tokens, split_item=3, output_dtype=torch.int32,
            group_type=0, group_list_type=group_list_type, tuning_config=[0])[0]
        # the recipe's clamped SwiGLU (GPT-OSS-like models): gate / up interleaved in w13's columns
        swiglu_limit = kwargs.get("swiglu_limit")
        swiglu_limit_args = {}
        if swiglu_limit:
            swiglu_limit_args.update({"swiglu_mode": 1, "clamp_limit": swiglu_limit, "glu_alpha": 1, "glu_bias": 0})
        intermediate_h, pertoken_scale = torch_npu.npu_dequant_swiglu_quant(
            mm1_mm3, weight_scale=self.w13_weight_scale, quant_scale=self.smooth_scale_2, group_index=expert_tokens,
            activate_left=True, quant_mode=1, activation_scale=pertoken_scale, **swiglu_limit_args)
        return torch_npu.npu_grouped_matmul(
            [intermediate_h], [self.w2_weight], bias=None, scale=[self.w2_weight_scale],
            per_token_scale=[pertoken_scale], group_list=expert_tokens, split_item=3,
            output_dtype=final_output_dtype, group_type=0, group_list_type=group_list_type, tuning_config=[0])[0]
