"""MoeRoutedExperts (docs/operators.md §3): ONNX schema, shape inference, validation and NumPy reference.

The routed experts of a MoE block on the rows routed to them and nothing else: each (token, slot)
pair of the router's ``expert_idx`` runs the token row through that expert's SwiGLU MLP, and the
results are summed with the ``routing_weights``. The weights are the stacked experts in ONNX
Runtime's ``com.microsoft.MoE`` layout (gate/up rows interleaved ``[E, 2I, H]``, down ``[E, H, I]``),
so a graph may feed both ops from the same initializers.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.defs import OpSchema

from ._common import (
    DOMAIN,
    FLOAT,
    OPSET_VERSION,
    allowed_types,
    attribute,
    attribute_defaults,
    fail_inference,
    fmt,
    input_dims,
    input_names,
    input_type,
    make_type,
    onnx_type_name,
    output_names,
    resolve_attributes,
    tensor_input,
    type_list,
)

OP_TYPE = "MoeRoutedExperts"
SCHEMA = OpSchema(
    OP_TYPE,
    DOMAIN,
    OPSET_VERSION,
    doc=(
        "Routed SwiGLU experts on the routed rows only: y[t] = sum_j routing_weights[t, j] * "
        "expert_{expert_idx[t, j]}(x[t]), expert_e(v) = down_e (silu(g) * u), (g, u) = gate/up "
        "rows of e applied to v, optionally clamped (swiglu_limit)."
    ),
    inputs=[
        tensor_input("x", "tensor(float)", "Token rows [T, H]."),
        tensor_input("expert_idx", "TI", "Experts of each token [T, k], in [0, E)."),
        tensor_input("routing_weights", "tensor(float)", "Weight of each (token, slot) [T, k]."),
        tensor_input("gate_up_weights", "tensor(float)",
                     "Stacked gate/up projections [E, 2I, H]: row 2i is gate row i, row 2i+1 up row i."),
        tensor_input("down_weights", "tensor(float)", "Stacked down projections [E, H, I]."),
    ],
    outputs=[tensor_input("y", "tensor(float)", "Weighted sum of the routed experts' outputs [T, H].")],
    type_constraints=[("TI", ["tensor(int32)", "tensor(int64)"], "Expert index type.")],
    attributes=[
        attribute("swiglu_limit", 0.0,
                  "> 0: clamp before the activation, gate to at most the limit and up to [-limit, "
                  "limit] (DeepSeek-V4); 0: no clamp."),
    ],
)

INPUT_NAMES = input_names(SCHEMA)
OUTPUT_NAMES = output_names(SCHEMA)
SHAPE_EXAMPLES: list[tuple] = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.FLOAT, ["T", "H"]), "expert_idx": (TensorProto.INT32, ["T", "k"]),
      "routing_weights": (TensorProto.FLOAT, ["T", "k"]), "gate_up_weights": (TensorProto.FLOAT, ["E", "2I", "H"]),
      "down_weights": (TensorProto.FLOAT, ["E", "H", "I"])}, {}),
]

DEFAULTS: dict[str, Any] = attribute_defaults(SCHEMA)
INDEX_TYPES = allowed_types(SCHEMA, "TI")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def _shape(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _known(d) -> bool:
    return isinstance(d, (int, np.integer))


# ---- validation (docs/operators.md §3.3), shared by the NumPy reference and the C++ kernel's messages --------


def validate_attributes(attrs: dict[str, Any]) -> None:
    limit = attrs["swiglu_limit"]
    if not limit >= 0 or not np.isfinite(limit):  # NaN fails the first test
        raise _err(f"attribute 'swiglu_limit' must be finite and >= 0 (0 = no clamp), got {fmt(limit)}")


def validate_inputs(inputs: dict[str, tuple], attrs: dict[str, Any]) -> tuple[int, int, int, int, int]:
    """Check attributes, element types, ranks and dims; ``inputs`` maps each input name to
    ``(shape, onnx type name)``. Returns ``(T, H, k, E, I)``. Index values: :func:`validate_indices`."""
    validate_attributes(attrs)
    for name in INPUT_NAMES:
        if inputs.get(name) is None:
            raise _err(f"input '{name}' is required, got none")
    for name in ("x", "routing_weights", "gate_up_weights", "down_weights"):
        if inputs[name][1] != "float":
            raise _err(f"input '{name}' must be float, got {inputs[name][1]}")
    if inputs["expert_idx"][1] not in INDEX_TYPES:
        raise _err(f"input 'expert_idx' must be {type_list(INDEX_TYPES)}, got {inputs['expert_idx'][1]}")
    x, idx, w = inputs["x"][0], inputs["expert_idx"][0], inputs["routing_weights"][0]
    gu, down = inputs["gate_up_weights"][0], inputs["down_weights"][0]
    if len(x) != 2:
        raise _err(f"input 'x' must be 2-D [T, H], got shape {_shape(x)}")
    T, H = x
    if len(idx) != 2 or idx[0] != T:
        raise _err(f"input 'expert_idx' must be 2-D [T, k] with T = {T} (x.shape[0]), got shape {_shape(idx)}")
    k = idx[1]
    if tuple(w) != (T, k):
        raise _err(f"input 'routing_weights' must have the shape of expert_idx [{T}, {k}], got shape {_shape(w)}")
    if len(gu) != 3 or gu[0] < 1 or gu[1] < 2 or gu[1] % 2 or gu[2] != H:
        raise _err(f"input 'gate_up_weights' must be 3-D [E, 2I, H] with E >= 1, an even 2I >= 2 and "
                   f"H = {H} (x.shape[1]), got shape {_shape(gu)}")
    E, I = gu[0], gu[1] // 2
    if tuple(down) != (E, H, I):
        raise _err(f"input 'down_weights' must be [E, H, I] = [{E}, {H}, {I}] (from gate_up_weights), "
                   f"got shape {_shape(down)}")
    return T, H, k, E, I


def validate_indices(expert_idx: np.ndarray, num_experts: int) -> None:
    """Every expert index in [0, E); the first one outside is reported with its position."""
    bad = np.argwhere((expert_idx < 0) | (expert_idx >= num_experts))
    if bad.size:
        t, j = (int(v) for v in bad[0])
        raise _err(f"input 'expert_idx' must be in [0, E) = [0, {num_experts}), got "
                   f"{int(expert_idx[t, j])} at [{t}, {j}]")


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx) -> None:
    a = ctx.get_attribute("swiglu_limit")
    if a is not None and a.type == a.FLOAT:
        try:
            validate_attributes({"swiglu_limit": a.f})
        except ValueError as e:
            fail_inference(OP_TYPE, str(e).split(": ", 1)[1])
    dims = input_dims(input_type(ctx, 0))
    if dims is not None and len(dims) != 2:
        fail_inference(OP_TYPE, f"input 'x' must be 2-D [T, H], got rank {len(dims)}")
    ctx.set_output_type(0, make_type(FLOAT, dims))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §3.2) -----------------------------------------------------


def swiglu(gate_up: np.ndarray, limit: float) -> np.ndarray:
    """silu(g) * u of interleaved gate/up values [..., 2I] (g = even, u = odd positions)."""
    g, u = gate_up[..., 0::2], gate_up[..., 1::2]
    if limit > 0:
        g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
    return g / (1.0 + np.exp(-g)) * u


def reference(x: np.ndarray, expert_idx: np.ndarray, routing_weights: np.ndarray, gate_up_weights: np.ndarray,
              down_weights: np.ndarray, **attributes: Any) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §3.2, computed in float64 and rounded once to float32."""
    attrs = resolve_attributes(SCHEMA, attributes)
    arrays = dict(zip(INPUT_NAMES, (x, expert_idx, routing_weights, gate_up_weights, down_weights)))
    _, _, _, E, _ = validate_inputs(
        {n: None if a is None else (np.shape(a), onnx_type_name(np.asarray(a).dtype)) for n, a in arrays.items()},
        attrs)
    idx = np.asarray(expert_idx).astype(np.int64)
    validate_indices(idx, E)
    if np.size(x) == 0:  # y is empty (T = 0 or H = 0): the weights may declare any E and I
        return (np.zeros(np.shape(x), np.float32),)
    x64, w64 = np.asarray(x, np.float64), np.asarray(routing_weights, np.float64)
    fc1, fc2 = np.asarray(gate_up_weights, np.float64), np.asarray(down_weights, np.float64)
    y = np.zeros(x64.shape, np.float64)
    for j in range(idx.shape[1]):
        e = idx[:, j]
        act = swiglu(np.einsum("tnh,th->tn", fc1[e], x64), attrs["swiglu_limit"])
        y += w64[:, j:j + 1] * np.einsum("thi,ti->th", fc2[e], act)
    return (y.astype(np.float32),)
