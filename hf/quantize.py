"""Quantized experts for Hugging Face models patched by hf.patch (docs/quantization.md): the same
schemes as models.quantize, applied to every patched MoE block."""
import torch

from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
from ascend_moe_onnx.models.quantize import quantize_experts


def quantize_hf_model(model: torch.nn.Module, wq: WeightsQuant) -> int:
    """Every patched MoE block of a Hugging Face model (hf.patch) with its experts quantized in
    place (and a plain shared expert MLP); the fused ``gate_up_proj`` is handed to the export as
    separate gate / up stacks. Returns the number of blocks."""
    from ascend_moe_onnx.hf import experts as hf_experts
    from ascend_moe_onnx.hf.export import moe_blocks

    blocks = moe_blocks(model)
    for block in blocks.values():
        ex = block.experts
        gate, up, down = (torch.nn.Parameter(w.detach().clone().contiguous(), requires_grad=False)
                          for w in hf_experts.expert_weights(ex))
        if not hasattr(ex, "gate_up_proj") and getattr(ex, "ascend_weights", None) is None:
            continue  # not a fused-experts block (routed-rows experts keep float weights)
        mlp = getattr(block, "shared_experts", None)
        routing = getattr(block, "_ascend_routing", None)
        kind = getattr(block, "_ascend_shared", None) or getattr(routing, "shared", None)
        # table blocks: the experts' formulation
        formulation = getattr(block, "experts_formulation", None) or ex.experts_formulation
        folded = mlp is not None and kind == "plain" and hf_experts.folds_shared(formulation, mlp)
        folded_mlp = mlp if folded else None
        shared = None if folded_mlp is None else (folded_mlp.gate_proj.weight, folded_mlp.up_proj.weight,
                                                  folded_mlp.down_proj.weight)
        quantize_experts(gate, up, down, wq, shared)
        ex.ascend_gate, ex.ascend_up, ex.ascend_down = gate, up, down
        ex.ascend_weights = lambda ex=ex: (ex.ascend_gate, ex.ascend_up, ex.ascend_down)
    return len(blocks)
