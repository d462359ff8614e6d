"""MoeRoutedExperts (docs/operators.md §3): ONNX schema, shape inference, validation and NumPy reference.

The routed experts of a MoE block on the rows routed to them and nothing else: each (token, slot)
pair of the router's ``expert_idx`` runs the token row through that expert's SwiGLU MLP, and the
results are summed with the ``routing_weights``. The weights are the stacked experts in ONNX
Runtime's ``com.microsoft.MoE`` layout (gate/up rows interleaved ``[E, 2I, H]``, down ``[E, H, I]``),
so a graph may feed both ops from the same initializers.

Quantized experts (W8A16 / W4A16, docs/quantization.md): int8 weights (``weight_bits`` 8, or 4 for
two values per byte) with float scales per row or per ``block_size`` inputs
(``gate_up_scales`` / ``down_scales``); the activations stay float. Layout and rounding:
:mod:`onnx_schemas.weight_quant`.

bfloat16 experts: bfloat16 weights without scales; the products are those of the weights with the
x rows and the SwiGLU rows rounded to bfloat16 (round to nearest even), summed in float32 (the
arithmetic of AVX-512 BF16's ``vdpbf16ps`` and of oneDNN's bfloat16 matmuls; docs/quantization.md).
"""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common
from .weight_quant import BITS, dequantize

OP_TYPE = "MoeRoutedExperts"
SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Routed SwiGLU experts on the routed rows only: y[t] = sum_j routing_weights[t, j] * "
        "expert_{expert_idx[t, j]}(x[t]), expert_e(v) = down_e a + down_bias_e, a = g sigmoid(alpha g) "
        "(u + beta), (g, u) = gate/up rows of e applied to v plus gate_up_bias_e, optionally clamped "
        "(swiglu_limit)."
    ),
    inputs=[
        common.tensor_input("x", "tensor(float)", "Token rows [T, H]."),
        common.tensor_input("expert_idx", "TI", "Experts of each token [T, k], in [0, E)."),
        common.tensor_input("routing_weights", "tensor(float)", "Weight of each (token, slot) [T, k]."),
        common.tensor_input("gate_up_weights", "TW",
                            "Stacked gate/up projections [E, 2I, H]: row 2i is gate row i, row 2i+1 up row i "
                            "(int8 with weight_bits 4: [E, 2I, H/2], two values per byte)."),
        common.tensor_input("down_weights", "TW", "Stacked down projections [E, H, I] (int8, 4 bits: [E, H, I/2])."),
        common.tensor_input("gate_up_scales", "tensor(float)",
                            "int8 weights: scale of each gate/up row [E, 2I] (block_size 0) or of each block of "
                            "block_size inputs [E, 2I, H/block_size]; absent for float weights.", optional=True),
        common.tensor_input("down_scales", "tensor(float)",
                            "int8 weights: [E, H] (block_size 0) or [E, H, I/block_size]; absent for float weights.",
                            optional=True),
        common.tensor_input("gate_up_bias", "tensor(float)",
                            "Bias of each expert's gate/up rows [E, 2I] (interleaved like the rows), added before "
                            "the clamp; absent: none.", optional=True),
        common.tensor_input("down_bias", "tensor(float)",
                            "Bias of each expert's down projection [E, H], weighted like the expert's output; "
                            "absent: none.", optional=True),
    ],
    outputs=[common.tensor_input("y", "tensor(float)", "Weighted sum of the routed experts' outputs [T, H].")],
    type_constraints=[("TI", ["tensor(int32)", "tensor(int64)"], "Expert index type."),
                      ("TW", ["tensor(float)", "tensor(int8)", "tensor(bfloat16)"],
                       "Expert weight type: float; int8 quantized with scales; or bfloat16, whose products "
                       "take the x and SwiGLU rows rounded to bfloat16 (both weights alike).")],
    attributes=[
        common.attribute("activation_alpha", 1.0,
                         "The gate's sigmoid takes alpha * g: a = g sigmoid(alpha g) (u + beta); 1 is SiLU "
                         "(gpt-oss: 1.702). As ONNX Runtime's com.microsoft.MoE names it."),
        common.attribute("activation_beta", 0.0,
                         "Added to the (clamped) up value: a = g sigmoid(alpha g) (u + beta) (gpt-oss: 1). "
                         "As ONNX Runtime's com.microsoft.MoE names it."),
        common.attribute("swiglu_limit", 0.0,
                         "> 0: clamp before the activation, gate to at most the limit and up to [-limit, "
                         "limit] (DeepSeek-V4); 0: no clamp."),
        common.attribute("weight_bits", 8,
                         "int8 weights: 8 (one value per byte) or 4 (two per byte, element 2j in the low nibble, "
                         "two's complement); w = q * scale. Unused for float weights; the default with bfloat16 ones."),
        common.attribute("block_size", 0,
                         "int8 weights: 0 = one scale per output row; G > 0 = one scale per G consecutive inputs "
                         "of a row (G divides H and I; even for 4 bits; a multiple of 8 with act_quant 1). Unused "
                         "for float weights; 0 with bfloat16 ones."),
        common.attribute("act_quant", 0,
                         "int8 weights: 0 = float activations (W8A16 / W4A16); 1 = per-token dynamic int8 "
                         "activations (W8A8 / W4A8, Ascend's npu_dynamic_quant): each x row and each pair's "
                         "SwiGLU row is quantized symmetrically (scale = max |v| / 127, q = round half to even "
                         "of v / scale, clamped to [-127, 127]), the products are summed in int32 and dequantized "
                         "per block (docs/quantization.md, W8A8 and W4A8). Must be 0 for float and bfloat16 weights, "
                         "and without biases and with the default activation_alpha / activation_beta."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES: list[tuple] = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.FLOAT, ["T", "H"]), "expert_idx": (TensorProto.INT32, ["T", "k"]),
      "routing_weights": (TensorProto.FLOAT, ["T", "k"]), "gate_up_weights": (TensorProto.FLOAT, ["E", "2I", "H"]),
      "down_weights": (TensorProto.FLOAT, ["E", "H", "I"])}, {}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
# act_quant 1: inputs per step of the integer dot products (a per-group block is whole steps), and
# the longest row whose int32 sums cannot overflow (|q_x| <= 127, |q_w| <= 128: 127 * 128 * 2^17 < 2^31).
LIMITS = {"A8_STEP": 8, "A8_MAX_INPUTS": 1 << 17}
A8_STEP, A8_MAX_INPUTS = LIMITS["A8_STEP"], LIMITS["A8_MAX_INPUTS"]
FLOAT_ATTRIBUTES = ("activation_alpha", "activation_beta", "swiglu_limit")
INDEX_TYPES = common.allowed_types(SCHEMA, "TI")
WEIGHT_TYPES = common.allowed_types(SCHEMA, "TW")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


# ---- validation (docs/operators.md §3.3), shared by the NumPy reference and the C++ kernel's messages --------


def validate_attributes(attrs: dict[str, Any]) -> None:
    limit = attrs["swiglu_limit"]
    if not limit >= 0 or not np.isfinite(limit):  # NaN fails the first test
        raise _err(f"attribute 'swiglu_limit' must be finite and >= 0 (0 = no clamp), got {common.fmt(limit)}")
    for name in ("activation_alpha", "activation_beta"):
        if not np.isfinite(attrs[name]):
            raise _err(f"attribute '{name}' must be finite, got {common.fmt(attrs[name])}")
    if attrs["act_quant"] == 1 and customised_activation(attrs):
        raise _err(f"attribute 'act_quant' = 1 takes the default activation_alpha (1) and activation_beta (0), "
                   f"got {common.fmt(attrs['activation_alpha'])} and {common.fmt(attrs['activation_beta'])}")
    if attrs["weight_bits"] not in BITS:
        raise _err(f"attribute 'weight_bits' must be 8 or 4, got {attrs['weight_bits']}")
    if attrs["block_size"] < 0:
        raise _err(f"attribute 'block_size' must be >= 0 (0 = one scale per row), got {attrs['block_size']}")
    if attrs["weight_bits"] == 4 and attrs["block_size"] % 2:
        raise _err(f"attribute 'block_size' must be even with weight_bits 4 (whole bytes per block), "
                   f"got {attrs['block_size']}")
    if attrs["act_quant"] not in (0, 1):
        raise _err(f"attribute 'act_quant' must be 0 (float activations) or 1 (per-token int8), "
                   f"got {attrs['act_quant']}")
    if attrs["act_quant"] and attrs["block_size"] % A8_STEP:
        raise _err(f"attribute 'block_size' must be a multiple of {A8_STEP} with act_quant 1 (whole steps of "
                   f"the integer dot products), got {attrs['block_size']}")


def customised_activation(attrs: dict[str, Any]) -> bool:
    """Whether activation_alpha / activation_beta differ from SiLU's (1, 0)."""
    return bool(attrs["activation_alpha"] != DEFAULTS["activation_alpha"]
                or attrs["activation_beta"] != DEFAULTS["activation_beta"])


def a8_bias_error(name: str) -> ValueError:
    """The error for a bias input with act_quant 1."""
    return _err(f"input '{name}' is not taken with act_quant 1 (the integer path has no biases)")


def _validate_biases(inputs: dict[str, Any], attrs: dict[str, Any], E: common.Dim, H: common.Dim,
                     I: common.Dim) -> None:
    """The optional bias inputs: float, [E, 2I] and [E, H]; none with act_quant 1."""
    for name, want, layout in (("gate_up_bias", (E, 2 * I), "[E, 2I]"), ("down_bias", (E, H), "[E, H]")):
        if inputs.get(name) is None:
            continue
        if attrs["act_quant"]:
            raise a8_bias_error(name)
        if inputs[name][1] != "float":
            raise _err(f"input '{name}' must be float, got {inputs[name][1]}")
        got = tuple(inputs[name][0])
        if len(got) != 2 or any(common.known(w) and common.known(g) and w != g for w, g in zip(want, got)):
            raise _err(f"input '{name}' must be {layout} = {common.shape_text(want)}, "
                       f"got shape {common.shape_text(got)}")


def _validate_quantized(inputs: dict[str, Any], attrs: dict[str, Any], E: common.Dim, H: common.Dim,
                        I: common.Dim) -> None:
    """int8 weights: the packing, the block size against H and I, and the two scale inputs."""
    G = attrs["block_size"]
    for name, rows, inner in (("gate_up_scales", 2 * I, H), ("down_scales", H, I)):
        if inputs.get(name) is None:
            raise _err(f"input '{name}' is required with int8 weights, got none")
        if inputs[name][1] != "float":
            raise _err(f"input '{name}' must be float, got {inputs[name][1]}")
        weights = "gate_up_weights" if name == "gate_up_scales" else "down_weights"
        if common.known(inner) and G and inner % G:
            raise _err(f"attribute 'block_size' = {G} must divide the rows of input '{weights}' "
                       f"({'H' if name == 'gate_up_scales' else 'I'} = {inner})")
        want = (E, rows) if G == 0 else (E, rows, None if not common.known(inner) else inner // G)
        got = tuple(inputs[name][0])
        if len(got) != len(want) or any(common.known(w) and common.known(g) and w != g for w, g in zip(want, got)):
            layout = "[E, 2I]" if name == "gate_up_scales" else "[E, H]"
            if G:
                layout = layout[:-1] + (", H / block_size]" if name == "gate_up_scales" else ", I / block_size]")
            raise _err(f"input '{name}' must be {layout} = {common.shape_text(want)} "
                       f"({'one scale per row' if G == 0 else f'block_size {G}'}), got shape {common.shape_text(got)}")


def validate_inputs(inputs: dict[str, Any], attrs: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """Check attributes, element types, ranks and dims; ``inputs`` maps each input name to
    ``(shape, onnx type name)``. Returns ``(T, H, k, E, I)``. Index values: :func:`validate_indices`."""
    validate_attributes(attrs)
    for name in INPUT_NAMES[:5]:
        if inputs.get(name) is None:
            raise _err(f"input '{name}' is required, got none")
    for name in ("x", "routing_weights"):
        if inputs[name][1] != "float":
            raise _err(f"input '{name}' must be float, got {inputs[name][1]}")
    if inputs["expert_idx"][1] not in INDEX_TYPES:
        raise _err(f"input 'expert_idx' must be {common.type_list(INDEX_TYPES)}, got {inputs['expert_idx'][1]}")
    wtype = inputs["gate_up_weights"][1]
    if wtype not in WEIGHT_TYPES:
        raise _err(f"input 'gate_up_weights' must be {common.type_list(WEIGHT_TYPES)}, got {wtype}")
    if inputs["down_weights"][1] != wtype:
        raise _err(f"input 'down_weights' must have the type of gate_up_weights ({wtype}), "
                   f"got {inputs['down_weights'][1]}")
    quantized = wtype == "int8"
    if wtype == "bfloat16":
        for name, default in (("weight_bits", DEFAULTS["weight_bits"]), ("block_size", DEFAULTS["block_size"])):
            if attrs[name] != default:
                raise _err(f"attribute '{name}' = {attrs[name]} goes with int8 weights, got bfloat16 gate_up_weights "
                           f"(bfloat16 weights take the default, {default})")
    pack = 2 if quantized and attrs["weight_bits"] == 4 else 1
    x, idx, w = inputs["x"][0], inputs["expert_idx"][0], inputs["routing_weights"][0]
    gu, down = inputs["gate_up_weights"][0], inputs["down_weights"][0]
    if len(x) != 2:
        raise _err(f"input 'x' must be 2-D [T, H], got shape {common.shape_text(x)}")
    T, H = x
    if len(idx) != 2 or idx[0] != T:
        raise _err(f"input 'expert_idx' must be 2-D [T, k] with T = {T} (x.shape[0]), "
                   f"got shape {common.shape_text(idx)}")
    k = idx[1]
    if tuple(w) != (T, k):
        raise _err(f"input 'routing_weights' must have the shape of expert_idx [{T}, {k}], "
                   f"got shape {common.shape_text(w)}")
    if attrs["act_quant"] and not quantized:
        raise _err(f"attribute 'act_quant' = {attrs['act_quant']} needs int8 weights, got {wtype} gate_up_weights")
    if attrs["act_quant"] and common.known(H) and H > A8_MAX_INPUTS:
        raise _err(f"input 'x' with act_quant 1 must have H <= {A8_MAX_INPUTS} (int32 sums), got H = {H}")
    if not quantized:
        for name in ("gate_up_scales", "down_scales"):
            if inputs.get(name) is not None:
                raise _err(f"input '{name}' goes with int8 weights only: the weights are {wtype}")
    if pack == 2 and common.known(H) and H % 2:
        raise _err(f"input 'gate_up_weights' with weight_bits 4 packs two values per byte along H, which "
                   f"must be even, got H = {H} (x.shape[1])")
    Hp = H // pack if common.known(H) else H
    inner = "H" if pack == 1 else "H/2"
    if len(gu) != 3 or gu[0] < 1 or gu[1] < 2 or gu[1] % 2 or gu[2] != Hp:
        raise _err(f"input 'gate_up_weights' must be 3-D [E, 2I, {inner}] with E >= 1, an even 2I >= 2 and "
                   f"{inner} = {Hp} (x.shape[1]{'' if pack == 1 else ' / 2'}), got shape {common.shape_text(gu)}")
    E, I = gu[0], gu[1] // 2
    if pack == 2 and I % 2:
        raise _err(f"input 'down_weights' with weight_bits 4 packs two values per byte along I, which "
                   f"must be even, got I = {I} (from gate_up_weights)")
    if tuple(down) != (E, H, I // pack):
        raise _err(f"input 'down_weights' must be [E, H, {'I' if pack == 1 else 'I/2'}] = [{E}, {H}, {I // pack}] "
                   f"(from gate_up_weights), got shape {common.shape_text(down)}")
    if attrs["act_quant"] and I > A8_MAX_INPUTS:
        raise _err(f"input 'down_weights' with act_quant 1 must have I <= {A8_MAX_INPUTS} (int32 sums), got I = {I}")
    if quantized:
        _validate_quantized(inputs, attrs, E, H, I)
    _validate_biases(inputs, attrs, E, H, I)
    return T, H, k, E, I


def validate_indices(expert_idx: np.ndarray, num_experts: int) -> None:
    """Every expert index in [0, E); the first one outside is reported with its position."""
    bad = np.argwhere((expert_idx < 0) | (expert_idx >= num_experts))
    if bad.size:
        t, j = (int(v) for v in bad[0])
        raise _err(f"input 'expert_idx' must be in [0, E) = [0, {num_experts}), got "
                   f"{int(expert_idx[t, j])} at [{t}, {j}]")


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx: InferenceContext) -> None:
    floats: dict[str, float] = {}
    for name in FLOAT_ATTRIBUTES:  # another kind: the kernels say so
        a = ctx.get_attribute(name)
        floats[name] = a.f if a is not None and a.type == a.FLOAT else DEFAULTS[name]
    ints = {n: d for n, d in DEFAULTS.items() if n not in FLOAT_ATTRIBUTES}
    common.inferred_int_attributes(ctx, OP_TYPE, ints, lambda v: validate_attributes({**floats, **v}))
    dims = common.input_dims(common.input_type(ctx, 0))
    common.check_rank(OP_TYPE, "x", dims, "[T, H]")
    ctx.set_output_type(0, common.make_type(common.FLOAT, dims))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §3.2) -----------------------------------------------------


def round_bf16(v: Any) -> np.ndarray:
    """float32 values rounded to bfloat16 (round to nearest even), held in float32."""
    return np.asarray(v, np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)


def swiglu(gate_up: np.ndarray, limit: float, alpha: float = 1.0, beta: float = 0.0) -> np.ndarray:
    """g sigmoid(alpha g) (u + beta) of interleaved gate/up values [..., 2I] (g = even, u = odd
    positions), clamped first when limit > 0 (alpha 1, beta 0: silu(g) * u)."""
    g, u = gate_up[..., 0::2], gate_up[..., 1::2]
    if limit > 0:
        g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
    return g / (1.0 + np.exp(-alpha * g)) * (u + beta)


def reference(x: np.ndarray, expert_idx: np.ndarray, routing_weights: np.ndarray, gate_up_weights: np.ndarray,
              down_weights: np.ndarray, gate_up_scales: np.ndarray | None = None,
              down_scales: np.ndarray | None = None, gate_up_bias: np.ndarray | None = None,
              down_bias: np.ndarray | None = None, **attributes: Any) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §3.2, computed in float64 and rounded once to float32 (int8
    weights: dequantized exactly first, ``q * scale``; bfloat16 weights: the x rows and the SwiGLU
    rows rounded to bfloat16 first, the products then exact; the biases in float64)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    arrays = dict(zip(INPUT_NAMES, (x, expert_idx, routing_weights, gate_up_weights, down_weights,
                                    gate_up_scales, down_scales, gate_up_bias, down_bias)))
    _, _, _, E, _ = validate_inputs(
        {n: None if a is None else (np.shape(a), common.onnx_type_name(np.asarray(a).dtype))
         for n, a in arrays.items()},
        attrs)
    idx = np.asarray(expert_idx).astype(np.int64)
    validate_indices(idx, E)
    if np.size(x) == 0:  # y is empty (T = 0 or H = 0): the weights may declare any E and I
        return (np.zeros(np.shape(x), np.float32),)
    if attrs["act_quant"]:
        assert gate_up_scales is not None and down_scales is not None  # validate_inputs: int8 weights have scales
        return (_reference_a8(np.asarray(x, np.float32), idx, np.asarray(routing_weights, np.float32),
                              gate_up_weights, down_weights, gate_up_scales, down_scales, attrs),)
    bf16 = np.asarray(gate_up_weights).dtype == ml_dtypes.bfloat16
    x64, w64 = np.asarray(round_bf16(x) if bf16 else x, np.float64), np.asarray(routing_weights, np.float64)
    if gate_up_scales is not None and down_scales is not None:  # validated: both or neither
        bits, G = attrs["weight_bits"], attrs["block_size"]
        fc1 = dequantize(gate_up_weights, gate_up_scales, bits, G)
        fc2 = dequantize(down_weights, down_scales, bits, G)
    else:
        fc1, fc2 = np.asarray(gate_up_weights, np.float64), np.asarray(down_weights, np.float64)
    y = np.zeros(x64.shape, np.float64)
    for j in range(idx.shape[1]):
        e = idx[:, j]
        gate_up = np.einsum("tnh,th->tn", fc1[e], x64)
        if gate_up_bias is not None:
            gate_up = gate_up + np.asarray(gate_up_bias, np.float64)[e]
        act = swiglu(gate_up, attrs["swiglu_limit"], attrs["activation_alpha"], attrs["activation_beta"])
        if bf16:  # the SwiGLU row in float32, rounded to bfloat16 for the down projection's products
            act = round_bf16(act.astype(np.float32)).astype(np.float64)
        out = np.einsum("thi,ti->th", fc2[e], act)
        if down_bias is not None:
            out = out + np.asarray(down_bias, np.float64)[e]
        y += w64[:, j:j + 1] * out
    return (y.astype(np.float32),)


# ---- act_quant 1 (W8A8 / W4A8): the integer arithmetic, float32 step by step (docs/quantization.md) ----


def quantize_rows_int8(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row symmetric dynamic int8 of float32 rows [R, K] (Ascend's npu_dynamic_quant): scale =
    max |v| / 127 in float32; q = round half to even of v / scale (float32 division), clamped to
    [-127, 127]. A row of zeros (scale 0) gets q = 0; a row holding NaN or +-inf gets q = 0 and a NaN
    scale, so everything computed from it is NaN. Returns (q int8 [R, K], scale float32 [R])."""
    v = np.asarray(v, np.float32)
    finite = np.isfinite(v).all(axis=1)
    amax = np.where(finite, np.abs(np.where(np.isfinite(v), v, 0)).max(axis=1, initial=0), 0).astype(np.float32)
    scale = np.where(finite, amax / np.float32(127), np.float32(np.nan)).astype(np.float32)
    safe = np.where(scale > 0, scale, np.float32(1))[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        q = np.clip(np.rint(np.where(np.isfinite(v), v, 0) / safe), -127, 127)
    q = np.where((scale > 0)[:, None], q, 0)
    return q.astype(np.int8), scale


def _dequantized_dots(q_act: np.ndarray, q_w: np.ndarray, w_scales: np.ndarray, act_scale: np.ndarray,
                      block: int) -> np.ndarray:
    """Rows [P, K] of int8 activations against each pair's int8 weight rows [P, N, K]: the int32 dot of
    every block of ``block`` inputs (the whole row: one block) converted to float32, times its weight
    scale, summed over the blocks in order in float32, times the activation row's scale."""
    P, N, K = q_w.shape
    G = K // block
    dots = np.einsum("pngb,pgb->png", q_w.reshape(P, N, G, block).astype(np.int64),
                     q_act.reshape(P, G, block).astype(np.int64))
    dots = dots.astype(np.int32).astype(np.float32)  # exact int32 sums (A8_MAX_INPUTS), then rounded
    scales = np.asarray(w_scales, np.float32).reshape(P, N, G)
    acc = np.zeros((P, N), np.float32)
    for g in range(G):
        acc = acc + dots[:, :, g] * scales[:, :, g]
    return acc * act_scale[:, None]


def _silu_mul(g: np.ndarray, u: np.ndarray) -> np.ndarray:
    """g / (1 + e) * u in float32, e = exp(-g) computed in float64 and rounded to float32."""
    with np.errstate(over="ignore"):
        e = np.exp(-g.astype(np.float64)).astype(np.float32)
    return g / (np.float32(1) + e) * u


def _reference_a8(x: np.ndarray, idx: np.ndarray, routing_weights: np.ndarray, gate_up_q: np.ndarray,
                  down_q: np.ndarray, gate_up_scales: np.ndarray, down_scales: np.ndarray,
                  attrs: dict[str, Any]) -> np.ndarray:
    """y of act_quant 1, the kernels' arithmetic step by step: x rows quantized per token; gate/up as
    int32 dots dequantized per block; SwiGLU in float32; each pair's row quantized; down likewise;
    y[t] summed in float32 over the token's slots in ascending expert order (ties: slot order)."""
    from .weight_quant import unpack_int4  # the stored integers, unscaled

    bits, G, limit = attrs["weight_bits"], attrs["block_size"], np.float32(attrs["swiglu_limit"])
    T, H = x.shape
    k = idx.shape[1]
    fc1 = unpack_int4(gate_up_q) if bits == 4 else np.asarray(gate_up_q, np.int8)
    fc2 = unpack_int4(down_q) if bits == 4 else np.asarray(down_q, np.int8)
    I = fc2.shape[2]
    qx, sx = quantize_rows_int8(x)
    e = idx.reshape(-1)
    t = np.repeat(np.arange(T), k)
    gu = _dequantized_dots(qx[t], fc1[e], np.asarray(gate_up_scales)[e], sx[t], G or H)  # [P, 2I]
    gate, up = gu[:, 0::2], gu[:, 1::2]
    if limit > 0:
        gate, up = np.minimum(gate, limit), np.clip(up, -limit, limit)
    qa, sa = quantize_rows_int8(_silu_mul(gate, up))
    out = _dequantized_dots(qa, fc2[e], np.asarray(down_scales)[e], sa, G or I).reshape(T, k, H)
    order = np.argsort(idx, axis=1, kind="stable")
    y = np.zeros((T, H), np.float32)
    rows = np.arange(T)
    for j in range(k):
        s = order[:, j]
        y = y + routing_weights[rows, s][:, None] * out[rows, s]
    return y
