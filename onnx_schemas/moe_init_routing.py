"""MoeInitRouting (docs/operators.md, MoeInitRouting): ONNX schema, shape inference, validation and
NumPy reference of ``torch_npu.npu_moe_init_routing(x, row_idx, expert_idx, active_num)`` (GE op
MoeInitRouting, aclnnMoeInitRouting), the first version of init routing.

Unlike MoeInitRoutingV3 it takes the row index of every (token, slot) pair as an input: the
pairs are sorted stably by expert (flat position ``p = token * K + slot``), ``row_idx[p]`` names
the pair in the outputs, and the source token of a row is ``row_idx[p] % N`` (row_idx is usually
``slot * N + token``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common
from .moe_init_routing_v3 import dim_product

OP_TYPE = "MoeInitRouting"
LIMITS = common.EXPERT_SORT_LIMITS

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "MoE init routing (first version): sorts the (token, slot) pairs stably by expert and returns "
        "the token rows in that order, the position of each pair's row index and the sorted experts."
    ),
    inputs=[
        common.tensor_input("x", "T", "Token rows [N, H]."),
        common.tensor_input("row_idx", "tensor(int32)", "Row index of each pair [N, K]: a permutation of [0, N*K)."),
        common.tensor_input("expert_idx", "tensor(int32)", "Expert of each pair [N, K]."),
    ],
    outputs=[
        common.tensor_input("expanded_x", "T", "Rows in expert order [min(N, active_num) * K, H]."),
        common.tensor_input("expanded_row_idx", "tensor(int32)",
                            "[N*K]: expanded_row_idx[row_idx of sorted pair i] = i."),
        common.tensor_input("expanded_expert_idx", "tensor(int32)", "The experts, sorted [N*K]."),
    ],
    type_constraints=[("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Token type.")],
    attributes=[common.attribute("active_num", None,
                                 "Tokens kept: expanded_x has min(N, active_num) * K rows (>= 0).")],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.FLOAT16, [10, 200]), "row_idx": (TensorProto.INT32, [10, 2]),
      "expert_idx": (TensorProto.INT32, [10, 2])}, {"active_num": 4}),
    ({"x": (TensorProto.BFLOAT16, ["N", "H"]), "row_idx": (TensorProto.INT32, ["N", "K"]),
      "expert_idx": (TensorProto.INT32, ["N", "K"])}, {"active_num": 8192}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
X_TYPES = common.allowed_types(SCHEMA, "T")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def validate_attributes(attrs: dict[str, Any]) -> None:
    """active_num >= 0."""
    if attrs["active_num"] < 0:
        raise _err(f"attribute 'active_num' must be >= 0, got {attrs['active_num']}")


def validate_inputs(x: tuple, row_idx: tuple, expert_idx: tuple, attrs: dict[str, Any]) -> None:
    """Check attributes, ranks, dims and types; each input is ``(shape, onnx type name)``."""
    validate_attributes(attrs)
    N, H = common.token_rows(OP_TYPE, "x", x, X_TYPES)
    e_shape, e_type = expert_idx
    r_shape, r_type = row_idx
    for name, t in (("row_idx", r_type), ("expert_idx", e_type)):
        if t != "int32":
            raise _err(f"input '{name}' must be int32, got {t}")
    if len(e_shape) != 2:
        raise _err(f"input 'expert_idx' must be 2-D [N, K], got shape {common.shape_text(e_shape)}")
    if common.known(N) and common.known(e_shape[0]) and e_shape[0] != N:
        raise _err(f"input 'expert_idx' must have N = {N} rows (x.shape[0]), got shape {common.shape_text(e_shape)}")
    if common.known(e_shape[1]) and e_shape[1] < 1:
        raise _err(f"input 'expert_idx' must have K >= 1, got shape {common.shape_text(e_shape)}")
    if len(r_shape) != 2 or any(common.known(a) and common.known(b) and a != b for a, b in zip(r_shape, e_shape)):
        raise _err(f"input 'row_idx' must have the shape of expert_idx {common.shape_text(e_shape)}, "
                   f"got shape {common.shape_text(r_shape)}")
    if all(common.known(d) for d in e_shape) and e_shape[0] * e_shape[1] > common.MAX_PAIRS:
        raise _err(f"input 'expert_idx' must have at most {common.MAX_PAIRS} elements, got {e_shape[0] * e_shape[1]}")


def validate_values(row_idx: np.ndarray, expert_idx: np.ndarray) -> None:
    """Expert ids in [0, 2**31 - 1); row_idx a permutation of [0, N*K)."""
    e = np.asarray(expert_idx)
    bad = np.argwhere((e < 0) | (e >= common.MAX_EXPERT_ID))
    if bad.size:
        n, k = (int(v) for v in bad[0])
        raise _err(f"input 'expert_idx' must hold expert ids in [0, {common.MAX_EXPERT_ID}), got {int(e[n, k])} "
                   f"at [{n}, {k}]")
    r = np.asarray(row_idx).astype(np.int64)
    P, flat = r.size, r.reshape(-1)
    # the first position whose value is out of range or seen before (the C++ kernel's one pass)
    repeat = np.ones(P, bool)
    repeat[np.unique(flat, return_index=True)[1]] = False
    first_bad = np.flatnonzero((flat < 0) | (flat >= P) | repeat)
    if first_bad.size:
        pos, K = int(first_bad[0]), r.shape[1]
        raise _err(f"input 'row_idx' must be a permutation of [0, N*K) = [0, {P}), got {int(flat[pos])} "
                   f"at [{pos // K}, {pos % K}]")


def expanded_rows(N: common.Dim, K: common.Dim, active_num: int) -> common.Dim:
    """min(N, active_num) * K (ints or torch SymInts)."""
    if common.known(N):
        return min(int(N), active_num) * K
    import torch

    return torch.sym_min(N, active_num) * K


def _infer(ctx: InferenceContext) -> None:
    attrs = {n: common.int_attribute(ctx, OP_TYPE, n, DEFAULTS[n]) for n in DEFAULTS if DEFAULTS[n] is not None}
    a = ctx.get_attribute("active_num")
    if a is None:
        common.fail_inference(OP_TYPE, "attribute 'active_num' is required (INT), got none")
    attrs["active_num"] = common.int_attribute(ctx, OP_TYPE, "active_num", 0)
    try:
        validate_attributes(attrs)
    except ValueError as err:
        common.fail_inference(OP_TYPE, str(err).split(": ", 1)[1])
    x, expert_idx = common.input_type(ctx, 0), common.input_type(ctx, 2)
    x_dims, e_dims = common.input_dims(x), common.input_dims(expert_idx)
    common.check_rank(OP_TYPE, "x", x_dims, "[N, H]")
    common.check_rank(OP_TYPE, "expert_idx", e_dims, "[N, K]")
    pairs = dim_product(e_dims[0], e_dims[1]) if e_dims else None
    rows = None
    if x_dims and e_dims and x_dims[0].HasField("dim_value") and e_dims[1].HasField("dim_value"):
        rows = expanded_rows(x_dims[0].dim_value, e_dims[1].dim_value, attrs["active_num"])
    if x is not None:
        ctx.set_output_type(0, common.make_type(x.tensor_type.elem_type, [rows, x_dims[1] if x_dims else None]))
    for i in (1, 2):
        if ctx.get_num_outputs() > i:
            ctx.set_output_type(i, common.make_type(common.INT32, [pairs]))


SCHEMA.set_type_and_shape_inference_function(_infer)


def reference(x: np.ndarray, row_idx: np.ndarray, expert_idx: np.ndarray,
              **attributes: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(expanded_x, expanded_row_idx, expanded_expert_idx)`` (see the module docstring)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    x, row_idx, expert_idx = np.asarray(x), np.asarray(row_idx), np.asarray(expert_idx)
    x_in, r_in, e_in = ((a.shape, common.onnx_type_name(a.dtype)) for a in (x, row_idx, expert_idx))
    validate_inputs(x_in, r_in, e_in, attrs)
    validate_values(row_idx, expert_idx)
    N, K = expert_idx.shape
    flat = expert_idx.reshape(-1)
    order = np.argsort(flat, kind="stable")
    dst_to_src = row_idx.reshape(-1)[order]
    expanded_row_idx = np.empty(N * K, np.int32)
    expanded_row_idx[dst_to_src] = np.arange(N * K, dtype=np.int32)
    rows = expanded_rows(N, K, attrs["active_num"])
    return x[dst_to_src[:rows] % max(N, 1)], expanded_row_idx, flat[order].astype(np.int32)
