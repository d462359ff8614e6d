"""Pure-ONNX function body of MoeRoutedExperts (docs/operators.md §3.2), specialised for one node.

What runs where the custom-op library is not loaded: the selected experts' weights are gathered
per (token, slot) pair ([T, k, 2I, H] and [T, k, H, I]) and applied with batched MatMuls. Correct
for any input, but its memory grows with T·k times one expert's weights: the exporter uses the op
only for small routed-row counts. Out-of-range indices make the Gather fail (the runtime's
message, not the validation's; a negative id is reported as E, the index it is mapped to). With
H = 0 the body still allocates the [T, k, 2I] gate/up products. Quantized weights are gathered
as stored (int8) and dequantized after the Gather, in standard ops (``_dequantized``). With
``act_quant`` 1 the x rows and each pair's SwiGLU row are quantized to int8 values (held in
float) by the kernels' rule (``_quantized_rows``); the products then run in float32 MatMuls, so
the body agrees with the kernels to float32 summation order, not bit for bit. bfloat16 weights
are cast to float after the Gather, and the x rows and SwiGLU rows are rounded to the weights' type
(``CastLike``: bfloat16, round to nearest even; float: unchanged) before the products. The biases
are gathered per pair like the weights and added to the gate/up products and the down products.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx

from ._function_body import BodyBuilder, make_function, start_body
from .moe_routed_experts import INPUT_NAMES, OUTPUT_NAMES, SCHEMA, a8_bias_error, validate_attributes


def build_function(attributes: dict, present_inputs: Sequence[bool], opset: int = 18) -> onnx.FunctionProto:
    """Build the ``ascend.moe::MoeRoutedExperts`` body for one node's attributes."""
    attrs, has = start_body(SCHEMA, attributes, present_inputs, opset, validate_attributes)
    x, idx, w, gate_up, down, gate_up_scales, down_scales, gate_up_bias, down_bias = INPUT_NAMES
    (y,) = OUTPUT_NAMES
    for bias in (gate_up_bias, down_bias):
        if attrs["act_quant"] == 1 and has[bias]:
            raise a8_bias_error(bias)
    g = BodyBuilder()
    op, const = g.op, g.const

    # The dims a Gather or a broadcast would not refuse (docs/operators.md §3.3): routing_weights of
    # expert_idx's shape, down_weights of gate_up_weights' E
    # and the biases [E, 2I] / [E, H] (a Gather of them would not refuse another shape)
    conditions = [g.all_equal(g.dims(w, 3), g.dims(idx, 3)), g.check("Equal", g.dim(down, 0), g.dim(gate_up, 0))]
    for bias, weights in ((gate_up_bias, gate_up), (down_bias, down)):
        if has[bias]:
            want = op("Concat", op("Shape", weights, start=0, end=2), const([-1], np.int64), axis=0)
            conditions.append(g.all_equal(g.dims(bias, 3), want))
    idx = g.require(idx, g.all_of(*conditions))
    idx64 = op("Cast", idx, to=onnx.TensorProto.INT64)
    # Gather takes ids in [-E, 0) as counting from the end: map them to E so that it fails instead.
    idx64 = op("Where", op("Less", idx64, const(0, np.int64)), op("Shape", gate_up, start=0, end=1), idx64)
    fc1 = op("Gather", gate_up, idx64, axis=0)  # [T, k, 2I, H]
    fc2 = op("Gather", down, idx64, axis=0)  # [T, k, H, I]
    if has[gate_up_scales]:
        bits, block = attrs["weight_bits"], attrs["block_size"]
        fc1 = _dequantized(g, fc1, op("Gather", gate_up_scales, idx64, axis=0), bits, block)
        fc2 = _dequantized(g, fc2, op("Gather", down_scales, idx64, axis=0), bits, block)
    else:  # float or bfloat16 weights: rows in the weights' type (bfloat16: rounded), computed in float
        fc1 = op("Cast", fc1, to=onnx.TensorProto.FLOAT)
        fc2 = op("Cast", fc2, to=onnx.TensorProto.FLOAT)
    a8 = attrs["act_quant"] == 1
    x_in, x_scale = _quantized_rows(g, x) if a8 else (x, "")  # x_scale read only when a8
    if not has[gate_up_scales]:
        x_in = _like_weights(g, x_in, gate_up)
    xk = op("Unsqueeze", x_in, const([1, 3], np.int64))  # [T, 1, H, 1]
    gu = op("Squeeze", op("MatMul", fc1, xk), const([3], np.int64))  # [T, k, 2I]
    if a8:
        gu = op("Mul", gu, op("Unsqueeze", x_scale, const([1], np.int64)))  # x_scale [T, 1] -> [T, 1, 1]
    if has[gate_up_bias]:
        gu = op("Add", gu, op("Gather", gate_up_bias, idx64, axis=0))  # [T, k, 2I]
    half = op("Div", op("Shape", gu, start=2, end=3), const([2], np.int64))
    pairs = op("Reshape", gu, op("Concat", op("Shape", gu, start=0, end=2), half, const([2], np.int64), axis=0))
    gate = op("Squeeze", op("Slice", pairs, const([0], np.int64), const([1], np.int64), const([3], np.int64)),
              const([3], np.int64))
    up = op("Squeeze", op("Slice", pairs, const([1], np.int64), const([2], np.int64), const([3], np.int64)),
            const([3], np.int64))
    limit = attrs["swiglu_limit"]
    if limit > 0:
        gate = op("Min", gate, const(limit, np.float32))
        up = op("Clip", up, const(-limit, np.float32), const(limit, np.float32))
    alpha, beta = attrs["activation_alpha"], attrs["activation_beta"]
    sig = op("Sigmoid", gate if alpha == 1.0 else op("Mul", gate, const(alpha, np.float32)))
    if beta != 0.0:
        up = op("Add", up, const(beta, np.float32))
    act = op("Mul", op("Mul", gate, sig), up)  # [T, k, I]
    act_scale = ""  # read only when a8
    if a8:
        act, act_scale = _quantized_rows(g, act)  # act_scale [T, k, 1]
    elif not has[gate_up_scales]:
        act = _like_weights(g, act, down)
    out = op("MatMul", fc2, op("Unsqueeze", act, const([3], np.int64)))  # [T, k, H, 1]
    if a8:
        out = op("Mul", out, op("Unsqueeze", act_scale, const([3], np.int64)))
    if has[down_bias]:
        out = op("Add", out, op("Unsqueeze", op("Gather", down_bias, idx64, axis=0), const([3], np.int64)))
    weighted = op("Mul", out, op("Unsqueeze", w, const([2, 3], np.int64)))
    op("Squeeze", op("ReduceSum", weighted, const([1], np.int64), keepdims=0), const([2], np.int64), outputs=[y])
    return make_function(SCHEMA, attrs, has, g, opset)


def _like_weights(g: BodyBuilder, v: str, weights: str) -> str:
    """Float rows ``v`` rounded to the float weights' type and back (bfloat16: round to nearest
    even; float: unchanged): the products of bfloat16 weights take bfloat16 rows, exact in float32."""
    return g.op("Cast", g.op("CastLike", v, weights), to=onnx.TensorProto.FLOAT)


def _quantized_rows(g: BodyBuilder, v: str) -> tuple[str, str]:
    """Rows of ``v`` (last axis) as the kernels quantize them: (q held in float, scale [..., 1]),
    scale = max |v| / 127, q = round half to even of v / scale clamped to [-127, 127], q = 0 where
    the scale is 0 (or NaN: the scale's NaN then reaches the result)."""
    op, const = g.op, g.const
    scale = op("Div", op("ReduceMax", op("Abs", v), const([-1], np.int64), keepdims=1), const(127.0, np.float32))
    positive = op("Greater", scale, const(0.0, np.float32))
    safe = op("Where", positive, scale, const(1.0, np.float32))
    q = op("Clip", op("Round", op("Div", v, safe)), const(-127.0, np.float32), const(127.0, np.float32))
    return op("Where", positive, q, const(0.0, np.float32)), scale


def _signed_nibble(g: BodyBuilder, v: str) -> str:
    """An unsigned 4-bit value held in float [0, 16) as two's complement [-8, 8)."""
    return g.op("Sub", v, g.op("Mul", g.op("Cast", g.op("GreaterOrEqual", v, g.const(8.0, np.float32)),
                                           to=onnx.TensorProto.FLOAT), g.const(16.0, np.float32)))


def _dequantized(g: BodyBuilder, q: str, scales: str, bits: int, block: int) -> str:
    """int8 weights [..., N, K / (8 / bits)] and their scales [..., N] (block 0) or [..., N, K / block]
    -> float [..., N, K] (onnx_schemas/weight_quant.py); exact in float32. Every Reshape names
    each dim: a -1 cannot be inferred where the gathered weights are empty (no tokens)."""
    op, const = g.op, g.const
    v = op("Cast", q, to=onnx.TensorProto.FLOAT)
    if bits == 4:  # byte b (as unsigned) = 16 hi + lo
        f = op("Add", v, op("Mul", op("Cast", op("Less", v, const(0.0, np.float32)), to=onnx.TensorProto.FLOAT),
                            const(256.0, np.float32)))
        hi = op("Floor", op("Div", f, const(16.0, np.float32)))
        lo = op("Sub", f, op("Mul", hi, const(16.0, np.float32)))
        pairs = op("Concat", op("Unsqueeze", _signed_nibble(g, lo), const([-1], np.int64)),
                   op("Unsqueeze", _signed_nibble(g, hi), const([-1], np.int64)), axis=-1)
        v = op("Reshape", pairs, op("Concat", op("Shape", q, start=0, end=-1),
                                    op("Mul", op("Shape", q, start=-1), const([2], np.int64)), axis=0))
    if block == 0:
        return op("Mul", v, op("Unsqueeze", scales, const([-1], np.int64)))
    blocks = op("Reshape", v, op("Concat", op("Shape", scales), const([block], np.int64), axis=0))
    scaled = op("Mul", blocks, op("Unsqueeze", scales, const([-1], np.int64)))
    return op("Reshape", scaled, op("Concat", op("Shape", scales, start=0, end=-1),
                                    op("Mul", op("Shape", scales, start=-1), const([block], np.int64)), axis=0))
