"""MoeInitRoutingV3 (docs/operators.md, MoeInitRoutingV3): ONNX schema, shape inference, validation and
NumPy reference. ``torch_npu.npu_moe_init_routing_v2`` runs this GE op (aclnnMoeInitRoutingV3).

The (token, slot) pairs of ``expert_idx`` [N, K], flat position ``p = token * K + slot``, are
sorted stably by expert; pairs whose expert lies outside the active range [start, end) are
dropped. Dropless mode (drop_pad_mode 0) writes the sorted rows one after the other; drop/pad mode
(1) gives every expert ``expert_capacity`` rows, drops the pairs past it and pads with zeros.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import numpy as np
from onnx import TensorProto, TensorShapeProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "MoeInitRoutingV3"

LIMITS = {"MAX_PAIRS": 2**31 - 1}  # expanded_row_idx is int32 (generated into attr_defaults.gen.h)
MAX_PAIRS = LIMITS["MAX_PAIRS"]

DROPLESS, DROP_PAD = 0, 1
CUMSUM, COUNT, KEY_VALUE = 0, 1, 2
NO_QUANT, STATIC_QUANT, DYNAMIC_QUANT = -1, 0, 1
GATHER, SCATTER = 0, 1  # row_idx_type, named as the Ascend docs name them (see reference())

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "MoE init routing: sorts the (token, slot) pairs of expert_idx stably by expert, keeps the "
        "experts in the active range, and returns the token rows in that order (optionally int8 "
        "quantised), the row mapping, the per-expert token counts and the per-row scales."
    ),
    inputs=[
        common.tensor_input("x", "TX", "Token rows [N, H]."),
        common.tensor_input("expert_idx", "TI", "Experts of each token [N, K]."),
        common.tensor_input("scale", "tensor(float)",
                            "quant_mode -1: per-token scale [N] (gathered like the rows); 0: [1]; "
                            "1: smoothing scale [end - start, H] or [1, H].", optional=True),
        common.tensor_input("offset", "tensor(float)", "quant_mode 0: offset [1]; absent otherwise.", optional=True),
    ],
    outputs=[
        common.tensor_input("expanded_x", "TY",
                            "Sorted rows: dropless [R, H] (R = N*K, or min(active_num, N*K) when "
                            "active_num > 0); drop/pad [expert_num, expert_capacity, H]. int8 when quant_mode >= 0."),
        common.tensor_input("expanded_row_idx", "tensor(int32)",
                            "[N*K]; row_idx_type 0: the expanded row of pair p (-1 if dropped); "
                            "1: the pair of expanded row i (-1 past the kept pairs)."),
        common.tensor_input("expert_tokens_count_or_cumsum", "tensor(int64)",
                            "Pairs per active expert [end - start] (type 1), their inclusive prefix sums "
                            "(type 0), or (expert, count) rows of the non-empty experts [expert_num, 2] (type 2)."),
        common.tensor_input("expanded_scale", "tensor(float)",
                            "Per expanded row [R] (drop/pad: [expert_num * expert_capacity]): the gathered "
                            "scale (quant_mode -1), the dynamic quantisation scale (1), else 0."),
    ],
    type_constraints=[
        ("TX", [f"tensor({t})" for t in ("float", "float16", "bfloat16", "int8")], "Token type."),
        ("TI", ["tensor(int32)", "tensor(int64)"], "Expert id type."),
        ("TY", [f"tensor({t})" for t in ("float", "float16", "bfloat16", "int8")],
         "Type of expanded_x: x's type without quantisation, int8 with it."),
    ],
    attributes=[
        common.attribute("active_num", -1, "Dropless: rows of expanded_x (-1 or 0 = N*K; else min(active_num, N*K))."),
        common.attribute("expert_capacity", -1, "Drop/pad: rows per expert (>= 1); ignored when dropless."),
        common.attribute("expert_num", -1, "Number of experts E (>= 1); expert ids must lie in [0, E)."),
        common.attribute("drop_pad_mode", DROPLESS, "0 = dropless; 1 = drop/pad to expert_capacity."),
        common.attribute("expert_tokens_num_type", CUMSUM,
                         "0 = cumulative counts; 1 = counts; 2 = (expert, count) pairs."),
        common.attribute("expert_tokens_num_flag", 0,
                         "torch_npu's flag (0/1); expert_tokens_count_or_cumsum is computed in either case."),
        common.attribute("quant_mode", NO_QUANT, "-1 = none; 0 = static int8; 1 = dynamic per-row int8."),
        common.attribute("active_expert_start", 0, "First active expert (active_expert_range[0])."),
        common.attribute("active_expert_end", -1,
                         "One past the last active expert (active_expert_range[1]); -1 = expert_num."),
        common.attribute("row_idx_type", GATHER,
                         "0 = expanded row per pair (gather index); 1 = pair per expanded row."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.BFLOAT16, ["N", "H"]), "expert_idx": (TensorProto.INT32, ["N", "K"])},
     {"expert_num": 256, "active_expert_start": 32, "active_expert_end": 64, "expert_tokens_num_type": 1}),
    ({"x": (TensorProto.BFLOAT16, [4, 7168]), "expert_idx": (TensorProto.INT32, [4, 8]),
      "scale": (TensorProto.FLOAT, [1, 7168])}, {"expert_num": 256, "quant_mode": 1, "active_num": 16}),
    ({"x": (TensorProto.FLOAT16, ["N", "H"]), "expert_idx": (TensorProto.INT32, ["N", "K"])},
     {"expert_num": 8, "drop_pad_mode": 1, "expert_capacity": 32, "expert_tokens_num_type": 1}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
X_TYPES = common.allowed_types(SCHEMA, "TX")
IDX_TYPES = common.allowed_types(SCHEMA, "TI")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def expert_range(attrs: dict[str, Any]) -> tuple[int, int]:
    """The active range [start, end) with end = -1 resolved to expert_num."""
    end = attrs["active_expert_end"]
    return attrs["active_expert_start"], attrs["expert_num"] if end == -1 else end


# ---- validation, shared by the NumPy reference, the torch op and (same messages) the C++ kernel ------


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check every attribute and the combinations the operator defines."""
    E = attrs["expert_num"]
    if E < 1:
        raise _err(f"attribute 'expert_num' must be >= 1, got {E}")
    if attrs["drop_pad_mode"] not in (DROPLESS, DROP_PAD):
        raise _err(f"attribute 'drop_pad_mode' must be 0 (dropless) or 1 (drop/pad), got {attrs['drop_pad_mode']}")
    if attrs["expert_tokens_num_type"] not in (CUMSUM, COUNT, KEY_VALUE):
        raise _err("attribute 'expert_tokens_num_type' must be 0 (cumsum), 1 (count) or 2 (key_value), "
                   f"got {attrs['expert_tokens_num_type']}")
    if attrs["expert_tokens_num_flag"] not in (0, 1):
        raise _err(f"attribute 'expert_tokens_num_flag' must be 0 or 1, got {attrs['expert_tokens_num_flag']}")
    if attrs["quant_mode"] not in (NO_QUANT, STATIC_QUANT, DYNAMIC_QUANT):
        raise _err("attribute 'quant_mode' must be -1 (none), 0 (static int8) or 1 (dynamic int8), got "
                   f"{attrs['quant_mode']} (the MXFP8/HIF8/MXFP4/FP8/INT4 modes are not supported)")
    if attrs["row_idx_type"] not in (GATHER, SCATTER):
        raise _err(f"attribute 'row_idx_type' must be 0 (gather) or 1 (scatter), got {attrs['row_idx_type']}")
    if attrs["active_num"] < -1:
        raise _err(f"attribute 'active_num' must be >= -1, got {attrs['active_num']}")
    start, end = attrs["active_expert_start"], attrs["active_expert_end"]
    if start < 0:
        raise _err(f"attribute 'active_expert_start' must be >= 0, got {start}")
    if end != -1 and not start < end <= E:
        raise _err(f"attribute 'active_expert_end' must be -1 or in (active_expert_start, expert_num] = "
                   f"({start}, {E}], got {end}")
    if end == -1 and start >= E:
        raise _err(f"attribute 'active_expert_start' must be < expert_num = {E}, got {start}")
    if attrs["drop_pad_mode"] == DROP_PAD:
        if attrs["expert_capacity"] < 1:
            raise _err(f"attribute 'expert_capacity' must be >= 1 when drop_pad_mode is 1, "
                       f"got {attrs['expert_capacity']}")
        if attrs["expert_capacity"] > MAX_PAIRS // E:
            raise _err(f"attribute 'expert_capacity' must be at most {MAX_PAIRS // E} (expert_num * expert_capacity "
                       f"rows, indexed by int32), got {attrs['expert_capacity']}")
        if attrs["expert_tokens_num_type"] != COUNT:
            raise _err("attribute 'expert_tokens_num_type' must be 1 (count) when drop_pad_mode is 1, "
                       f"got {attrs['expert_tokens_num_type']}")
        if attrs["row_idx_type"] != GATHER:
            raise _err(f"attribute 'row_idx_type' must be 0 when drop_pad_mode is 1, got {attrs['row_idx_type']}")
        if expert_range(attrs) != (0, E):
            raise _err(f"the active expert range must be [0, expert_num) = [0, {E}) when drop_pad_mode is 1, "
                       f"got [{start}, {end})")


def check_presence(present: Collection[str], attrs: dict[str, Any]) -> None:
    """The rules of which optional inputs go together (known from the node alone: the function
    body checks them when it is built): scale and offset with static quantisation, offset only then."""
    quant = attrs["quant_mode"]
    if quant == STATIC_QUANT:
        for name in ("scale", "offset"):
            if name not in present:
                raise _err(f"input '{name}' is required when quant_mode is 0")
    elif "offset" in present:
        raise _err(f"input 'offset' must be absent when quant_mode is {quant}")


def validate_inputs(x: tuple, expert_idx: tuple, scale: tuple | None, offset: tuple | None,
                    attrs: dict[str, Any]) -> None:
    """Check attributes, ranks, dims and types; each input is ``(shape, onnx type name)`` or None
    (absent). Unknown dims (None) are not checked; expert id values by :func:`validate_expert_ids`."""
    validate_attributes(attrs)
    N, H = common.token_rows(OP_TYPE, "x", x, X_TYPES)
    i_shape, i_type = expert_idx
    if i_type not in IDX_TYPES:
        raise _err(f"input 'expert_idx' must be {common.type_list(IDX_TYPES)}, got {i_type}")
    if len(i_shape) != 2:
        raise _err(f"input 'expert_idx' must be 2-D [N, K], got shape {common.shape_text(i_shape)}")
    if common.known(N) and common.known(i_shape[0]) and i_shape[0] != N:
        raise _err(f"input 'expert_idx' must have N = {N} rows (x.shape[0]), got shape {common.shape_text(i_shape)}")
    K = i_shape[1]
    if common.known(K) and K < 1:
        raise _err(f"input 'expert_idx' must have K >= 1, got shape {common.shape_text(i_shape)}")
    if common.known(N) and common.known(K) and N * K > MAX_PAIRS:
        raise _err(f"input 'expert_idx' must have at most {MAX_PAIRS} elements (expanded_row_idx is "
                   f"int32), got N*K = {N * K}")
    quant = attrs["quant_mode"]
    if quant != NO_QUANT and x[1] == "int8":
        raise _err(f"input 'x' must be float, float16 or bfloat16 when quant_mode is {quant}, got int8")
    for name, desc in (("scale", scale), ("offset", offset)):
        if desc is not None and desc[1] != "float":
            raise _err(f"input '{name}' must be float, got {desc[1]}")
    check_presence({n for n, d in (("scale", scale), ("offset", offset)) if d is not None}, attrs)
    if quant == STATIC_QUANT:
        for name, desc in (("scale", scale), ("offset", offset)):
            assert desc is not None  # check_presence
            if len(desc[0]) != 1 or (common.known(desc[0][0]) and desc[0][0] != 1):
                raise _err(f"input '{name}' must have shape [1] when quant_mode is 0, "
                           f"got shape {common.shape_text(desc[0])}")
        return
    if scale is None:
        return
    s_shape = scale[0]
    if quant == NO_QUANT:
        if len(s_shape) != 1 or (common.known(N) and common.known(s_shape[0]) and s_shape[0] != N):
            raise _err(f"input 'scale' must have shape [N] = [{'?' if not common.known(N) else N}] when quant_mode "
                       f"is -1, got shape {common.shape_text(s_shape)}")
        return
    start, end = expert_range(attrs)
    rows_ok = len(s_shape) == 2 and (not common.known(s_shape[0]) or s_shape[0] in (1, end - start))
    if not rows_ok or (common.known(H) and common.known(s_shape[1]) and s_shape[1] != H):
        raise _err(f"input 'scale' must have shape [{end - start}, H] or [1, H] (H = "
                   f"{H if common.known(H) else '?'}) when quant_mode is 1, got shape {common.shape_text(s_shape)}")


def validate_expert_ids(expert_idx: np.ndarray, expert_num: int) -> None:
    """Every expert id must lie in [0, expert_num)."""
    e = np.asarray(expert_idx)
    bad = np.argwhere((e < 0) | (e >= expert_num))
    if bad.size:
        n, k = (int(v) for v in bad[0])
        raise _err(f"input 'expert_idx' must hold expert ids in [0, expert_num) = [0, {expert_num}), "
                   f"got {int(e[n, k])} at [{n}, {k}]")


# ---- output shapes ------------------------------------------------------------------------------


def expanded_rows(num_pairs: common.Dim, active_num: int) -> common.Dim:
    """Rows R of expanded_x in dropless mode (works on ints and torch SymInts)."""
    if active_num <= 0:
        return num_pairs
    if common.known(num_pairs):
        return min(active_num, int(num_pairs))
    import torch  # a SymInt: only the torch front end passes one

    return torch.sym_min(active_num, num_pairs)


def counts_shape(attrs: dict[str, Any]) -> list[int]:
    """Shape of expert_tokens_count_or_cumsum."""
    start, end = expert_range(attrs)
    return [attrs["expert_num"], 2] if attrs["expert_tokens_num_type"] == KEY_VALUE else [end - start]


def dim_product(a: TensorShapeProto.Dimension | None, b: TensorShapeProto.Dimension | None) -> int | str | None:
    """The product of two inferred dims: an int, an ``"N*K"`` name when a factor is symbolic, or None."""
    def part(d: TensorShapeProto.Dimension | None) -> int | str | None:
        if d is None:
            return None
        if d.HasField("dim_value"):
            return d.dim_value
        return d.dim_param or None

    pa, pb = part(a), part(b)
    if pa is None or pb is None:
        return None
    if isinstance(pa, int) and isinstance(pb, int):
        return pa * pb
    return f"{pa}*{pb}"


def _infer(ctx: InferenceContext) -> None:
    attrs = common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    x, idx = common.input_type(ctx, 0), common.input_type(ctx, 1)
    x_dims, i_dims = common.input_dims(x), common.input_dims(idx)
    common.check_rank(OP_TYPE, "x", x_dims, "[N, H]")
    common.check_rank(OP_TYPE, "expert_idx", i_dims, "[N, K]")

    n = x_dims[0] if x_dims else (i_dims[0] if i_dims else None)
    pairs = dim_product(n, i_dims[1] if i_dims else None)
    h = x_dims[1] if x_dims else None
    x_out: list[Any]
    scale_out: list[Any]
    if attrs["drop_pad_mode"] == DROP_PAD:
        E, C = attrs["expert_num"], attrs["expert_capacity"]
        x_out, scale_out = [E, C, h], [E * C]
    else:
        rows = pairs if attrs["active_num"] <= 0 else (
            min(attrs["active_num"], pairs) if isinstance(pairs, int) else None)
        x_out, scale_out = [rows, h], [rows]
    if x is not None:
        elem = x.tensor_type.elem_type if attrs["quant_mode"] == NO_QUANT else TensorProto.INT8
        ctx.set_output_type(0, common.make_type(elem, x_out))
    n_out = ctx.get_num_outputs()
    if n_out > 1:
        ctx.set_output_type(1, common.make_type(common.INT32, [pairs]))
    if n_out > 2:
        ctx.set_output_type(2, common.make_type(TensorProto.INT64, counts_shape(attrs)))
    if n_out > 3:
        ctx.set_output_type(3, common.make_type(TensorProto.FLOAT, scale_out))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference ----------------------------------------------------------------------------


def sort_pairs(expert_idx: np.ndarray, start: int, end: int) -> tuple[np.ndarray, int]:
    """``(order, available)``: the flat pair positions sorted stably by expert with the pairs of
    active experts first; ``available`` = how many pairs have an active expert."""
    flat = np.asarray(expert_idx, dtype=np.int64).reshape(-1)
    active = (flat >= start) & (flat < end)
    key = np.where(active, flat, np.iinfo(np.int64).max)
    return np.argsort(key, kind="stable"), int(active.sum())


def expert_counts(expert_idx: np.ndarray, start: int, end: int) -> np.ndarray:
    """int64 [end - start]: pairs per active expert."""
    flat = np.asarray(expert_idx, dtype=np.int64).reshape(-1)
    flat = flat[(flat >= start) & (flat < end)]
    return np.bincount(flat - start, minlength=end - start).astype(np.int64)


def _count_output(counts: np.ndarray, attrs: dict[str, Any], start: int) -> np.ndarray:
    t = attrs["expert_tokens_num_type"]
    if t == COUNT:
        return counts
    if t == CUMSUM:
        return np.cumsum(counts).astype(np.int64)
    out = np.zeros((attrs["expert_num"], 2), np.int64)
    nz = np.flatnonzero(counts)
    out[: nz.size, 0] = nz + start
    out[: nz.size, 1] = counts[nz]
    return out


def _round_half_even_int8(v: np.ndarray) -> np.ndarray:
    """Round half to even and saturate; NaN is 0 (no int8 stands for it)."""
    return np.where(np.isnan(v), 0, np.clip(np.rint(v), -128, 127)).astype(np.int8)


def quantize_static(rows: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    """int8 rows = round_half_even(rows * scale + offset), every step in float16 arithmetic."""
    h = rows.astype(np.float32).astype(np.float16)
    v = (h * scale.astype(np.float16)[0]) + offset.astype(np.float16)[0]
    return _round_half_even_int8(v.astype(np.float32))


def quantize_dynamic(rows: np.ndarray, smooth: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(int8 rows, scales)``: per row s = max|r| / 127 and q = round_half_even(r / s), where
    r = row * smooth (float32) when smoothing rows are given. An all-zero row gives s = 0, q = 0."""
    r = rows.astype(np.float32)
    if smooth is not None:
        with np.errstate(invalid="ignore", over="ignore"):
            r = (r * smooth).astype(np.float32)
    # np.max propagates NaN: a row holding NaN gets s = NaN and q = 0; one holding inf s = inf
    s = (np.max(np.abs(r), axis=1) / np.float32(127)).astype(np.float32) if r.shape[1] else \
        np.zeros(r.shape[0], np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s[:, None] > 0, r / np.where(s > 0, s, 1)[:, None], 0).astype(np.float32)
    return _round_half_even_int8(q), s


def _expand(x: np.ndarray, src_rows: np.ndarray, row_experts: np.ndarray, scale: np.ndarray | None,
            offset: np.ndarray | None, attrs: dict[str, Any], start: int) -> tuple[np.ndarray, np.ndarray]:
    """Rows and scales of the expanded output for source rows ``src_rows`` (-1 = zero row)."""
    valid = src_rows >= 0
    rows = np.zeros((src_rows.size, x.shape[1]), x.dtype)
    rows[valid] = x[src_rows[valid]]
    scales = np.zeros(src_rows.size, np.float32)
    quant = attrs["quant_mode"]
    if quant == NO_QUANT:
        if scale is not None:
            scales[valid] = scale[src_rows[valid]]
        return rows, scales
    if quant == STATIC_QUANT:
        assert scale is not None and offset is not None  # validate_inputs: static quant has both
        q = quantize_static(rows, scale, offset)
        q[~valid] = 0
        return q, scales
    smooth = None
    if scale is not None:
        smooth = scale[np.clip(row_experts - start, 0, scale.shape[0] - 1)] if scale.shape[0] > 1 else \
            np.broadcast_to(scale, rows.shape)
    return quantize_dynamic(rows, smooth)


def reference(x: np.ndarray, expert_idx: np.ndarray, scale: np.ndarray | None = None,
              offset: np.ndarray | None = None, **attributes: Any) -> tuple[np.ndarray, ...]:
    """``(expanded_x, expanded_row_idx, expert_tokens_count_or_cumsum, expanded_scale)``.

    Dropless: sorted pair i < min(R, available) takes row ``x[order[i] // K]``; later rows are 0.
    row_idx_type 0: ``idx[order[i]] = i`` for i < available, -1 for dropped pairs (an index may be
    >= R when active_num cuts rows); 1: ``idx[i] = order[i]`` for i < available, then -1.
    Drop/pad: the j-th pair (in sorted order) of expert e goes to row e * C + j if j < C.
    """
    attrs = common.resolve_attributes(SCHEMA, attributes)
    x, expert_idx = np.asarray(x), np.asarray(expert_idx)
    scale = None if scale is None else np.asarray(scale)
    offset = None if offset is None else np.asarray(offset)
    desc = lambda a: None if a is None else (a.shape, common.onnx_type_name(a.dtype))  # noqa: E731
    validate_inputs((x.shape, common.onnx_type_name(x.dtype)),
                    (expert_idx.shape, common.onnx_type_name(expert_idx.dtype)),
                    desc(scale), desc(offset), attrs)
    validate_expert_ids(expert_idx, attrs["expert_num"])
    N, K = expert_idx.shape
    start, end = expert_range(attrs)
    order, available = sort_pairs(expert_idx, start, end)
    flat = expert_idx.reshape(-1).astype(np.int64)
    counts = expert_counts(expert_idx, start, end)
    row_idx = np.full(N * K, -1, np.int32)
    if attrs["drop_pad_mode"] == DROPLESS:
        R = expanded_rows(N * K, attrs["active_num"])
        kept = order[: min(R, available)]
        src = np.full(R, -1, np.int64)
        src[: kept.size] = kept // K
        experts = np.full(R, start, np.int64)
        experts[: kept.size] = flat[kept]
        rows, scales = _expand(x, src, experts, scale, offset, attrs, start)
        if attrs["row_idx_type"] == GATHER:
            row_idx[order[:available]] = np.arange(available, dtype=np.int32)
        else:
            row_idx[:available] = order[:available]
    else:
        E, C = attrs["expert_num"], attrs["expert_capacity"]
        sorted_e = flat[order[:available]]
        rank = np.arange(available) - (np.cumsum(counts) - counts)[sorted_e]
        keep = rank < C
        dest = sorted_e[keep] * C + rank[keep]
        src = np.full(E * C, -1, np.int64)
        src[dest] = order[:available][keep] // K
        experts = np.repeat(np.arange(E, dtype=np.int64), C)
        rows, scales = _expand(x, src, experts, scale, offset, attrs, start)
        rows = rows.reshape(E, C, x.shape[1])
        row_idx[order[:available][keep]] = dest.astype(np.int32)
    return rows, row_idx, _count_output(counts, attrs, start), scales

