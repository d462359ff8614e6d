"""SwiGlu (docs/operators.md §11): ONNX schema, shape inference, validation and NumPy reference.

torch_npu's ``npu_swiglu(x, dim=-1)`` (aclnnSwiGlu): ``silu(a) * b`` with ``a, b = x.chunk(2, dim)``,
float16 / bfloat16 computed in float32 and rounded once.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "SwiGlu"

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "SwiGLU activation: y = silu(a) * b = a * sigmoid(a) * b with (a, b) = x split in two equal "
        "halves along dim; float16 / bfloat16 are computed in float32 and rounded once."
    ),
    inputs=[common.tensor_input("x", "T", "Input with an even size along dim.")],
    outputs=[common.tensor_input("y", "T", "x's shape with the dim axis halved.")],
    type_constraints=[("T", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Element type.")],
    attributes=[common.attribute("dim", -1, "The axis split in two halves (negative: from the end).")],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
SHAPE_EXAMPLES: list[tuple] = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.FLOAT16, ["P", 256])}, {}),
    ({"x": (TensorProto.FLOAT, [4, 6, 3])}, {"dim": 1}),
]


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


# ---- validation (docs/operators.md §11.3); messages as ort_custom_ops/src/swi_glu/swi_glu_op.cc ----


def validate_inputs(inputs: dict[str, tuple | None], attrs: dict[str, Any]) -> int:
    """Check x's type, dim against x's rank and the even split; returns the axis (>= 0)."""
    common.check_types(SCHEMA, inputs)
    x = inputs.get("x")
    if x is None:
        raise _err("input 'x' is required, got none")
    shape, dim = tuple(x[0]), int(attrs["dim"])
    rank = len(shape)
    if rank == 0:
        raise _err("input 'x' must have rank >= 1, got shape []")
    if not -rank <= dim < rank:
        raise _err(f"attribute 'dim' must be in [-{rank}, {rank}) (x has rank {rank}), got {dim}")
    axis = dim % rank
    if isinstance(shape[axis], (int, np.integer)) and shape[axis] % 2:
        raise _err(f"input 'x' must have an even size along dim {dim}, got shape {common.shape_text(shape)}")
    return axis


# ---- shape inference ---------------------------------------------------------------------------


def _infer(ctx: InferenceContext) -> None:
    t = common.input_type(ctx, 0)
    if t is None:
        return
    dims = common.input_dims(t)
    dim = common.int_attribute(ctx, OP_TYPE, "dim", DEFAULTS["dim"])
    if dims is None or not -len(dims) <= dim < len(dims):
        ctx.set_output_type(0, common.make_type(t.tensor_type.elem_type, None))
        return
    axis = dim % len(dims)
    d = dims[axis]
    half = d.dim_value // 2 if d.HasField("dim_value") else None
    out = [half if i == axis else dims[i] for i in range(len(dims))]
    ctx.set_output_type(0, common.make_type(t.tensor_type.elem_type, out))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §11.2) -------------------------------------------------------------


def reference(x: np.ndarray, **attributes: Any) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §11.2. Attribute: ``dim`` (default -1)."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    x = np.asarray(x)
    axis = validate_inputs({"x": (x.shape, common.onnx_type_name(x.dtype))}, attrs)
    a, b = np.split(x.astype(np.float32), 2, axis=axis)
    with np.errstate(over="ignore"):
        y = a / (np.float32(1) + np.exp(-a)) * b
    return (y.astype(x.dtype),)
