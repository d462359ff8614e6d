"""MoeTokenPermute (docs/operators.md, MoeTokenPermute): ONNX schema, shape inference, validation and
NumPy reference of ``torch_npu.npu_moe_token_permute`` (aclnnMoeTokenPermute).

The flat positions ``p = token * K + slot`` of ``indices`` [N, K] (or [N], K = 1) are sorted stably
by expert id; ``permuted_tokens[i] = tokens[order[i] // K]`` for the first R sorted pairs and
``sorted_indices[p]`` is the sorted position of pair p (the inverse of the sort permutation, the
index ``npu_moe_token_unpermute`` takes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common
from .moe_init_routing_v3 import dim_product

OP_TYPE = "MoeTokenPermute"

LIMITS = common.EXPERT_SORT_LIMITS

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Groups token rows by expert: sorts the (token, slot) pairs of indices stably by expert id "
        "and returns the first num_out_tokens rows in that order and each pair's sorted position."
    ),
    inputs=[
        common.tensor_input("tokens", "T", "Token rows [N, H]."),
        common.tensor_input("indices", "TI", "Expert ids [N, K] or [N]."),
    ],
    outputs=[
        common.tensor_input("permuted_tokens", "T", "Rows in expert order [R, H]."),
        common.tensor_input("sorted_indices", "tensor(int32)", "Sorted position of each pair [N*K]."),
    ],
    type_constraints=[
        ("T", [f"tensor({t})" for t in ("float", "float16", "bfloat16", "int8")], "Token type (moved bit for bit)."),
        ("TI", ["tensor(int32)", "tensor(int64)"], "Expert id type."),
    ],
    attributes=[
        common.attribute("num_out_tokens", 0,
                         "Rows R of permuted_tokens: > 0: min(num_out_tokens, N*K); <= 0: max(N*K + num_out_tokens, 0) "
                         "(torch_npu's None is 0)."),
        common.attribute("padded_mode", 0, "torch_npu's padded_mode; only 0 (the Ascend kernel rejects 1)."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"tokens": (TensorProto.BFLOAT16, ["N", "H"]), "indices": (TensorProto.INT64, ["N", "K"])}, {}),
    ({"tokens": (TensorProto.FLOAT, [6, 64]), "indices": (TensorProto.INT32, [6, 2])}, {"num_out_tokens": 10}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
TOKEN_TYPES = common.allowed_types(SCHEMA, "T")
IDX_TYPES = common.allowed_types(SCHEMA, "TI")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check padded_mode (num_out_tokens takes any value)."""
    if attrs["padded_mode"] != 0:
        raise _err(f"attribute 'padded_mode' must be 0 (padded mode is not supported), got {attrs['padded_mode']}")


def validate_inputs(tokens: tuple, indices: tuple, attrs: dict[str, Any]) -> None:
    """Check attributes, ranks, dims and types; each input is ``(shape, onnx type name)``."""
    validate_attributes(attrs)
    N, H = common.token_rows(OP_TYPE, "tokens", tokens, TOKEN_TYPES)
    i_shape, i_type = indices
    if i_type not in IDX_TYPES:
        raise _err(f"input 'indices' must be {common.type_list(IDX_TYPES)}, got {i_type}")
    if len(i_shape) not in (1, 2):
        raise _err(f"input 'indices' must be 1-D [N] or 2-D [N, K], got shape {common.shape_text(i_shape)}")
    if common.known(N) and common.known(i_shape[0]) and i_shape[0] != N:
        raise _err(f"input 'indices' must have N = {N} rows (tokens.shape[0]), got shape {common.shape_text(i_shape)}")
    K = i_shape[1] if len(i_shape) == 2 else 1
    if common.known(K) and K < 1:
        raise _err(f"input 'indices' must have K >= 1, got shape {common.shape_text(i_shape)}")
    if common.known(N) and common.known(K) and N * K > common.MAX_PAIRS:
        raise _err(f"input 'indices' must have at most {common.MAX_PAIRS} elements (sorted_indices is int32), "
                   f"got {N * K}")


def validate_indices(indices: np.ndarray) -> None:
    """Every expert id must lie in [0, 2**31 - 1)."""
    e = np.asarray(indices)
    e = e if e.ndim == 2 else e[:, None]
    bad = np.argwhere((e < 0) | (e >= common.MAX_EXPERT_ID))
    if bad.size:
        n, k = (int(v) for v in bad[0])
        raise _err(f"input 'indices' must hold expert ids in [0, {common.MAX_EXPERT_ID}), got {int(e[n, k])} "
                   f"at [{n}, {k}]")


def out_rows(num_pairs: common.Dim, num_out_tokens: int) -> common.Dim:
    """R: min(num_out_tokens, P) when > 0, else max(P + num_out_tokens, 0) (ints or torch SymInts)."""
    if num_out_tokens > 0:
        if common.known(num_pairs):
            return min(num_out_tokens, int(num_pairs))
        import torch

        return torch.sym_min(num_out_tokens, num_pairs)
    if num_out_tokens == 0:
        return num_pairs
    if common.known(num_pairs):
        return max(int(num_pairs) + num_out_tokens, 0)
    import torch

    return torch.sym_max(num_pairs + num_out_tokens, 0)


def _infer(ctx: InferenceContext) -> None:
    attrs = common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    tokens, idx = common.input_type(ctx, 0), common.input_type(ctx, 1)
    t_dims, i_dims = common.input_dims(tokens), common.input_dims(idx)
    common.check_rank(OP_TYPE, "tokens", t_dims, "[N, H]")
    common.check_rank(OP_TYPE, "indices", i_dims, "[N]", "[N, K]")
    pairs: int | str | None = None
    if i_dims is not None and len(i_dims) == 1:
        d = i_dims[0]
        pairs = d.dim_value if d.HasField("dim_value") else (d.dim_param or None)
    elif i_dims is not None:
        pairs = dim_product(i_dims[0], i_dims[1])
    n_out = attrs["num_out_tokens"]
    rows = pairs if n_out == 0 else (out_rows(pairs, n_out) if isinstance(pairs, int) else None)
    if tokens is not None:
        ctx.set_output_type(0, common.make_type(tokens.tensor_type.elem_type, [rows, t_dims[1] if t_dims else None]))
    if ctx.get_num_outputs() > 1:
        ctx.set_output_type(1, common.make_type(common.INT32, [pairs]))


SCHEMA.set_type_and_shape_inference_function(_infer)


def reference(tokens: np.ndarray, indices: np.ndarray, **attributes: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(permuted_tokens, sorted_indices)`` (see the module docstring)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    tokens, indices = np.asarray(tokens), np.asarray(indices)
    validate_inputs((tokens.shape, common.onnx_type_name(tokens.dtype)),
                    (indices.shape, common.onnx_type_name(indices.dtype)),
                    attrs)
    validate_indices(indices)
    K = indices.shape[1] if indices.ndim == 2 else 1
    order = np.argsort(indices.reshape(-1).astype(np.int64), kind="stable")
    R = out_rows(order.size, attrs["num_out_tokens"])
    sorted_indices = np.empty(order.size, np.int32)
    sorted_indices[order] = np.arange(order.size, dtype=np.int32)
    return tokens[order[:R] // K], sorted_indices

