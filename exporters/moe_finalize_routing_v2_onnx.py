"""ONNX translations of torch.ops.ascend_moe.moe_finalize_routing_v2: dynamo (onnxscript) and
TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import moe_finalize_routing_v2 as finalize_spec

from . import registry
from ._torch_lib import symbolic_inputs, symbolic_present, symbolic_rows_type
from .moe_finalize_routing_v2 import OP, SCHEMA

FINALIZE_OP = registry.onnxscript_op(finalize_spec)


@registry.translation(OP)
def finalize_translation(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
                         drop_pad_mode=finalize_spec.DEFAULTS["drop_pad_mode"]):
    """Dynamo translation: one MoeFinalizeRoutingV2 node."""
    return FINALIZE_OP(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx,
                       drop_pad_mode=int(drop_pad_mode))


@registry.symbolic(OP, SCHEMA)
def finalize_symbolic(g, expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_finalize_routing_v2."""
    ins = symbolic_inputs(g, [expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx])
    out = g.op(registry.torchscript_name(finalize_spec), *ins, drop_pad_mode_i=int(drop_pad_mode))
    n_source = scales if symbolic_present(scales) else expanded_row_idx
    return symbolic_rows_type(out, expanded_x, n_source, expanded_x)
