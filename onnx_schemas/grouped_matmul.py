"""GroupedMatmul (docs/operators.md §4): ONNX schema, shape inference, validation and NumPy reference.

The expert matmul of a MoE layer as torch_npu's ``npu_grouped_matmul`` computes it on the Ascend
MoE paths (one x, one stacked weight, one output: ``group_type=0``, ``split_item`` 2 or 3): the
rows of x come grouped by expert in contiguous segments, ``group_list`` gives the segments, and
each segment is multiplied by its expert's weight. Rows after the last segment are zero.

Quantized forms, as torch_npu / aclnnGroupedMatmul define them (inputs after ``bias`` in their
order): antiquant (W8A16 / W4A16: float x, int8 weights or int4 weights in int32 words, per-channel
or per-group ``antiquant_scale`` and optional ``antiquant_offset``) and W8A8 (int8 x and weights,
int32 sums, then ``scale`` per output channel and ``per_token_scale`` per row, ``output_dtype``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
from onnx import TensorProto
from onnx.shape_inference import InferenceContext

from . import _common as common

OP_TYPE = "GroupedMatmul"

# group_list_type values (torch_npu's)
CUMSUM, COUNT = 0, 1
# output_dtype values: ONNX element types (0: x's type)
OUTPUT_DTYPES = {0: None, TensorProto.FLOAT: "float", TensorProto.FLOAT16: "float16",
                 TensorProto.BFLOAT16: "bfloat16", TensorProto.INT32: "int32"}
TYPE_CODES = {"float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
              "int32": TensorProto.INT32, "int8": TensorProto.INT8}
INT4_PER_WORD = 8  # int4 weights travel as torch_npu holds them: 8 per int32 word, element 0 in bits 0-3

# modes of a node, from its input types
FLOAT, ANTIQUANT, W8A8 = "float", "antiquant", "w8a8"

SCHEMA = common.op_schema(
    OP_TYPE,
    doc=(
        "Grouped matmul over contiguous row segments: rows [start_e, end_e) of x times weight[e] "
        "(plus bias[e]) for each group e, accumulated in float32 (int32 for int8 x); rows past the "
        "last group are zero. Quantized weights: antiquant (W8A16 / W4A16) or W8A8, as torch_npu's "
        "npu_grouped_matmul defines them."
    ),
    inputs=[
        common.tensor_input("x", "T1", "Rows grouped by expert, in segments [M, K]."),
        common.tensor_input("weight", "TW",
                            "Stacked weights [E, K, N] (transpose_weight=1: [E, N, K]): x's type, int8, or int4 "
                            "as int32 words of 8 along the last axis ([E, K, N/8] / [E, N, K/8])."),
        common.tensor_input("group_list", "TI",
                            "Segments [E]: group_list_type 0 = cumulative ends, 1 = rows per group."),
        common.tensor_input("bias", "TB", "Per-group bias [E, N]: x's type or float (int32 for int8 x).",
                            optional=True),
        common.tensor_input("scale", "TS", "W8A8: per-channel dequant scale [E, N].", optional=True),
        common.tensor_input("offset", "TO", "Reserved (torch_npu takes offset=None); must be absent.", optional=True),
        common.tensor_input("antiquant_scale", "TA",
                            "Antiquant scale, x's type: per channel [E, N] or per group [E, G, N] (G divides K).",
                            optional=True),
        common.tensor_input("antiquant_offset", "TAO", "Antiquant offset, antiquant_scale's shape and type.",
                            optional=True),
        common.tensor_input("per_token_scale", "TP", "W8A8: per-row dequant scale [M].", optional=True),
    ],
    outputs=[common.tensor_input("y", "TY", "Per group e: x[rows of e] @ W[e] + bias[e], dequantized; zero rows "
                                 "after. [M, N], x's type (int8 x: output_dtype).")],
    type_constraints=[
        ("T1", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(int8)"], "Activation type."),
        ("TW", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(int8)", "tensor(int32)"],
         "Weight type: x's, int8, or int32 (int4 packed 8 per word)."),
        ("TI", ["tensor(int64)", "tensor(int32)"], "group_list type."),
        ("TB", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(int32)"],
         "Bias type (x's or float; int32 for int8 x)."),
        ("TS", ["tensor(float)", "tensor(bfloat16)"], "W8A8 scale type."),
        ("TO", ["tensor(float)"], "Offset type."),
        ("TA", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Antiquant scale type (x's)."),
        # its own parameter: the rule is "antiquant_scale's type", checked after antiquant_scale's
        # own rule (x's type), so that a wrong antiquant_scale is never blamed on the offset
        ("TAO", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)"], "Antiquant offset type (antiquant_scale's)."),
        ("TP", ["tensor(float)"], "Per-token scale type."),
        ("TY", ["tensor(float)", "tensor(float16)", "tensor(bfloat16)", "tensor(int32)"], "Output type."),
    ],
    attributes=[
        common.attribute("group_list_type", CUMSUM,
                         "0 = group_list holds cumulative row ends; 1 = rows per group (torch_npu's values)."),
        common.attribute("transpose_weight", 0,
                         "0 = weight is [E, K, N]; 1 = weight is [E, N, K] (the storage of torch_npu's "
                         "transposed weight views)."),
        common.attribute("output_dtype", 0,
                         "y's ONNX element type: 0 = x's type (float x); int8 x: 6 (int32: the raw sums), "
                         "1 (float), 10 (float16) or 16 (bfloat16)."),
    ],
)

INPUT_NAMES = common.input_names(SCHEMA)
OUTPUT_NAMES = common.output_names(SCHEMA)
SHAPE_EXAMPLES = [  # docs/operators.md: (input -> (element type, dims)), attributes
    ({"x": (TensorProto.BFLOAT16, ["M", "K"]), "weight": (TensorProto.BFLOAT16, ["E", "K", "N"]),
      "group_list": (TensorProto.INT64, ["E"]), "bias": (TensorProto.FLOAT, ["E", "N"])}, {}),
    ({"x": (TensorProto.FLOAT16, ["M", "K"]), "weight": (TensorProto.FLOAT16, ["E", "N", "K"]),
      "group_list": (TensorProto.INT64, ["E"])}, {"transpose_weight": 1}),
    ({"x": (TensorProto.BFLOAT16, ["M", 7168]), "weight": (TensorProto.INT32, ["E", 7168, 512]),
      "group_list": (TensorProto.INT64, ["E"]), "antiquant_scale": (TensorProto.BFLOAT16, ["E", 56, 4096])}, {}),
    ({"x": (TensorProto.INT8, ["M", "K"]), "weight": (TensorProto.INT8, ["E", "K", "N"]),
      "group_list": (TensorProto.INT64, ["E"]), "scale": (TensorProto.FLOAT, ["E", "N"]),
      "per_token_scale": (TensorProto.FLOAT, ["M"])}, {"output_dtype": TensorProto.BFLOAT16}),
]

DEFAULTS: dict[str, Any] = common.attribute_defaults(SCHEMA)
VALUE_TYPES = common.allowed_types(SCHEMA, "T1")[:3]
INDEX_TYPES = common.allowed_types(SCHEMA, "TI")


def _err(what: str) -> ValueError:
    return ValueError(f"{OP_TYPE}: {what}")


def _dim(d: common.Dim) -> str:
    return str(d) if common.known(d) else "?"


# ---- validation (docs/operators.md §4.3), shared by the NumPy reference and the torch op ---------
# The messages are those of the C++ kernel (ort_custom_ops/src/grouped_matmul/grouped_matmul_op.cc).


def validate_attributes(attrs: dict[str, Any]) -> None:
    """Check group_list_type, transpose_weight and output_dtype."""
    if attrs["group_list_type"] not in (CUMSUM, COUNT):
        raise _err("attribute 'group_list_type' must be 0 (cumulative ends) or 1 (rows per group), "
                   f"got {attrs['group_list_type']}")
    if attrs["transpose_weight"] not in (0, 1):
        raise _err("attribute 'transpose_weight' must be 0 (weight [E, K, N]) or 1 (weight [E, N, K]), "
                   f"got {attrs['transpose_weight']}")
    if attrs.get("output_dtype", 0) not in OUTPUT_DTYPES:
        raise _err("attribute 'output_dtype' must be 0 (x's type), 1 (float), 10 (float16), 16 (bfloat16) "
                   f"or 6 (int32), got {attrs['output_dtype']}")


def _check_table_types(types: dict[str, str | None]) -> None:
    """The generated table's checks (C++ GetInputViews): presence of the required inputs, each
    type allowed, inputs sharing a type parameter alike."""
    for name in INPUT_NAMES[:3]:
        if types.get(name) is None:
            raise _err(f"input '{name}' is required, got none")
    seen: dict[str, tuple[str, str]] = {}
    for p in SCHEMA.inputs:
        t = types.get(p.name)
        if t is None:
            continue
        if p.type_str in seen and seen[p.type_str][1] != t:
            other, other_type = seen[p.type_str]
            raise _err(f"input '{p.name}' must have the type of {other} ({other_type}), got {t}")
        allowed = common.allowed_types(SCHEMA, p.type_str)
        if t not in allowed:
            raise _err(f"input '{p.name}' must be {common.type_list(allowed)}, got {t}")
        seen.setdefault(p.type_str, (p.name, t))


def _absent(types: dict[str, Any], names: Sequence[str], why: str) -> None:
    for name in names:
        if types.get(name) is not None:
            raise _err(f"input '{name}' must be absent {why}, got {types[name]}")


def mode_and_output_type(types: dict[str, str | None], attrs: dict[str, Any]) -> tuple[str, str]:
    """The node's mode (FLOAT, ANTIQUANT, W8A8) and y's element type from its input types
    (``{name: onnx type name or None}``) and attributes; the type rules the generated table
    cannot state (docs/operators.md §4.3), in the kernel's order."""
    _check_table_types(types)
    x, w, out = types["x"], types["weight"], attrs.get("output_dtype", 0)
    assert x is not None and w is not None  # required: _check_table_types refused their absence
    _absent(types, ["offset"], "(torch_npu's npu_grouped_matmul takes offset=None)")
    if x == "int8":
        if w != "int8":
            raise _err(f"input 'weight' must be int8 for int8 x (W8A8), got {w}")
        _absent(types, ["antiquant_scale", "antiquant_offset"], "for int8 x (W8A8 takes scale)")
        if types.get("bias") not in (None, "int32"):
            raise _err(f"input 'bias' must be int32 for int8 x, got {types['bias']}")
        if out == 0:
            raise _err("attribute 'output_dtype' must be given for int8 x: 6 (int32), 1 (float), 10 (float16) "
                       "or 16 (bfloat16), got 0")
        if OUTPUT_DTYPES[out] == "int32":
            _absent(types, ["scale", "per_token_scale"], "with output_dtype 6 (int32 y: the raw sums)")
        elif types.get("scale") is None:
            raise _err(f"input 'scale' is required for int8 x with output_dtype {out} ({OUTPUT_DTYPES[out]}), "
                       "got none")
        y_type = OUTPUT_DTYPES[out]
        assert y_type is not None  # out != 0 here
        return W8A8, y_type
    if w not in (x, "int8", "int32"):
        raise _err(f"input 'weight' must have the type of x ({x}), int8 or int32 (int4 in int32 words), got {w}")
    if out not in (0, TYPE_CODES[x]):
        raise _err(f"attribute 'output_dtype' must be 0 or {TYPE_CODES[x]} (x's type) for {x} x, got {out}")
    if types.get("bias") not in (None, x, "float"):
        raise _err(f"input 'bias' must have the type of x ({x}) or be float, got {types['bias']}")
    _absent(types, ["scale", "per_token_scale"], f"for {x} x (scale and per_token_scale are for int8 x)")
    if w == x:
        _absent(types, ["antiquant_scale", "antiquant_offset"],
                f"for {w} weight (antiquant_scale and antiquant_offset are for int8 / int4 weights)")
        return FLOAT, x
    if types.get("antiquant_scale") is None:
        raise _err(f"input 'antiquant_scale' is required for {w} weight, got none")
    if types["antiquant_scale"] != x:
        raise _err(f"input 'antiquant_scale' must have the type of x ({x}), got {types['antiquant_scale']}")
    if types.get("antiquant_offset") not in (None, x):
        raise _err(f"input 'antiquant_offset' must have the type of antiquant_scale ({x}), "
                   f"got {types['antiquant_offset']}")
    return ANTIQUANT, x


def _required(inputs: dict[str, tuple | None], name: str) -> tuple:
    """A required input's (shape, type): mode_and_output_type refused its absence."""
    value = inputs[name]
    assert value is not None
    return value


def validate_inputs(inputs: dict[str, tuple | None], attrs: dict[str, Any]) -> tuple:
    """Check attributes, element types, ranks and dims; ``inputs`` maps each input name to
    ``(shape, onnx type name)`` or None (absent). Unknown dims (None) are not checked. Returns
    ``(M, K, N, E, G, mode, y type)`` (G: antiquant groups along K, 1 per channel). group_list
    values: :func:`validate_group_list`."""
    validate_attributes(attrs)
    mode, y_type = mode_and_output_type({n: None if v is None else v[1] for n, v in inputs.items()}, attrs)
    x_shape, w_shape, g_shape = (_required(inputs, n)[0] for n in INPUT_NAMES[:3])
    if len(x_shape) != 2:
        raise _err(f"input 'x' must be 2-D [M, K], got shape {common.shape_text(x_shape)}")
    M, K = x_shape
    t = attrs["transpose_weight"]
    int4 = _required(inputs, "weight")[1] == "int32"
    layout = "[E, N, K]" if t else "[E, K, N]"
    k_axis = 2 if t else 1
    w_k = w_shape[k_axis] if len(w_shape) == 3 else None
    if int4 and t:
        layout, w_k = "[E, N, K/8] (int4 in int32 words)", None if w_k is None else w_k * INT4_PER_WORD
    elif int4:
        layout = "[E, K, N/8] (int4 in int32 words)"
    if (len(w_shape) != 3 or (common.known(w_shape[0]) and w_shape[0] < 1)
            or (common.known(K) and common.known(w_k) and w_k != K)):
        raise _err(f"input 'weight' must be 3-D {layout} with E >= 1 and K = {_dim(K)} (x.shape[1]), "
                   f"got shape {common.shape_text(w_shape)}")
    E, N = w_shape[0], w_shape[3 - k_axis]
    if int4 and not t and common.known(N):
        N = N * INT4_PER_WORD
    if len(g_shape) != 1 or (common.known(E) and common.known(g_shape[0]) and g_shape[0] != E):
        raise _err(f"input 'group_list' must be 1-D [E] with E = {_dim(E)} (weight.shape[0]), "
                   f"got shape {common.shape_text(g_shape)}")
    for name in ("bias", "scale"):
        if inputs.get(name) is not None:
            s = _required(inputs, name)[0]
            if len(s) != 2 or any(common.known(a) and common.known(b) and a != b for a, b in zip(s, (E, N))):
                raise _err(f"input '{name}' must be [E, N] = {common.shape_text((E, N))} (from weight), "
                           f"got shape {common.shape_text(s)}")
    G = 1
    if inputs.get("antiquant_scale") is not None:
        G = _check_antiquant_shape(inputs, E, K, N, int4 and t)
    p = inputs.get("per_token_scale")
    if p is not None and (len(p[0]) != 1 or (common.known(M) and common.known(p[0][0]) and p[0][0] != M)):
        raise _err(f"input 'per_token_scale' must be [M] = [{_dim(M)}] (x.shape[0]), "
                   f"got shape {common.shape_text(p[0])}")
    return M, K, N, E, G, mode, y_type


def _check_antiquant_shape(inputs: dict, E: common.Dim, K: common.Dim, N: common.Dim,
                           int4_along_k: bool) -> common.Dim:
    """antiquant_scale [E, N] or [E, G, N] with G dividing K (int4 packed along K: K / G even),
    antiquant_offset alike; returns G (None when unknown)."""
    s = inputs["antiquant_scale"][0]
    rank_ok = len(s) in (2, 3)
    dims_ok = rank_ok and all(not (common.known(a) and common.known(b)) or a == b for a, b in ((s[0], E), (s[-1], N)))
    G = s[1] if len(s) == 3 else 1
    divides = not common.known(G, K) or (G >= 1 and K % G == 0 and not (int4_along_k and (K // G) % 2))
    if not (dims_ok and divides):
        even = " and K / G even (int4 weight [E, N, K/8])" if int4_along_k else ""
        raise _err(f"input 'antiquant_scale' must be [E, N] = {common.shape_text((E, N))} or [E, G, N] with G dividing "
                   f"K = {_dim(K)}{even}, got shape {common.shape_text(s)}")
    o = inputs.get("antiquant_offset")
    if o is not None and (len(o[0]) != len(s) or any(common.known(a, b) and a != b for a, b in zip(o[0], s))):
        raise _err(f"input 'antiquant_offset' must have the shape of antiquant_scale {common.shape_text(s)}, "
                   f"got shape {common.shape_text(o[0])}")
    return G if common.known(G) else None


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


def _infer(ctx: InferenceContext) -> None:
    attrs = common.inferred_int_attributes(ctx, OP_TYPE, DEFAULTS, validate_attributes)
    x, w = common.input_type(ctx, 0), common.input_type(ctx, 1)
    x_dims, w_dims = common.input_dims(x), common.input_dims(w)
    common.check_rank(OP_TYPE, "x", x_dims, "[M, K]")
    if w_dims is not None and len(w_dims) != 3:
        common.fail_inference(OP_TYPE, f"input 'weight' must be 3-D, got rank {len(w_dims)}")
    if x is None:
        return
    elem = x.tensor_type.elem_type
    if elem == TensorProto.INT8:
        if attrs["output_dtype"] == 0:
            common.fail_inference(OP_TYPE, "attribute 'output_dtype' must be given for int8 x: 6 (int32), 1 (float), "
                                  "10 (float16) or 16 (bfloat16), got 0")
        elem = attrs["output_dtype"]
    m = x_dims[0] if x_dims is not None else None
    n = w_dims[1 if attrs["transpose_weight"] else 2] if w_dims is not None else None
    if n is not None and w is not None and w.tensor_type.elem_type == TensorProto.INT32 \
            and not attrs["transpose_weight"]:
        n = n.dim_value * INT4_PER_WORD if n.HasField("dim_value") else None
    ctx.set_output_type(0, common.make_type(elem, [m, n]))


SCHEMA.set_type_and_shape_inference_function(_infer)


# ---- NumPy reference (docs/operators.md §4.2) ---------------------------------------------------


def unpack_int4(words: np.ndarray) -> np.ndarray:
    """int4 values (int8) of torch_npu's int32 words: 8 per word along the last axis, element
    ``8 j + i`` in bits ``[4 i, 4 i + 4)`` of word ``j`` (two's complement)."""
    b = np.ascontiguousarray(np.asarray(words, np.int32)).astype("<i4").view(np.uint8)
    nib = np.stack([b & 0x0F, b >> 4], axis=-1).reshape(*b.shape[:-1], -1).astype(np.int8)
    return np.where(nib >= 8, nib - 16, nib).astype(np.int8)


def pack_int4(values: np.ndarray) -> np.ndarray:
    """The inverse of :func:`unpack_int4`: int values in [-8, 7], last axis a multiple of 8 ->
    int32 words."""
    v = np.asarray(values)
    if v.shape[-1] % INT4_PER_WORD or v.min(initial=0) < -8 or v.max(initial=0) > 7:
        raise ValueError("pack_int4: values in [-8, 7] with a last axis of a multiple of 8")
    nib = (v.astype(np.int64) & 0x0F).astype(np.uint8).reshape(*v.shape[:-1], -1, 2)
    b = (nib[..., 0] | (nib[..., 1] << 4)).astype(np.uint8)
    return np.ascontiguousarray(b).view("<i4").astype(np.int32)


def dequantized_weight(weight: npt.ArrayLike, antiquant_scale: npt.ArrayLike, antiquant_offset: npt.ArrayLike | None,
                       transpose_weight: int) -> np.ndarray:
    """``(w + antiquant_offset) * antiquant_scale`` as float64 [E, K, N] (scales per channel [E, N]
    or per group [E, G, N], each group K / G consecutive rows of k)."""
    w = np.asarray(weight)
    w = unpack_int4(w) if w.dtype == np.int32 else w
    w = w.astype(np.float64)
    if transpose_weight:
        w = w.transpose(0, 2, 1)
    E, K, N = w.shape
    scale = np.asarray(antiquant_scale).astype(np.float64).reshape(E, -1, N)
    offset = (np.zeros_like(scale) if antiquant_offset is None
              else np.asarray(antiquant_offset).astype(np.float64).reshape(E, -1, N))
    step = K // scale.shape[1]
    return (w + np.repeat(offset, step, axis=1)) * np.repeat(scale, step, axis=1)


def reference(x: np.ndarray, weight: np.ndarray, group_list: np.ndarray, bias: np.ndarray | None = None,
              scale: np.ndarray | None = None, offset: np.ndarray | None = None,
              antiquant_scale: np.ndarray | None = None, antiquant_offset: np.ndarray | None = None,
              per_token_scale: np.ndarray | None = None, **attributes: Any) -> tuple[np.ndarray]:
    """``(y,)`` of docs/operators.md §4.2: float64 products (int8 x: exact integer sums), rounded
    once to y's type."""
    attrs = common.resolve_attributes(SCHEMA, attributes)
    arrays = dict(zip(INPUT_NAMES, (x, weight, group_list, bias, scale, offset, antiquant_scale, antiquant_offset,
                                    per_token_scale)))
    M, K, N, E, G, mode, y_type = validate_inputs(
        {n: None if a is None else (np.shape(a), common.onnx_type_name(np.asarray(a).dtype))
         for n, a in arrays.items()},
        attrs)
    ends = validate_group_list(group_list, M, attrs["group_list_type"])
    if mode == W8A8:
        xs, ws = np.asarray(x).astype(np.int64), np.asarray(weight).astype(np.int64)
        acc_type: type = np.int64
    else:
        xs = np.asarray(x).astype(np.float64)
        if mode == ANTIQUANT:
            assert antiquant_scale is not None  # validate_inputs: the antiquant mode has its scale
            ws = dequantized_weight(weight, antiquant_scale, antiquant_offset, attrs["transpose_weight"])
        else:
            ws = np.asarray(weight).astype(np.float64)
        acc_type = np.float64
    if mode != ANTIQUANT and attrs["transpose_weight"]:
        ws = ws.transpose(0, 2, 1)
    acc = np.zeros((M, N), acc_type)
    y = np.zeros((M, N), np.float64)
    start = 0
    for e in range(E):
        end = int(ends[e])
        acc[start:end] = xs[start:end] @ ws[e]
        if bias is not None:
            acc[start:end] += np.asarray(bias).astype(acc_type)[e]
        y[start:end] = acc[start:end]
        if scale is not None:  # W8A8: (sums + bias) * scale[e] * per_token_scale
            y[start:end] *= np.asarray(scale).astype(np.float64)[e]
        if per_token_scale is not None:
            y[start:end] *= np.asarray(per_token_scale).astype(np.float64)[start:end, None]
        start = end
    if y_type == "int32":
        return (acc.astype(np.int32),)
    return (y.astype(np.float32).astype(_NP_TYPES[y_type]),)


def _np_types() -> dict:
    import ml_dtypes

    return {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16, "int32": np.int32}


_NP_TYPES = _np_types()
