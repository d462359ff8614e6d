"""MoeTokenUnpermute (docs/operators.md §6): ONNX schema, shape inference, validation and NumPy reference.

The inverse of a token permute, weighted: each token's K rows, found through ``sorted_indices``
(token-major: entry i * K + k is the permuted row of token i's slot k), are scaled by the token's
probabilities and summed. The arithmetic is MoeFinalizeRoutingV2's (``weighted_gather``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common
from .moe_finalize_routing_v2 import infer_weighted_gather, weighted_gather

OP_TYPE = "MoeTokenUnpermute"

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Un-permutes and combines tokens: unpermuted_tokens[i] = sum_k probs[i, k] * "
        "permuted_tokens[sorted_indices[i * K + k]]; an index >= permuted_tokens.shape[0] (a row "
        "dropped by the permute) and a probability of 0 add nothing."
    ),
    inputs=[
        common.tensor_input("permuted_tokens", "T", "Permuted rows [P, H]."),
        common.tensor_input("sorted_indices", "TI", "Permuted row of each (token, slot), token-major [N*K]."),
        common.tensor_input("probs", "TS", "Routing weights [N, K]; absent: K = 1, weight 1.", optional=True),
    ],
    outputs=[common.tensor_input("unpermuted_tokens", "T", "Combined rows [N, H].")],
    type_constraints=[
        ("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Row type."),
        ("TI", ["tensor(int32)", "tensor(int64)"], "Index type."),
        ("TS", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Weight type."),
    ],
    attributes=[
        common.attribute("padded_mode", 0, "Only 0: the Ascend operator supports no padded mode."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES: list[tuple] = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"permuted_tokens": (TensorProto.BFLOAT16, ["P", "H"]), "sorted_indices": (TensorProto.INT32, ["NK"]),
      "probs": (TensorProto.FLOAT, ["N", "K"])}, {}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
ROW_TYPES = common.allowed_types(SCHEMA, "T")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


# ---- validation (docs/operators.md §6.3); messages as ort_custom_ops/src/moe_token_unpermute_validate.cc ----


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check padded_mode."""
    if attrs["padded_mode"] != 0:
        raise _err(f"attribute 'padded_mode' must be 0 (the Ascend operator has no padded mode), "
                   f"got {attrs['padded_mode']}")


def validate_inputs(inputs: dict[str, tuple | None], attrs: dict[str, Any]) -> tuple:
    """Check attributes, types, ranks and dims; returns ``(N, K, P, H)`` (None where unknown)."""
    validate_attributes(attrs)
    common.check_types(SCHEMA, inputs)
    tokens, indices = inputs.get("permuted_tokens"), inputs.get("sorted_indices")
    for name, spec in (("permuted_tokens", tokens), ("sorted_indices", indices)):
        if spec is None:
            raise _err(f"input '{name}' is required, got none")
    assert tokens is not None and indices is not None  # for mypy: the loop above raised otherwise
    t_shape = tuple(tokens[0])
    if len(t_shape) != 2:
        raise _err(f"input 'permuted_tokens' must be 2-D [P, H], got shape {common.shape_text(t_shape)}")
    P, H = t_shape
    i_shape = tuple(indices[0])
    if len(i_shape) != 1:
        raise _err(f"input 'sorted_indices' must be 1-D [N*K], got shape {common.shape_text(i_shape)}")
    probs = inputs.get("probs")
    if probs is None:
        return i_shape[0], 1, P, H
    p_shape = tuple(probs[0])
    if len(p_shape) != 2 or (common.known(p_shape[1]) and p_shape[1] < 1):
        raise _err(f"input 'probs' must be 2-D [N, K] with K >= 1, got shape {common.shape_text(p_shape)}")
    N, K = p_shape
    if common.known(N, K, i_shape[0]) and i_shape[0] != N * K:
        raise _err(f"input 'sorted_indices' must have N*K = {N * K} elements (N = {N}, K = {K} from probs), "
                   f"got shape {common.shape_text(i_shape)}")
    return N, K, P, H


def index_limit(N: int, K: int, P: int) -> int:
    """Exclusive upper bound of sorted_indices: max(P, N*K) (values in [P, N*K) are dropped rows)."""
    return max(P, N * K)


def read_slots(sorted_indices: np.ndarray, probs: np.ndarray | None) -> np.ndarray:
    """bool [N*K]: the slots whose row is read, i.e. all but those of probability 0 (as on Ascend,
    their index is neither read nor checked: vllm-ascend passes -1 there for experts of other ranks)."""
    if probs is None:
        return np.ones(np.asarray(sorted_indices).shape, bool)
    return np.asarray(probs).reshape(-1) != 0


def validate_indices(sorted_indices: np.ndarray, N: int, K: int, P: int, probs: np.ndarray | None = None) -> None:
    """Check that every index of a read slot (see :func:`read_slots`) is in [0, max(P, N*K))."""
    idx = np.asarray(sorted_indices).astype(np.int64)
    limit = index_limit(N, K, P)
    bad = np.flatnonzero(((idx < 0) | (idx >= limit)) & read_slots(idx, probs))
    if bad.size:
        i = int(bad[0])
        raise _err(f"input 'sorted_indices' must be in [0, max(P, N*K)) = [0, {limit}) where probs is not 0, "
                   f"got {int(idx[i])} at [{i}]")


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx: InferenceContext) -> None:
    common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    infer_weighted_gather(ctx, rows=0, index=1, weights=2)


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §6.2) -------------------------------------------------------------


def reference(permuted_tokens: np.ndarray, sorted_indices: np.ndarray, probs: np.ndarray | None = None,
              **attributes: Any) -> tuple[np.ndarray]:
    """``(unpermuted_tokens,)`` of docs/operators.md §6.2. Attribute: ``padded_mode`` (only 0)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    tokens, idx = np.asarray(permuted_tokens), np.asarray(sorted_indices)
    probs = None if probs is None else np.asarray(probs)
    N, K, P, H = validate_inputs({"permuted_tokens": (tokens.shape, common.onnx_type_name(tokens.dtype)),
                                  "sorted_indices": (idx.shape, common.onnx_type_name(idx.dtype)),
                                  "probs": (None if probs is None
                                            else (probs.shape, common.onnx_type_name(probs.dtype)))},
                                 attrs)
    validate_indices(idx, N, K, P, probs)
    slot_rows = idx.astype(np.int64).reshape(N, K)
    # dropped by the permute (>= P) or not read (probability 0): a zero row
    slot_rows = np.where((slot_rows >= P) | ~read_slots(idx, probs).reshape(N, K), -1, slot_rows)
    y = weighted_gather(tokens, slot_rows, probs, [], skip_zero_weight=True)
    return (y.astype(tokens.dtype),)

