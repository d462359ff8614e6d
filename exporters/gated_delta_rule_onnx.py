"""ONNX translations of torch.ops.ascend_moe.gated_delta_rule: ONNX Runtime's com.microsoft
LinearAttention (update_rule ``gated_delta``), dynamo (onnxscript) and TorchScript."""

from __future__ import annotations

from . import registry
from .gated_delta_rule import OP, SCHEMA

DOMAIN, OP_TYPE = "com.microsoft", "LinearAttention"


def _schema():
    """The part of ONNX Runtime's LinearAttention schema this translation uses (onnxscript needs one)."""
    from onnx.defs import OpSchema

    attr = OpSchema.AttrType
    return OpSchema(
        OP_TYPE, DOMAIN, 1,
        inputs=[OpSchema.FormalParameter(n, "T") for n in ("query", "key", "value", "past_state", "decay", "beta")],
        outputs=[OpSchema.FormalParameter(n, "T") for n in ("output", "present_state")],
        type_constraints=[("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "")],
        attributes=[OpSchema.Attribute("q_num_heads", attr.INT, ""), OpSchema.Attribute("kv_num_heads", attr.INT, ""),
                    OpSchema.Attribute("update_rule", attr.STRING, ""), OpSchema.Attribute("scale", attr.FLOAT, "")])


def _linear_attention():
    from onnxscript import values

    return values.Op(values.Opset(DOMAIN, 1), OP_TYPE, _schema())


@registry.translation(OP)
def gated_delta_rule_translation(query, key, value, state, decay, beta, heads, scale):
    """Dynamo translation: one LinearAttention node (query heads = key/value heads)."""
    return _linear_attention()(query, key, value, state, decay, beta, q_num_heads=int(heads),
                               kv_num_heads=int(heads), update_rule="gated_delta", scale=float(scale))


@registry.symbolic(OP, SCHEMA)
def gated_delta_rule_symbolic(g, query, key, value, state, decay, beta, heads, scale):
    """TorchScript symbolic of torch.ops.ascend_moe.gated_delta_rule."""
    out, present = g.op(f"{DOMAIN}::{OP_TYPE}", query, key, value, state, decay, beta, q_num_heads_i=int(heads),
                        kv_num_heads_i=int(heads), update_rule_s="gated_delta", scale_f=float(scale), outputs=2)
    out.setType(value.type())
    present.setType(state.type())
    return out, present
