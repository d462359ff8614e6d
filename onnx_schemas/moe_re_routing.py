"""MoeReRouting (docs/operators.md §2): ONNX schema, shape inference, validation and NumPy reference."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "MoeReRouting"
LIMITS = {"MAX_TOKENS": 2**31 - 1}  # permute_token_idx is int32 (generated into ops_src/cpu/attr_defaults.gen.h)
MAX_TOKENS = LIMITS["MAX_TOKENS"]

# expert_token_num_type / idx_type values
CUMSUM, COUNT = 0, 1
GATHER, SCATTER = 0, 1

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Regroups the tokens an expert-parallel rank received (grouped by source rank, then local "
        "expert) by local expert, then source rank, keeping row order inside each block; also "
        "permutes the per-token scales and returns the permutation and the per-expert counts."
    ),
    inputs=[
        common.tensor_input("tokens", "TT", "Received tokens [A, H], grouped by (source rank, expert)."),
        common.tensor_input("expert_token_num_per_rank", "TC", "Rows of each (source rank, expert) block [N, E]."),
        common.tensor_input("per_token_scales", "TS", "Per-token scales [A] or [A, S].", optional=True),
    ],
    outputs=[
        common.tensor_input("permute_tokens", "TT", "Tokens grouped by (expert, source rank) [A, H]."),
        common.tensor_input("permute_per_token_scales", "TS",
                            "Scales permuted like the tokens; [0] float when per_token_scales is absent."),
        common.tensor_input("permute_token_idx", "tensor(int32)",
                            "idx_type 0: permute_tokens = tokens[idx]; 1: the inverse permutation [A]."),
        common.tensor_input("expert_token_num", "TC", "Tokens per expert (or inclusive prefix sums) [E]."),
    ],
    type_constraints=[
        ("TT", [f"tensor({t})" for t in ("float", "float16", "bfloat16", "int8", "uint8",
                                          "float8e4m3fn", "float8e5m2")],
         "Token type (moved bit for bit)."),
        ("TC", ["tensor(int32)", "tensor(int64)"], "Count type."),
        ("TS", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Scale type."),
    ],
    attributes=[
        common.attribute("expert_token_num_type", COUNT,
                         "1 = per-expert counts; 0 = inclusive cumulative counts (extension)."),
        common.attribute("idx_type", GATHER, "0 = gather index; 1 = scatter index (inverse permutation)."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES: list[tuple] = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"tokens": (TensorProto.INT8, ["A", "H"]), "expert_token_num_per_rank": (TensorProto.INT64, ["N", "E"]),
      "per_token_scales": (TensorProto.FLOAT, ["A"])}, {}),
    ({"tokens": (TensorProto.BFLOAT16, ["A", "H"]), "expert_token_num_per_rank": (TensorProto.INT32, ["N", "E"])},
     {}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
TOKEN_TYPES = common.allowed_types(SCHEMA, "TT")
COUNT_TYPES = common.allowed_types(SCHEMA, "TC")
SCALE_TYPES = common.allowed_types(SCHEMA, "TS")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


# ---- validation (docs/operators.md §2.3), shared by the NumPy reference and the torch op -------------------
# The messages are those of the C++ kernel (ort_custom_ops/src/moe_re_routing/moe_re_routing_validate.cc).


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check expert_token_num_type and idx_type (docs/operators.md §2.3)."""
    if attrs["expert_token_num_type"] not in (CUMSUM, COUNT):
        raise _err("attribute 'expert_token_num_type' must be 0 (cumulative counts) or "
                   f"1 (per-expert counts), got {attrs['expert_token_num_type']}")
    if attrs["idx_type"] not in (GATHER, SCATTER):
        raise _err(f"attribute 'idx_type' must be 0 (gather index) or 1 (scatter index), "
                   f"got {attrs['idx_type']}")


def validate_inputs(tokens: tuple, counts: tuple, scales: tuple | None, attrs: dict[str, Any]) -> None:
    """Check attributes, ranks, dims and types; each input is ``(shape, onnx type name)`` or None.

    Dims given as None (unknown) are not checked. Count values are checked by :func:`validate_counts`.
    """
    validate_attributes(attrs)
    A, H = common.token_rows(OP_TYPE, "tokens", tokens, TOKEN_TYPES, "[A, H]")
    if common.known(A) and A > MAX_TOKENS:
        raise _err(f"input 'tokens' must have at most {MAX_TOKENS} rows (permute_token_idx is "
                   f"int32), got A = {A}")
    c_shape, c_type = counts
    if c_type not in COUNT_TYPES:
        raise _err(f"input 'expert_token_num_per_rank' must be {common.type_list(COUNT_TYPES)}, got {c_type}")
    if len(c_shape) != 2:
        raise _err(f"input 'expert_token_num_per_rank' must be 2-D [N, E], got shape {common.shape_text(c_shape)}")
    if any(common.known(d) and d < 1 for d in c_shape):
        raise _err(f"input 'expert_token_num_per_rank' must have N >= 1 and E >= 1, got shape "
                   f"{common.shape_text(c_shape)}")
    if scales is not None:
        s_shape, s_type = scales
        if s_type not in SCALE_TYPES:
            raise _err(f"input 'per_token_scales' must be {common.type_list(SCALE_TYPES)}, got {s_type}")
        if len(s_shape) not in (1, 2):
            raise _err(f"input 'per_token_scales' must be 1-D [A] or 2-D [A, S], got shape "
                       f"{common.shape_text(s_shape)}")
        if common.known(A) and common.known(s_shape[0]) and s_shape[0] != A:
            raise _err(f"input 'per_token_scales' must have first dimension A = {A} "
                       f"(tokens.shape[0]), got shape {common.shape_text(s_shape)}")


def validate_counts(counts: np.ndarray, num_tokens: int) -> None:
    """Check that every count is >= 0 and that they sum exactly (no overflow) to ``num_tokens``."""
    c = np.asarray(counts)
    neg = np.argwhere(c < 0)
    if neg.size:
        r, e = (int(v) for v in neg[0])
        raise _err(f"input 'expert_token_num_per_rank' must be non-negative, got {int(c[r, e])} "
                   f"at [{r}, {e}]")
    total = sum(int(v) for v in c.reshape(-1).tolist())  # Python ints: exact
    if total != num_tokens:
        raise _err(f"input 'expert_token_num_per_rank' must sum to the token count A = {num_tokens} "
                   f"(tokens.shape[0]), got {total}")


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx: InferenceContext) -> None:
    common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    tokens = common.input_type(ctx, 0)
    counts = common.input_type(ctx, 1)
    scales = common.input_type(ctx, 2)
    t_dims = common.input_dims(tokens)
    c_dims = common.input_dims(counts)
    s_dims = common.input_dims(scales)
    common.check_rank(OP_TYPE, "tokens", t_dims, "[A, H]")
    common.check_rank(OP_TYPE, "expert_token_num_per_rank", c_dims, "[N, E]")
    common.check_rank(OP_TYPE, "per_token_scales", s_dims, "[A]", "[A, S]")
    a_dim = None if t_dims is None else t_dims[0]
    n_out = ctx.get_num_outputs()
    if tokens is not None:
        ctx.set_output_type(0, common.make_type(tokens.tensor_type.elem_type, t_dims))
    if n_out > 1:
        if scales is not None:
            ctx.set_output_type(1, common.make_type(scales.tensor_type.elem_type, s_dims))
        elif ctx.get_num_inputs() < 3 or not ctx.has_input(2):
            ctx.set_output_type(1, common.make_type(common.FLOAT, [0]))
    if n_out > 2:
        ctx.set_output_type(2, common.make_type(common.INT32, None if t_dims is None else [a_dim]))
    if n_out > 3 and counts is not None:
        ctx.set_output_type(3, common.make_type(counts.tensor_type.elem_type, None if c_dims is None else [c_dims[1]]))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §2.2) -------------------------------------------------------------

def block_offsets(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(src, dst)`` [N, E] int64: first row of each (rank, expert) block before / after (docs/operators.md §2.2)."""
    c = np.asarray(counts, dtype=np.int64)
    flat = c.reshape(-1)
    src = (np.cumsum(flat) - flat).reshape(c.shape)
    flat_t = c.T.reshape(-1)
    dst = (np.cumsum(flat_t) - flat_t).reshape(c.shape[::-1]).T
    return src, dst


def gather_index(counts: np.ndarray) -> np.ndarray:
    """int64 ``g`` [A] with ``permute_tokens = tokens[g]`` (blocks in expert-major order)."""
    c = np.asarray(counts, dtype=np.int64)
    src, dst = block_offsets(c)
    cnt = c.T.reshape(-1)  # blocks in destination order (e, r)
    start = src.T.reshape(-1)
    A = int(cnt.sum())
    return np.repeat(start - dst.T.reshape(-1), cnt) + np.arange(A, dtype=np.int64)


def reference(
    tokens: np.ndarray,
    expert_token_num_per_rank: np.ndarray,
    per_token_scales: np.ndarray | None = None,
    **attributes: Any,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``(permute_tokens, permute_per_token_scales, permute_token_idx, expert_token_num)`` of docs/operators.md §2.2.

    Attributes: ``expert_token_num_type``, ``idx_type`` (defaults from the schema).
    """
    attrs = common.resolve_attributes(SCHEMA, attributes)
    common.check_required_inputs(SCHEMA, [tokens is not None, expert_token_num_per_rank is not None])
    tokens = np.asarray(tokens)
    counts = np.asarray(expert_token_num_per_rank)
    scales = None if per_token_scales is None else np.asarray(per_token_scales)
    validate_inputs(
        (tokens.shape, common.onnx_type_name(tokens.dtype)), (counts.shape, common.onnx_type_name(counts.dtype)),
        None if scales is None else (scales.shape, common.onnx_type_name(scales.dtype)), attrs,
    )
    A = tokens.shape[0]
    validate_counts(counts, A)
    g = gather_index(counts)
    permute_tokens = tokens[g]
    permute_scales = np.zeros((0,), np.float32) if scales is None else scales[g]
    if attrs["idx_type"] == GATHER:
        idx = g.astype(np.int32)
    else:
        idx = np.empty(A, np.int32)
        idx[g] = np.arange(A, dtype=np.int32)
    per_expert = counts.astype(np.int64).sum(axis=0)
    etn = per_expert if attrs["expert_token_num_type"] == COUNT else np.cumsum(per_expert)
    return permute_tokens, permute_scales, idx, etn.astype(counts.dtype)
