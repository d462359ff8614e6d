"""ONNX translations of torch.ops.ascend_moe.moe_token_unpermute: dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from ascend_moe_onnx.onnx_schemas import moe_token_unpermute as spec

from . import registry
from ._torch_lib import symbolic_inputs, symbolic_present, symbolic_rows_type
from .moe_token_unpermute import OP, SCHEMA

UNPERMUTE_OP = registry.onnxscript_op(spec)


@registry.translation(OP)
def unpermute_translation(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """Dynamo translation: one MoeTokenUnpermute node (restore_shape is not part of the op)."""
    return UNPERMUTE_OP(permuted_tokens, sorted_indices, probs, padded_mode=int(padded_mode))


@registry.symbolic(OP, SCHEMA)
def unpermute_symbolic(g, permuted_tokens, sorted_indices, probs, padded_mode, restore_shape):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_token_unpermute."""
    ins = symbolic_inputs(g, [permuted_tokens, sorted_indices, probs])
    out = g.op(registry.torchscript_name(spec), *ins, padded_mode_i=int(padded_mode))
    n_source = probs if symbolic_present(probs) else sorted_indices
    return symbolic_rows_type(out, permuted_tokens, n_source, permuted_tokens)
