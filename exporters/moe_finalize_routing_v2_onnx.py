"""ONNX translations of torch.ops.ascend_moe.moe_finalize_routing_v2 and moe_token_unpermute:
dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from onnxscript import values

from ascend_moe_onnx.onnx_schemas import moe_finalize_routing_v2 as finalize_spec
from ascend_moe_onnx.onnx_schemas import moe_token_unpermute as unpermute_spec

from ._torch_lib import torchscript_symbolic
from .moe_finalize_routing_v2 import SCHEMA as FINALIZE_SCHEMA
from .moe_token_unpermute import SCHEMA as UNPERMUTE_SCHEMA

_OPSET = values.Opset(finalize_spec.DOMAIN, finalize_spec.OPSET_VERSION)
FINALIZE_OP = values.Op(_OPSET, finalize_spec.OP_TYPE, finalize_spec.SCHEMA)
UNPERMUTE_OP = values.Op(_OPSET, unpermute_spec.OP_TYPE, unpermute_spec.SCHEMA)


def finalize_translation(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
                         drop_pad_mode=finalize_spec.DEFAULTS["drop_pad_mode"]):
    """Dynamo translation: one MoeFinalizeRoutingV2 node."""
    return FINALIZE_OP(expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx,
                       drop_pad_mode=int(drop_pad_mode))


def unpermute_translation(permuted_tokens, sorted_indices, probs=None, padded_mode=False, restore_shape=None):
    """Dynamo translation: one MoeTokenUnpermute node (restore_shape is not part of the op)."""
    return UNPERMUTE_OP(permuted_tokens, sorted_indices, probs, padded_mode=int(padded_mode))


def _present(v) -> bool:
    return v is not None and not v.node().mustBeNone()


def _inputs(g, values_in_order):
    """The node's inputs: trailing absent ones dropped, a middle one as a None constant of
    optional type (an empty input name in ONNX)."""
    import torch

    out = [v if _present(v) else None for v in values_in_order]
    while out and out[-1] is None:
        out.pop()
    return [v if v is not None else g.op("prim::Constant").setType(torch.OptionalType.ofTensor()) for v in out]


def _set_rows_type(out, rows, n_source, h_source):
    """[N, H] of rows' type, when the shapes are known (TorchScript cannot infer custom ops)."""
    t = rows.type()
    if t.dim() is None or n_source.type().dim() is None:
        return out
    n = n_source.type().varyingSizes()[0]
    out.setType(t.with_sizes([n, h_source.type().varyingSizes()[-1]]))
    return out


def _finalize(g, expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx, drop_pad_mode):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_finalize_routing_v2."""
    ins = _inputs(g, [expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx])
    out = g.op(f"{finalize_spec.DOMAIN}::{finalize_spec.OP_TYPE}", *ins, drop_pad_mode_i=int(drop_pad_mode))
    return _set_rows_type(out, expanded_x, scales if _present(scales) else expanded_row_idx, expanded_x)


def _unpermute(g, permuted_tokens, sorted_indices, probs, padded_mode, restore_shape):
    """TorchScript symbolic of torch.ops.ascend_moe.moe_token_unpermute."""
    ins = _inputs(g, [permuted_tokens, sorted_indices, probs])
    out = g.op(f"{unpermute_spec.DOMAIN}::{unpermute_spec.OP_TYPE}", *ins, padded_mode_i=int(padded_mode))
    return _set_rows_type(out, permuted_tokens, probs if _present(probs) else sorted_indices, permuted_tokens)


finalize_symbolic = torchscript_symbolic(FINALIZE_SCHEMA, _finalize)
unpermute_symbolic = torchscript_symbolic(UNPERMUTE_SCHEMA, _unpermute)
