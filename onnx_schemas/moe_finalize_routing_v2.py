"""MoeFinalizeRoutingV2 (docs/operators.md §5): ONNX schema, shape inference, validation and NumPy reference.

The last step of an MoE layer: each token's k expert outputs, scaled by its routing weights, are
summed into the token's row, with up to two residual rows added. ``weighted_gather`` is the one
statement of the arithmetic; MoeTokenUnpermute (moe_token_unpermute.py) uses it too, as Ascend's
own MoeTokenUnpermute is this op with ``drop_pad_mode`` 2 on its newest chips.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "MoeFinalizeRoutingV2"

# drop_pad_mode: dropless / drop-pad, expanded_row_idx slot-major (k * N + i) / token-major (i * K + k)
DROPLESS_SLOT_MAJOR, DROP_PAD_SLOT_MAJOR, DROPLESS_TOKEN_MAJOR, DROP_PAD_TOKEN_MAJOR = 0, 1, 2, 3
DROPPED = -1  # expanded_row_idx value of a slot without a row (dropped, or an expert out of range): a zero row

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Combines the expert outputs of each token: y[i] = x1[i] + x2[i] + sum_j scales[i, j] * "
        "(expanded_x[r(i, j)] + bias[expert_idx[i, j]]), where r(i, j) is read from "
        "expanded_row_idx slot-major (drop_pad_mode 0, 1) or token-major (2, 3); in the drop-pad "
        "modes (1, 3) expanded_x is [E, C, H]; r = -1 marks a slot without a row (dropped, or an expert "
        "outside init routing's active range): its row counts as 0, its bias term is still added."
    ),
    inputs=[
        common.tensor_input("expanded_x", "T", "Expert outputs: [N*K, H] (modes 0, 2) or [E, C, H] (modes 1, 3)."),
        common.tensor_input("expanded_row_idx", "TI", "Row of expanded_x of each (token, slot) [N*K]."),
        common.tensor_input("x1", "T", "First residual [N, H].", optional=True),
        common.tensor_input("x2", "T", "Second residual [N, H] (only with x1).", optional=True),
        common.tensor_input("bias", "T", "Per-expert bias [E, H] (needs expert_idx).", optional=True),
        common.tensor_input("scales", "TS", "Routing weights [N, K]; absent: K = 1, weight 1.", optional=True),
        common.tensor_input("expert_idx", "TI2", "Expert of each (token, slot) [N, K]; read for bias only.",
                            optional=True),
    ],
    outputs=[common.tensor_input("y", "T", "Combined rows [N, H].")],
    type_constraints=[
        ("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Row type."),
        ("TI", ["tensor(int32)", "tensor(int64)"], "Row index type."),
        ("TS", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Routing weight type."),
        ("TI2", ["tensor(int32)", "tensor(int64)"], "Expert index type."),
    ],
    attributes=[
        common.attribute("drop_pad_mode", DROPLESS_SLOT_MAJOR,
                         "0: dropless, slot-major index; 1: drop-pad, slot-major; 2: dropless, token-major; "
                         "3: drop-pad, token-major."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"expanded_x": (TensorProto.BFLOAT16, ["NK", "H"]), "expanded_row_idx": (TensorProto.INT32, ["NK"]),
      "x1": (TensorProto.BFLOAT16, ["N", "H"]), "scales": (TensorProto.FLOAT, ["N", "K"])}, {"drop_pad_mode": 2}),
    ({"expanded_x": (TensorProto.FLOAT16, ["E", "C", "H"]), "expanded_row_idx": (TensorProto.INT32, ["N"])},
     {"drop_pad_mode": 1}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
ROW_TYPES = common.allowed_types(SCHEMA, "T")
INDEX_TYPES = common.allowed_types(SCHEMA, "TI")
SCALE_TYPES = common.allowed_types(SCHEMA, "TS")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def drop_pad(mode: int) -> bool:
    """Whether ``drop_pad_mode`` is a drop-pad mode (expanded_x [E, C, H], -1 = dropped)."""
    return mode in (DROP_PAD_SLOT_MAJOR, DROP_PAD_TOKEN_MAJOR)


def token_major(mode: int) -> bool:
    """Whether ``drop_pad_mode`` reads expanded_row_idx token-major (i * K + k)."""
    return mode in (DROPLESS_TOKEN_MAJOR, DROP_PAD_TOKEN_MAJOR)


def _modes(mode: int) -> str:
    return "1 or 3" if drop_pad(mode) else "0 or 2"


# ---- validation (docs/operators.md §5.3), shared by the NumPy reference and the torch op -------------------
# The messages are those of the C++ kernel (ort_custom_ops/src/moe_finalize_routing_v2_validate.cc).


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check drop_pad_mode."""
    if attrs["drop_pad_mode"] not in (0, 1, 2, 3):
        raise _err("attribute 'drop_pad_mode' must be 0, 1, 2 or 3 (0, 2: dropless; 1, 3: drop-pad; "
                   f"0, 1: slot-major index; 2, 3: token-major index), got {attrs['drop_pad_mode']}")


def _required(inputs: dict[str, tuple | None], name: str) -> tuple:
    """The ``(shape, type)`` of a required input."""
    spec = inputs.get(name)
    if spec is None:
        raise _err(f"input '{name}' is required, got none")
    return spec


def check_presence(present: Collection[str]) -> None:
    """The rules of which optional inputs go together (known from the node alone: the function
    body checks them when it is built): x2 only with x1, bias only with expert_idx."""
    if "x2" in present and "x1" not in present:
        raise _err("input 'x2' must be absent when x1 is absent")
    if "bias" in present and "expert_idx" not in present:
        raise _err("input 'bias' needs expert_idx (the expert of each slot), got no expert_idx")


def validate_inputs(inputs: dict[str, tuple | None], attrs: dict[str, Any]) -> tuple:
    """Check attributes, types, ranks and dims; ``inputs[name] = (shape, onnx type name)`` or None.

    Returns ``(N, K, H, R)`` (R: rows of expanded_x seen as [R, H]); dims given as None (unknown)
    are not checked and come back as None. Index values are checked by :func:`validate_indices`.
    """
    validate_attributes(attrs)
    common.check_types(SCHEMA, inputs)
    mode = attrs["drop_pad_mode"]
    x_shape = tuple(_required(inputs, "expanded_x")[0])
    want_rank = 3 if drop_pad(mode) else 2
    if len(x_shape) != want_rank:
        layout = "3-D [E, C, H]" if drop_pad(mode) else "2-D [N*K, H]"
        raise _err(f"input 'expanded_x' must be {layout} when drop_pad_mode is {_modes(mode)}, "
                   f"got shape {common.shape_text(x_shape)}")
    H = x_shape[-1]
    R = x_shape[0] * x_shape[1] if drop_pad(mode) and common.known(*x_shape[:2]) else (
        x_shape[0] if not drop_pad(mode) else None)
    idx_shape = tuple(_required(inputs, "expanded_row_idx")[0])
    if len(idx_shape) != 1:
        raise _err(f"input 'expanded_row_idx' must be 1-D [N*K], got shape {common.shape_text(idx_shape)}")
    scales = inputs.get("scales")
    if scales is not None:
        s_shape = tuple(scales[0])
        if len(s_shape) != 2 or (common.known(s_shape[1]) and s_shape[1] < 1):
            raise _err(f"input 'scales' must be 2-D [N, K] with K >= 1, got shape {common.shape_text(s_shape)}")
        N, K = s_shape
        if common.known(N, K, idx_shape[0]) and idx_shape[0] != N * K:
            raise _err(f"input 'expanded_row_idx' must have N*K = {N * K} elements (N = {N}, K = {K} "
                       f"from scales), got shape {common.shape_text(idx_shape)}")
    else:
        N, K = idx_shape[0], 1
    if not drop_pad(mode) and common.known(N, K, x_shape[0]) and x_shape[0] != N * K:
        raise _err(f"input 'expanded_x' must have N*K = {N * K} rows when drop_pad_mode is 0 or 2, "
                   f"got shape {common.shape_text(x_shape)}")
    for name in ("x1", "x2"):
        desc = inputs.get(name)
        if desc is None:
            continue
        shape = tuple(desc[0])
        if len(shape) != 2 or any(common.known(a, b) and a != b for a, b in zip(shape, (N, H))):
            raise _err(f"input '{name}' must be [N, H] = {common.shape_text((N, H))}, "
                       f"got shape {common.shape_text(shape)}")
    check_presence({n for n, d in inputs.items() if d is not None})
    bias, experts = inputs.get("bias"), inputs.get("expert_idx")
    if bias is not None:
        b_shape = tuple(bias[0])
        if (len(b_shape) != 2 or (common.known(b_shape[0]) and b_shape[0] < 1)
                or (common.known(b_shape[1], H) and b_shape[1] != H)):
            raise _err(f"input 'bias' must be 2-D [E, H] with E >= 1 and H = {H} (expanded_x.shape[-1]), "
                       f"got shape {common.shape_text(b_shape)}")
        if drop_pad(mode) and common.known(b_shape[0], x_shape[0]) and b_shape[0] != x_shape[0]:
            raise _err(f"input 'bias' must have E = {x_shape[0]} rows (expanded_x.shape[0]) when "
                       f"drop_pad_mode is 1 or 3, got shape {common.shape_text(b_shape)}")
    if experts is not None:
        e_shape = tuple(experts[0])
        if len(e_shape) != 2 or any(common.known(a, b) and a != b for a, b in zip(e_shape, (N, K))):
            raise _err(f"input 'expert_idx' must be [N, K] = {common.shape_text((N, K))}, "
                       f"got shape {common.shape_text(e_shape)}")
    return N, K, H, R


def validate_indices(row_idx: np.ndarray, R: int, mode: int, expert_idx: np.ndarray | None, E: int | None) -> None:
    """Check the index values: rows in [0, R) or -1 (a zero row), experts in [0, E)."""
    idx = np.asarray(row_idx).astype(np.int64)
    bad = np.flatnonzero((idx < DROPPED) | (idx >= R))
    if bad.size:
        i = int(bad[0])
        rows = "E*C" if drop_pad(mode) else "N*K"
        raise _err(f"input 'expanded_row_idx' must be -1 (no row) or in [0, {rows}) = [0, {R}) when "
                   f"drop_pad_mode is {_modes(mode)}, got {int(idx[i])} at [{i}]")
    if expert_idx is not None and E is not None:
        e = np.asarray(expert_idx).astype(np.int64)
        bad_r, bad_c = np.nonzero((e < 0) | (e >= E))
        if bad_r.size:
            r, c = int(bad_r[0]), int(bad_c[0])
            raise _err(f"input 'expert_idx' must be in [0, E) = [0, {E}) (rows of bias), got {int(e[r, c])} "
                       f"at [{r}, {c}]")


# ---- shape inference ---------------------------------------------------------------------------


def infer_weighted_gather(ctx: InferenceContext, rows: int, index: int, weights: int) -> None:
    """Output 0 of a weighted gather (this op, MoeTokenUnpermute): [N, H] of the rows' type, N from
    the weights [N, K], or from the index [N*K] without weights; H = rows.shape[-1]. Unknown parts
    stay unknown (a bad rank fails in the validators)."""
    rows_type = common.input_type(ctx, rows)
    if rows_type is None:
        return
    rows_dims, index_dims = common.input_dims(rows_type), common.input_dims(common.input_type(ctx, index))
    weights_type = common.input_type(ctx, weights)
    if weights_type is not None:
        w_dims = common.input_dims(weights_type)
        n = w_dims[0] if w_dims is not None and len(w_dims) == 2 else None
    else:
        n = index_dims[0] if index_dims is not None and len(index_dims) == 1 else None
    h = rows_dims[-1] if rows_dims else None
    ctx.set_output_type(0, common.make_type(rows_type.tensor_type.elem_type, [n, h]))


def _infer(ctx: InferenceContext) -> None:
    common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    infer_weighted_gather(ctx, rows=0, index=1, weights=5)


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §5.2) -------------------------------------------------------------


def weighted_gather(rows: np.ndarray, slot_rows: np.ndarray, weights: np.ndarray | None,
                    base: list[np.ndarray], slot_bias: np.ndarray | None = None,
                    skip_zero_weight: bool = False) -> np.ndarray:
    """float32 [N, H]: sum(base) + sum_j w[i, j] * (rows[slot_rows[i, j]] + slot_bias[i, j]).

    ``slot_rows`` [N, K] int64; a negative entry stands for a zero row. ``slot_bias`` [N, K, H] or
    None; ``weights`` [N, K] or None (all 1). With ``skip_zero_weight`` a slot of weight 0 adds
    exactly nothing (its row is not read). Summed in float32 in slot order.
    """
    N, K = slot_rows.shape
    acc = np.zeros((N, rows.shape[-1]), np.float32)
    for b in base:
        acc += b.astype(np.float32)
    rows32 = rows.astype(np.float32)
    w = None if weights is None else weights.astype(np.float32)
    with np.errstate(invalid="ignore", over="ignore"):  # inf * 0 of a skipped slot is discarded below
        for j in range(K):
            _add_slot(acc, rows32, slot_rows[:, j], None if w is None else w[:, j:j + 1],
                      None if slot_bias is None else slot_bias[:, j], skip_zero_weight)
    return acc


def _add_slot(acc: np.ndarray, rows32: np.ndarray, r: np.ndarray, w: np.ndarray | None, bias: np.ndarray | None,
              skip_zero_weight: bool) -> None:
    """acc += w * (rows32[r] + bias) for one slot column (r < 0: a zero row)."""
    N, H = acc.shape
    if N and rows32.shape[0]:
        term = np.where((r >= 0)[:, None], rows32[np.maximum(r, 0)], np.float32(0))
    else:  # no token, or no row to read (every slot a zero row)
        term = np.zeros((N, H), np.float32)
    if bias is not None:
        term = term + bias.astype(np.float32)
    if w is not None:
        term = term * w
        if skip_zero_weight:
            term = np.where(w == 0, np.float32(0), term)
    acc += term


def reference(
    expanded_x: np.ndarray,
    expanded_row_idx: np.ndarray,
    x1: np.ndarray | None = None,
    x2: np.ndarray | None = None,
    bias: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    expert_idx: np.ndarray | None = None,
    **attributes: Any,
) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §5.2. Attribute: ``drop_pad_mode`` (default from the schema)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    given = dict(zip(INPUT_NAMES, (expanded_x, expanded_row_idx, x1, x2, bias, scales, expert_idx)))
    arrays = {n: None if a is None else np.asarray(a) for n, a in given.items()}
    N, K, H, R = validate_inputs(
        {n: None if a is None else (a.shape, common.onnx_type_name(a.dtype)) for n, a in arrays.items()}, attrs)
    mode = attrs["drop_pad_mode"]
    b, x_arr, idx_arr = (arrays[n] for n in ("bias", "expanded_x", "expanded_row_idx"))
    assert x_arr is not None and idx_arr is not None  # required inputs
    validate_indices(idx_arr, R, mode, arrays["expert_idx"] if b is not None else None,
                     None if b is None else b.shape[0])
    idx = idx_arr.astype(np.int64)
    slot_rows = idx.reshape(N, K) if token_major(mode) else idx.reshape(K, N).T
    rows = x_arr.reshape(-1, H)
    experts = arrays["expert_idx"]
    slot_bias = None if b is None or experts is None else b[experts.astype(np.int64)]
    base = [a for a in (arrays["x1"], arrays["x2"]) if a is not None]
    y = weighted_gather(rows, slot_rows, arrays["scales"], base, slot_bias)
    return (y.astype(x_arr.dtype),)

