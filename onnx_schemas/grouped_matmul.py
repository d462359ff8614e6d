"""GroupedMatmul (docs/operators.md §4): ONNX schema, shape inference, validation and NumPy reference.

The expert matmul of a MoE layer as torch_npu's ``npu_grouped_matmul`` computes it on the Ascend
MoE paths (one x, one stacked weight, one output: ``group_type=0``, ``split_item`` 2 or 3): the
rows of x come grouped by expert in contiguous segments, ``group_list`` gives the segments, and
each segment is multiplied by its expert's weight. Rows after the last segment are zero.

Later inputs (quantized weights' scales and offsets, per-token scales) can be appended as optional
inputs after ``bias`` without changing the meaning of existing models.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.defs import OpSchema

from ._common import (
    DOMAIN,
    OPSET_VERSION,
    allowed_types,
    attribute,
    attribute_defaults,
    fail_inference,
    inferred_int_attributes,
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

OP_TYPE = "GroupedMatmul"

# group_list_type values (torch_npu's)
CUMSUM, COUNT = 0, 1

SCHEMA = OpSchema(
    OP_TYPE,
    DOMAIN,
    OPSET_VERSION,
    doc=(
        "Grouped matmul over contiguous row segments: rows [start_e, end_e) of x times weight[e] "
        "(plus bias[e]) for each group e, accumulated in float32; rows past the last group are zero."
    ),
    inputs=[
        tensor_input("x", "T", "Rows grouped by expert, in segments [M, K]."),
        tensor_input("weight", "T", "Stacked weights [E, K, N] (transpose_weight=1: [E, N, K])."),
        tensor_input("group_list", "TI",
                     "Segments [E]: group_list_type 0 = cumulative ends, 1 = rows per group."),
        tensor_input("bias", "TB", "Per-group bias [E, N]: x's type or float.", optional=True),
    ],
    outputs=[tensor_input("y", "T", "x[rows of e] @ weight[e] + bias[e] per group e; zero rows after [M, N].")],
    type_constraints=[
        ("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Activation and weight type."),
        ("TI", ["tensor(int64)", "tensor(int32)"], "group_list type."),
        ("TB", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Bias type (x's or float)."),
    ],
    attributes=[
        attribute("group_list_type", CUMSUM,
                  "0 = group_list holds cumulative row ends; 1 = rows per group (torch_npu's values)."),
        attribute("transpose_weight", 0,
                  "0 = weight is [E, K, N]; 1 = weight is [E, N, K] (the storage of torch_npu's "
                  "transposed weight views)."),
    ],
)

INPUT_NAMES = input_names(SCHEMA)
OUTPUT_NAMES = output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.BFLOAT16, ["M", "K"]), "weight": (TensorProto.BFLOAT16, ["E", "K", "N"]),
      "group_list": (TensorProto.INT64, ["E"]), "bias": (TensorProto.FLOAT, ["E", "N"])}, {}),
    ({"x": (TensorProto.FLOAT16, ["M", "K"]), "weight": (TensorProto.FLOAT16, ["E", "N", "K"]),
      "group_list": (TensorProto.INT64, ["E"])}, {"transpose_weight": 1}),
]

DEFAULTS: dict[str, Any] = attribute_defaults(SCHEMA)
VALUE_TYPES = allowed_types(SCHEMA, "T")
INDEX_TYPES = allowed_types(SCHEMA, "TI")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def _shape(shape) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _known(d) -> bool:
    """Whether a dimension is a concrete number (torch fake tensors may pass None for symbols)."""
    return isinstance(d, (int, np.integer))


# ---- validation (docs/operators.md §4.3), shared by the NumPy reference and the torch op ---------
# The messages are those of the C++ kernel (ort_custom_ops/src/grouped_matmul_op.cc).


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check group_list_type and transpose_weight."""
    if attrs["group_list_type"] not in (CUMSUM, COUNT):
        raise _err("attribute 'group_list_type' must be 0 (cumulative ends) or 1 (rows per group), "
                   f"got {attrs['group_list_type']}")
    if attrs["transpose_weight"] not in (0, 1):
        raise _err("attribute 'transpose_weight' must be 0 (weight [E, K, N]) or 1 (weight [E, N, K]), "
                   f"got {attrs['transpose_weight']}")


def validate_inputs(inputs: dict[str, tuple | None], attrs: dict[str, Any]) -> tuple:
    """Check attributes, element types, ranks and dims; ``inputs`` maps each input name to
    ``(shape, onnx type name)`` or None (absent). Unknown dims (None) are not checked. Returns
    ``(M, K, N, E)``. group_list values: :func:`validate_group_list`."""
    validate_attributes(attrs)
    for name in INPUT_NAMES[:3]:
        if inputs.get(name) is None:
            raise _err(f"input '{name}' is required, got none")
    x_in, w_in, g_in = (inputs[name] for name in INPUT_NAMES[:3])
    assert x_in is not None and w_in is not None and g_in is not None  # checked just above
    x_shape, x_type = x_in
    if x_type not in VALUE_TYPES:
        raise _err(f"input 'x' must be {type_list(VALUE_TYPES)}, got {x_type}")
    w_shape, w_type = w_in
    if w_type != x_type:
        raise _err(f"input 'weight' must have the type of x ({x_type}), got {w_type}")
    g_shape, g_type = g_in
    if g_type not in INDEX_TYPES:
        raise _err(f"input 'group_list' must be {type_list(INDEX_TYPES)}, got {g_type}")
    bias = inputs.get("bias")
    if bias is not None and bias[1] not in (x_type, "float"):
        raise _err(f"input 'bias' must have the type of x ({x_type}) or be float, got {bias[1]}")
    if len(x_shape) != 2:
        raise _err(f"input 'x' must be 2-D [M, K], got shape {_shape(x_shape)}")
    M, K = x_shape
    layout = "[E, N, K]" if attrs["transpose_weight"] else "[E, K, N]"
    k_axis = 2 if attrs["transpose_weight"] else 1
    if (len(w_shape) != 3 or (_known(w_shape[0]) and w_shape[0] < 1)
            or (_known(K) and _known(w_shape[k_axis]) and w_shape[k_axis] != K)):
        raise _err(f"input 'weight' must be 3-D {layout} with E >= 1 and K = {'?' if K is None else K} "
                   f"(x.shape[1]), got shape {_shape(w_shape)}")
    E, N = w_shape[0], w_shape[3 - k_axis]
    if len(g_shape) != 1 or (_known(E) and _known(g_shape[0]) and g_shape[0] != E):
        raise _err(f"input 'group_list' must be 1-D [E] with E = {'?' if E is None else E} "
                   f"(weight.shape[0]), got shape {_shape(g_shape)}")
    if bias is not None:
        b_shape = bias[0]
        if len(b_shape) != 2 or any(_known(a) and _known(b) and a != b for a, b in zip(b_shape, (E, N))):
            raise _err(f"input 'bias' must be [E, N] = {_shape((E, N))} (from weight), "
                       f"got shape {_shape(b_shape)}")
    return M, K, N, E


def validate_group_list(group_list: np.ndarray, rows: int, group_list_type: int) -> np.ndarray:
    """Check the segment values against M = ``rows`` (first fault in index order) and return the
    int64 end of each group [E]."""
    values = [int(v) for v in np.asarray(group_list).reshape(-1).tolist()]  # Python ints: exact
    ends, total = [], 0
    for i, v in enumerate(values):
        if group_list_type == COUNT:
            if v < 0:
                raise _err(f"input 'group_list' (rows per group) must be non-negative, got {v} at [{i}]")
            total += v
            if total > rows:
                raise _err(f"input 'group_list' (rows per group) must sum to at most M = {rows} "
                           f"(x.shape[0]), got {total} at [{i}]")
        else:
            if v < total:
                raise _err(f"input 'group_list' (cumulative ends) must be non-decreasing from 0, "
                           f"got {v} at [{i}] after {total}")
            if v > rows:
                raise _err(f"input 'group_list' (cumulative ends) must be at most M = {rows} "
                           f"(x.shape[0]), got {v} at [{i}]")
            total = v
        ends.append(total)
    return np.asarray(ends, np.int64)


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx) -> None:
    attrs = inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    x = input_type(ctx, 0)
    x_dims, w_dims = input_dims(x), input_dims(input_type(ctx, 1))
    if x_dims is not None and len(x_dims) != 2:
        fail_inference(OP_TYPE, f"input 'x' must be 2-D [M, K], got rank {len(x_dims)}")
    if w_dims is not None and len(w_dims) != 3:
        fail_inference(OP_TYPE, f"input 'weight' must be 3-D, got rank {len(w_dims)}")
    if x is None:
        return
    m = x_dims[0] if x_dims is not None else None
    n = w_dims[1 if attrs["transpose_weight"] else 2] if w_dims is not None else None
    ctx.set_output_type(0, make_type(x.tensor_type.elem_type, [m, n]))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §4.2) ---------------------------------------------------


def reference(x: np.ndarray, weight: np.ndarray, group_list: np.ndarray, bias: np.ndarray | None = None,
              **attributes: Any) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §4.2: float64 products, rounded once to x's type."""
    attrs = resolve_attributes(SCHEMA, attributes)
    arrays = dict(zip(INPUT_NAMES, (x, weight, group_list, bias)))
    M, K, N, E = validate_inputs(
        {n: None if a is None else (np.shape(a), onnx_type_name(np.asarray(a).dtype)) for n, a in arrays.items()},
        attrs)
    ends = validate_group_list(group_list, M, attrs["group_list_type"])
    x64 = np.asarray(x).astype(np.float64)
    w64 = np.asarray(weight).astype(np.float64)
    if attrs["transpose_weight"]:
        w64 = w64.transpose(0, 2, 1)
    y = np.zeros((M, N), np.float64)
    start = 0
    for e in range(E):
        end = int(ends[e])
        y[start:end] = x64[start:end] @ w64[e]
        if bias is not None:
            y[start:end] += np.asarray(bias).astype(np.float64)[e]
        start = end
    return (y.astype(np.float32).astype(np.asarray(x).dtype),)

