"""MoeGatingTopKHash (docs/operators.md §1): ONNX schema, shape inference, validation and NumPy reference."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "MoeGatingTopKHash"
# Largest k and E the kernels support (generated into ops_src/cpu/attr_defaults.gen.h).
LIMITS = {"MAX_K": 64, "MAX_EXPERTS": 2048}
MAX_K, MAX_EXPERTS = LIMITS["MAX_K"], LIMITS["MAX_EXPERTS"]
NORM_SOFTMAX, NORM_SIGMOID, NORM_SQRT_SOFTPLUS = 0, 1, 2

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Fused MoE router: normalise logits (softmax / sigmoid / sqrt-softplus), add a "
        "selection-only expert bias, restrict to the best expert groups, pick the top-k experts "
        "(or look them up by token id: hash routing) and return renormalised, scaled weights."
    ),
    inputs=[
        common.tensor_input("x", "T", "Router logits [..., E], rank >= 2."),
        common.tensor_input("bias", "T", "Selection-only expert bias [E].", optional=True),
        common.tensor_input("input_ids", "TI", "Token ids, x.shape[:-1] or [R] (hash routing).", optional=True),
        common.tensor_input("tid2eid", "TE", "Token id -> k expert ids table [n, k].", optional=True),
        common.tensor_input("additional_bias", "T", "Bias for rows selected by the mask [E].", optional=True),
        common.tensor_input("additional_token_mask", "tensor(bool)", "Rows using additional_bias.", optional=True),
    ],
    outputs=[
        common.tensor_input("y", "T", "Routing weights [..., k]."),
        common.tensor_input("expert_idx", "tensor(int32)", "Expert indices [..., k]."),
        common.tensor_input("out", "tensor(float)", "Normalised scores [..., E] when out_flag=1, else [0].",
                            optional=True),
    ],
    type_constraints=[
        ("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Logit and weight type."),
        ("TI", ["tensor(int32)", "tensor(int64)"], "Token id type."),
        ("TE", ["tensor(int32)", "tensor(int64)"], "Table entry type."),
    ],
    attributes=[
        common.attribute("k", None, "Experts per token, 1 <= k <= 64."),
        common.attribute("k_group", 1, "Groups kept per token."),
        common.attribute("group_count", 1, "Number of consecutive expert groups."),
        common.attribute("group_select_mode", 0, "Group score: 0 = max, 1 = sum of the two largest."),
        common.attribute("renorm", 0, "1 = renormalise softmax weights too (extension)."),
        common.attribute("norm_type", 0, "0 = softmax, 1 = sigmoid, 2 = sqrt(softplus)."),
        common.attribute("out_flag", 0, "1 = also return the normalised scores."),
        common.attribute("routed_scaling_factor", 1.0, "Multiplies the final weights."),
        common.attribute("eps", 1e-20, "Added to the weight sum before renormalisation."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.FLOAT, ["R", "E"])}, {"k": 8}),
    ({"x": (TensorProto.BFLOAT16, ["B", "S", "E"])}, {"k": 8, "out_flag": 1}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
FLOAT_TYPES = common.allowed_types(SCHEMA, "T")  # x, bias, additional_bias, y
ID_TYPES = common.allowed_types(SCHEMA, "TI")
TABLE_TYPES = common.allowed_types(SCHEMA, "TE")


def _infer(ctx: InferenceContext) -> None:
    x = common.input_type(ctx, 0)
    k = common.int_attribute(ctx, OP_TYPE, "k", 0)
    out_flag = common.int_attribute(ctx, OP_TYPE, "out_flag", DEFAULTS["out_flag"])
    if x is None:
        return
    dims = common.input_dims(x)
    if dims is not None and len(dims) < 2:
        common.fail_inference(OP_TYPE, f"input 'x' must have rank >= 2, got rank {len(dims)}")
    lead = None if dims is None else dims[:-1]
    ctx.set_output_type(0, common.make_type(x.tensor_type.elem_type, None if lead is None else lead + [k]))
    if ctx.get_num_outputs() > 1:
        ctx.set_output_type(1, common.make_type(common.INT32, None if lead is None else lead + [k]))
    if ctx.get_num_outputs() > 2 and ctx.has_output(2):
        ctx.set_output_type(2, common.make_type(common.FLOAT, dims if out_flag else [0]))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- validation (docs/operators.md §1.3), shared by the NumPy reference and the torch ops ------------------


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def _numel(shape: Sequence[common.Dim]) -> int | None:
    """Product of the dims, or None when one is unknown."""
    if not all(common.known(d) for d in shape):
        return None
    return int(np.prod([int(d) for d in shape], dtype=np.int64))


def validate_attributes(attrs: dict[str, Any], num_experts: int | None = None) -> None:
    """Check the attribute rules of docs/operators.md §1.3; ``num_experts`` enables the E-dependent ones."""
    k, kg, gc = attrs["k"], attrs["k_group"], attrs["group_count"]
    if not 1 <= k <= MAX_K:
        raise _err(f"attribute 'k' must be in [1, {MAX_K}], got {k}")
    if gc < 1:
        raise _err(f"attribute 'group_count' must be >= 1, got {gc}")
    if not 1 <= kg <= gc:
        raise _err(f"attribute 'k_group' must be in [1, group_count ({gc})], got {kg}")
    for name, allowed in (("group_select_mode", (0, 1)), ("norm_type", (0, 1, 2)),
                          ("renorm", (0, 1)), ("out_flag", (0, 1))):
        if attrs[name] not in allowed:
            raise _err(f"attribute '{name}' must be one of {list(allowed)}, got {attrs[name]}")
    eps, rsf = float(attrs["eps"]), float(attrs["routed_scaling_factor"])
    if not (np.isfinite(eps) and eps >= 0):
        raise _err(f"attribute 'eps' must be finite and >= 0, got {common.fmt(eps)}")
    if not np.isfinite(rsf):
        raise _err(f"attribute 'routed_scaling_factor' must be finite, got {common.fmt(rsf)}")
    if num_experts is None:
        return
    E = num_experts
    if not 1 <= E <= MAX_EXPERTS:
        raise _err(f"input 'x' last dimension E must be in [1, {MAX_EXPERTS}], got {E}")
    if k > E:
        raise _err(f"attribute 'k' must be <= E ({E}), got {k}")
    if E % gc != 0:
        raise _err(f"attribute 'group_count' must divide E ({E}), got {gc}")
    per_group = E // gc
    if k > kg * per_group:
        raise _err(f"attribute 'k' must be <= k_group * E / group_count ({kg * per_group}), got {k}")
    if attrs["group_select_mode"] == 1 and grouping_effective(attrs) and per_group < 2:
        raise _err(
            f"attribute 'group_select_mode' 1 needs E / group_count >= 2, got E / group_count = {per_group}"
        )


def grouping_effective(attrs: dict[str, Any]) -> bool:
    """Whether group-limited selection applies (docs/operators.md §1.2 step 3)."""
    return attrs["group_count"] > 1 and attrs["k_group"] < attrs["group_count"]


def validate_inputs(x_shape: Sequence[common.Dim], x_dtype: str, inputs: dict[str, tuple | None],
                    attrs: dict[str, Any]) -> None:
    """Check shapes and dtypes of docs/operators.md §1.3. ``inputs[name] = (shape, dtype_name)`` or None.

    dtype names are ONNX-style: 'float', 'float16', 'bfloat16', 'int32', 'int64', 'bool'. A dim
    that is not an int (None, or a symbolic size of a torch fake tensor) is unknown: the rules
    that need it are skipped.
    """
    x_shape = tuple(x_shape)
    if len(x_shape) < 2:
        raise _err(f"input 'x' must have rank >= 2, got shape {common.shape_text(x_shape)}")
    if x_dtype not in FLOAT_TYPES:
        raise _err(f"input 'x' must be {common.type_list(FLOAT_TYPES)}, got {x_dtype}")
    E = x_shape[-1] if common.known(x_shape[-1]) else None
    R = _numel(x_shape[:-1])
    validate_attributes(attrs, E)
    for name in ("bias", "additional_bias"):
        spec = inputs.get(name)
        if spec is None:
            continue
        shape, dtype = spec
        if len(shape) != 1 or (E is not None and common.known(shape[0]) and shape[0] != E):
            raise _err(f"input '{name}' must have shape [E] = [{E}], got {common.shape_text(shape)}")
        if dtype != x_dtype:
            raise _err(f"input '{name}' must have the type of x ({x_dtype}), got {dtype}")
    ids, table = inputs.get("input_ids"), inputs.get("tid2eid")
    if (ids is None) != (table is None):
        given, missing = ("input_ids", "tid2eid") if table is None else ("tid2eid", "input_ids")
        raise _err(f"input '{given}' needs input '{missing}' (hash routing uses both), got only '{given}'")
    if table is not None and ids is not None:
        (tshape, tdtype), (ishape, idtype) = table, ids
        if len(tshape) != 2 or (common.known(tshape[1]) and tshape[1] != attrs["k"]):
            raise _err(f"input 'tid2eid' must have shape [n, k={attrs['k']}], got {common.shape_text(tshape)}")
        if tdtype not in TABLE_TYPES:
            raise _err(f"input 'tid2eid' must be {common.type_list(TABLE_TYPES)}, got {tdtype}")
        if idtype not in ID_TYPES:
            raise _err(f"input 'input_ids' must be {common.type_list(ID_TYPES)}, got {idtype}")
        if None not in (R, _numel(ishape)) and _numel(ishape) != R:
            raise _err(f"input 'input_ids' must have R = {R} elements, got shape {common.shape_text(ishape)}")
        if grouping_effective(attrs):
            raise _err(
                f"hash routing (input 'tid2eid') cannot be combined with group-limited selection, "
                f"got group_count={attrs['group_count']}, k_group={attrs['k_group']}"
            )
    mask = inputs.get("additional_token_mask")
    if mask is not None:
        if inputs.get("additional_bias") is None:
            raise _err("input 'additional_token_mask' needs input 'additional_bias', got the mask alone")
        mshape, mdtype = mask
        if mdtype != "bool":
            raise _err(f"input 'additional_token_mask' must be bool, got {mdtype}")
        if None not in (R, _numel(mshape)) and _numel(mshape) != R:
            raise _err(f"input 'additional_token_mask' must have R = {R} elements, "
                       f"got shape {common.shape_text(mshape)}")


def validate_hash_values(ids_used: np.ndarray, rows: np.ndarray, table_used: np.ndarray, n: int, E: int) -> None:
    """Check that the used token ids lie in [0, n) and the used table entries in [0, E).

    ``ids_used`` are the ids of the hash rows (row numbers in ``rows``); ``table_used`` the
    table rows they select.
    """
    bad = np.flatnonzero((ids_used < 0) | (ids_used >= n))
    if bad.size:
        i = bad[0]
        raise _err(f"input 'input_ids' value at row {int(rows[i])} is out of range [0, {n}), got {int(ids_used[i])}")
    bad_rows, bad_cols = np.nonzero((table_used < 0) | (table_used >= E))
    if bad_rows.size:
        r, c = bad_rows[0], bad_cols[0]
        raise _err(
            f"input 'tid2eid' entry [{int(ids_used[r])}, {int(c)}] (used by row {int(rows[r])}) is out of "
            f"range [0, {E}), got {int(table_used[r, c])}"
        )


# ---- NumPy reference (docs/operators.md §1.2) -------------------------------------------------------------


def _rank_key(b: np.ndarray) -> np.ndarray:
    """float64 sort key: numbers keep their order, -inf below them, NaN below -inf.

    -inf (float64) itself is left free for experts that are not candidates at all.
    """
    key = b.astype(np.float64)
    key[np.isneginf(b)] = -1e300
    key[np.isnan(b)] = -1e301
    return key


def normalise(x2: np.ndarray, norm_type: int) -> np.ndarray:
    """Scores s of docs/operators.md §1.2 step 1, in float32, for rows of float32 logits."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        if norm_type == NORM_SOFTMAX:
            e = np.exp(x2 - x2.max(axis=-1, keepdims=True))
            return e * (np.float32(1) / e.sum(axis=-1, keepdims=True, dtype=np.float32))
        e = np.exp(-np.abs(x2))  # <= 1: the forms below stay accurate where e^x underflows
        if norm_type == NORM_SIGMOID:
            return np.where(x2 < 0, e, np.float32(1)) / (np.float32(1) + e)
        # below -17, log1p(e) = e in float32 and sqrt(e) = e^(x/2), normal down to x = -174
        return np.where(x2 < np.float32(-17), np.exp(x2 * np.float32(0.5)),
                        np.sqrt(np.maximum(x2, np.float32(0)) + np.log1p(e)))


def select_top_k(b: np.ndarray, attrs: dict[str, Any]) -> np.ndarray:
    """Expert indices of docs/operators.md §1.2 steps 3-4 for rows of selection scores ``b`` [R, E]."""
    R, E = b.shape
    key = _rank_key(b)
    if grouping_effective(attrs) and R:
        G = attrs["group_count"]
        P = E // G
        gkey = key.reshape(R, G, P)
        order = np.argsort(-gkey, axis=-1, kind="stable")
        top = np.take_along_axis(b.reshape(R, G, P), order[..., :2], axis=-1)
        # mode 1 ranks groups by the float32 sum of their top two, as the kernels do
        score = _rank_key(top[..., 0] if attrs["group_select_mode"] == 0 else top[..., 0] + top[..., 1])
        kept = np.argsort(-score, axis=-1, kind="stable")[:, : attrs["k_group"]]
        allowed = np.zeros((R, G), dtype=bool)
        np.put_along_axis(allowed, kept, True, axis=-1)
        key[~np.repeat(allowed, P, axis=1)] = -np.inf
    return np.argsort(-key, axis=-1, kind="stable")[:, : attrs["k"]]


def reference(
    x: np.ndarray,
    bias: np.ndarray | None = None,
    input_ids: np.ndarray | None = None,
    tid2eid: np.ndarray | None = None,
    additional_bias: np.ndarray | None = None,
    additional_token_mask: np.ndarray | None = None,
    **attributes: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Compute ``(y, expert_idx, out)`` of docs/operators.md §1.2 with NumPy (float32 arithmetic)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    common.check_required_inputs(SCHEMA, [x is not None])
    x = np.asarray(x)
    given = {
        "bias": bias, "input_ids": input_ids, "tid2eid": tid2eid,
        "additional_bias": additional_bias, "additional_token_mask": additional_token_mask,
    }
    validate_inputs(
        x.shape, common.onnx_type_name(x.dtype),
        {n: None if a is None else (np.shape(a), common.onnx_type_name(np.asarray(a).dtype)) for n, a in given.items()},
        attrs,
    )
    E, k = x.shape[-1], attrs["k"]
    lead = x.shape[:-1]
    x2 = x.reshape(-1, E).astype(np.float32)
    R = x2.shape[0]
    s = normalise(x2, attrs["norm_type"])

    mask = None
    if additional_token_mask is not None:
        mask = np.asarray(additional_token_mask).reshape(R)
    b = s if bias is None else s + np.asarray(bias).astype(np.float32)
    if mask is not None:
        b = np.where(mask[:, None], s + np.asarray(additional_bias).astype(np.float32), b)

    idx = select_top_k(b, attrs)
    if tid2eid is not None:
        table = np.asarray(tid2eid)
        hash_rows = np.ones(R, dtype=bool) if mask is None else ~mask
        rows = np.flatnonzero(hash_rows)
        ids = np.asarray(input_ids).reshape(R)[rows].astype(np.int64)
        in_range = (ids >= 0) & (ids < table.shape[0])
        if table.shape[0]:
            table_used = table[np.where(in_range, ids, 0)].astype(np.int64)
        else:  # an empty table: every id is out of range (reported below)
            table_used = np.zeros((rows.size, k), np.int64)
        validate_hash_values(ids, rows, table_used, table.shape[0], E)
        idx[rows] = table_used

    w = np.take_along_axis(s, idx, axis=-1)
    if attrs["norm_type"] != NORM_SOFTMAX or attrs["renorm"] == 1:
        w = w / (w.sum(axis=-1, keepdims=True, dtype=np.float32) + np.float32(attrs["eps"]))
    w = w * np.float32(attrs["routed_scaling_factor"])
    y = w.astype(x.dtype).reshape(*lead, k)
    expert_idx = idx.astype(np.int32).reshape(*lead, k)
    out = s.reshape(x.shape) if attrs["out_flag"] else np.zeros((0,), np.float32)
    return y, expert_idx, out.astype(np.float32)
