"""Shared MoeReRouting test helpers: element types, random cases, ONNX models, ORT runs with
every element type (bfloat16 / float8 through OrtValue), torch <-> NumPy bit-exact conversion."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort

try:  # torch is optional: the ORT-facing tests also run in environments without it
    import torch
except ImportError:
    torch = None
from onnx import TensorProto

from ascend_moe_onnx import ort_custom_ops
from ascend_moe_onnx.onnx_schemas import moe_re_routing as spec
from ascend_moe_onnx.onnx_schemas.functions import attach_functions
from tests import ort_values


def _torch_dtype(name: str):
    return getattr(torch, name) if torch is not None else None


# ONNX type name -> (NumPy dtype, ONNX element type, torch dtype or None without torch)
TYPES = {
    "float": (np.dtype(np.float32), TensorProto.FLOAT, _torch_dtype("float32")),
    "float16": (np.dtype(np.float16), TensorProto.FLOAT16, _torch_dtype("float16")),
    "bfloat16": (np.dtype(ml_dtypes.bfloat16), TensorProto.BFLOAT16, _torch_dtype("bfloat16")),
    "int8": (np.dtype(np.int8), TensorProto.INT8, _torch_dtype("int8")),
    "uint8": (np.dtype(np.uint8), TensorProto.UINT8, _torch_dtype("uint8")),
    "float8e4m3fn": (np.dtype(ml_dtypes.float8_e4m3fn), TensorProto.FLOAT8E4M3FN, _torch_dtype("float8_e4m3fn")),
    "float8e5m2": (np.dtype(ml_dtypes.float8_e5m2), TensorProto.FLOAT8E5M2, _torch_dtype("float8_e5m2")),
    "int32": (np.dtype(np.int32), TensorProto.INT32, _torch_dtype("int32")),
    "int64": (np.dtype(np.int64), TensorProto.INT64, _torch_dtype("int64")),
    "double": (np.dtype(np.float64), TensorProto.DOUBLE, _torch_dtype("float64")),
    "bool": (np.dtype(np.bool_), TensorProto.BOOL, _torch_dtype("bool")),
}
_UINT = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}
_RAW = {1: np.uint8, 2: np.int16, 4: np.int32, 8: np.int64}  # NumPy types torch can wrap
_TORCH_UINT = {1: _torch_dtype("uint8"), 2: _torch_dtype("int16"), 4: _torch_dtype("int32"), 8: _torch_dtype("int64")}

WORKED_COUNTS = np.array([[1, 0, 2], [2, 1, 0]])  # docs/operators.md §2.2
WORKED_GATHER = [0, 3, 4, 5, 1, 2]
WORKED_SCATTER = [0, 4, 5, 1, 2, 3]


def random_bits(rng, shape, type_name: str) -> np.ndarray:
    """Random bit patterns (NaN payloads included) of an element type: rows must move bit for bit."""
    dtype = TYPES[type_name][0]
    raw = rng.integers(0, 256, size=(*shape, dtype.itemsize), dtype=np.uint8)
    return raw.view(dtype).reshape(shape)


def random_counts(rng, n: int, e: int, a: int, dtype=np.int64, skew: bool = False) -> np.ndarray:
    """[n, e] counts summing to a, with zero blocks; ``skew`` puts most rows in a few blocks."""
    p = rng.dirichlet(np.full(n * e, 0.2 if skew else 2.0))
    c = rng.multinomial(a, p).reshape(n, e)
    if n * e > 2 and a > 0:  # force an empty block and keep the sum
        i, j = rng.integers(n * e, size=2)
        if i != j:
            c.flat[j] += c.flat[i]
            c.flat[i] = 0
    return c.astype(dtype)


def bits(a: np.ndarray) -> np.ndarray:
    """The raw bytes of an array (bit-exact comparisons of float types with NaNs)."""
    a = np.require(a, requirements='C')
    return a.view(np.uint8) if a.size else a.reshape(-1).view(np.uint8)


def assert_same(got, expected, what: str = "") -> None:
    """Same dtype, shape and bits."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype, (what, got.dtype, expected.dtype)
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    assert np.array_equal(bits(got), bits(expected)), what


def assert_same_up_to_nan_bits(got, expected, what: str = "") -> None:
    """Same dtype and shape; NaN exactly where expected has NaN, every other element bit for bit."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.dtype == expected.dtype and got.shape == expected.shape, what
    if got.dtype.kind in "iu":
        return assert_same(got, expected, what)
    nan = np.isnan(expected.astype(np.float32))
    assert np.array_equal(np.isnan(got.astype(np.float32)), nan), what
    raw = _UINT[got.dtype.itemsize]
    assert np.array_equal(got.view(raw)[~nan], expected.view(raw)[~nan]), what


def function_body_tokens(expected: np.ndarray) -> np.ndarray:
    """permute_tokens as the function body returns it: float8e5m2 +-inf saturated to +-57344."""
    if expected.dtype != TYPES["float8e5m2"][0]:
        return expected
    inf = np.isinf(expected.astype(np.float32))
    return np.where(inf, np.sign(expected.astype(np.float32)) * 57344, expected).astype(expected.dtype)


def assert_outputs_same(got, expected, what: str = "", function_body: bool = False) -> None:
    """The 4 outputs agree bit for bit. ``function_body``: permute_tokens may carry canonical NaNs
    and saturated float8e5m2 infinities (see onnx_schemas.moe_re_routing_function)."""
    assert len(got) == len(expected) == 4, what
    for i, (g, e) in enumerate(zip(got, expected)):
        if i == 0 and function_body:
            assert_same_up_to_nan_bits(g, function_body_tokens(e), f"{what} output {spec.OUTPUT_NAMES[i]}")
        else:
            assert_same(g, e, f"{what} output {spec.OUTPUT_NAMES[i]}")


# ---- torch <-> NumPy ---------------------------------------------------------------------------


def to_torch(a: np.ndarray | None) -> torch.Tensor | None:
    """A torch tensor with the same bits (bfloat16 / float8 through an unsigned view)."""
    if a is None:
        return None
    a = np.require(a, requirements='C')
    name = next(n for n, v in TYPES.items() if v[0] == a.dtype)
    raw = torch.from_numpy(a.view(_RAW[a.dtype.itemsize]).copy())
    return raw.view(TYPES[name][2])


def to_numpy(t: torch.Tensor) -> np.ndarray:
    """A NumPy array with the same bits and the matching (ml_dtypes) dtype."""
    name = next(n for n, v in TYPES.items() if v[2] == t.dtype)
    size = t.element_size()
    raw = t.contiguous().view(_TORCH_UINT[size]).numpy()
    return raw.view(TYPES[name][0])


def run_torch(tokens, counts, scales=None, **attrs):
    """torch.ops.npu.npu_moe_re_routing on NumPy inputs, outputs as NumPy."""
    from ascend_moe_onnx import exporters  # noqa: F401  (defines the op)

    out = torch.ops.npu.npu_moe_re_routing(to_torch(tokens), to_torch(counts),
                                           per_token_scales=to_torch(scales), **attrs)
    return [to_numpy(t) for t in out]


# ---- ONNX models and ORT -----------------------------------------------------------------------


def make_model(token_type: str = "float", count_type: str = "int64", scale_type: str | None = None,
               scale_rank: int = 1, attrs: dict | None = None, shapes: bool = True,
               functions: bool = False, opset: int = 20) -> onnx.ModelProto:
    """One MoeReRouting node of these element types (tests/op_table.node_model); symbolic input
    shapes unless ``shapes`` is False (unknown rank); outputs left to shape inference."""
    from tests.op_table import node_model

    types = {"tokens": token_type, "expert_token_num_per_rank": count_type, "per_token_scales": scale_type}
    inputs = {n: np.zeros(0, TYPES[t][0]) for n, t in types.items() if t is not None}  # types only
    dims = {"tokens": ["A", "H"], "expert_token_num_per_rank": ["N", "E"], "per_token_scales": ["A", "S"][:scale_rank]}
    model = node_model(spec.OP_TYPE, inputs, attrs or {},
                       dims={n: d if shapes else None for n, d in dims.items()}, opset=opset)
    return attach_functions(model) if functions else model


_SESSIONS: dict = {}


def session(model: onnx.ModelProto, library: bool = True, threads: int | None = None):
    """A (cached) CPU InferenceSession, with or without the custom-op library."""
    data = model.SerializeToString()
    key = (data, library, threads)
    if key not in _SESSIONS:
        so = ort_custom_ops.session_options(threads) if library else ort.SessionOptions()
        if not library and threads is not None:
            so.intra_op_num_threads = threads
        _SESSIONS[key] = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    return _SESSIONS[key]


def run_feeds(sess, feeds: dict) -> list[np.ndarray]:
    """Run a session on NumPy inputs of any element type (bfloat16 / float8 included)."""
    return ort_values.run(sess, feeds)


def run_ort(sess, tokens, counts, scales=None) -> list[np.ndarray]:
    """Run a session built by make_model."""
    feeds = {"tokens": tokens, "expert_token_num_per_rank": counts}
    if scales is not None:
        feeds["per_token_scales"] = scales
    return run_feeds(sess, feeds)


def ort_errors() -> tuple:
    """The exception types ORT raises for a failing kernel or session creation."""
    from onnxruntime.capi import onnxruntime_pybind11_state as st

    return (st.InvalidArgument, st.RuntimeException, st.Fail)


def type_name(a: np.ndarray) -> str:
    """ONNX type name of a NumPy array's dtype."""
    return next(n for n, v in TYPES.items() if v[0] == np.asarray(a).dtype)


def bad_cases() -> list:
    """Every rule of docs/operators.md §2.3 broken once, with the exact message all layers give after
    "MoeReRouting: " (see tests/op_table.py for what runs them)."""
    from tests.op_table import BadCase
    f = np.zeros((6, 4), np.float32)
    c = WORKED_COUNTS.astype(np.int64)
    big = 2**62
    cases = [
        ("tokens_rank", np.zeros(6, np.float32), c, None, {},
         "input 'tokens' must be 2-D [A, H], got shape [6]"),
        ("tokens_h0", np.zeros((6, 0), np.float32), c, None, {},
         "input 'tokens' must have H >= 1, got shape [6, 0]"),
        ("tokens_type", np.zeros((6, 4)), c, None, {},
         "input 'tokens' must be float, float16, bfloat16, int8, uint8, float8e4m3fn or float8e5m2, "
         "got double"),
        ("counts_type", f, c.astype(np.float32), None, {},
         "input 'expert_token_num_per_rank' must be int32 or int64, got float"),
        ("counts_rank", f, np.array([6]), None, {},
         "input 'expert_token_num_per_rank' must be 2-D [N, E], got shape [1]"),
        ("counts_no_ranks", np.zeros((0, 4), np.float32), np.zeros((0, 3), np.int64), None, {},
         "input 'expert_token_num_per_rank' must have N >= 1 and E >= 1, got shape [0, 3]"),
        ("counts_no_experts", np.zeros((0, 4), np.float32), np.zeros((2, 0), np.int32), None, {},
         "input 'expert_token_num_per_rank' must have N >= 1 and E >= 1, got shape [2, 0]"),
        ("counts_negative", f, np.array([[1, -1, 3], [2, 1, 0]]), None, {},
         "input 'expert_token_num_per_rank' must be non-negative, got -1 at [0, 1]"),
        ("counts_sum_low", f, np.array([[1, 0, 2], [2, 0, 0]], np.int32), None, {},
         "input 'expert_token_num_per_rank' must sum to the token count A = 6 (tokens.shape[0]), got 5"),
        ("counts_sum_high", f, np.array([[1, 0, 2], [2, 1, 1]]), None, {},
         "input 'expert_token_num_per_rank' must sum to the token count A = 6 (tokens.shape[0]), got 7"),
        ("counts_sum_overflow", f, np.array([[big, big, big], [big, 0, 0]]), None, {},
         "input 'expert_token_num_per_rank' must sum to the token count A = 6 (tokens.shape[0]), "
         "got 18446744073709551616"),
        ("counts_sum_wraps_to_a", f, np.array([[2**63 - 1, 2**63 - 1, 2], [6, 0, 0]]), None, {},
         "input 'expert_token_num_per_rank' must sum to the token count A = 6 (tokens.shape[0]), "
         "got 18446744073709551622"),
        ("scales_type", f, c, np.zeros(6, np.int8), {},
         "input 'per_token_scales' must be float, float16 or bfloat16, got int8"),
        ("scales_rank3", f, c, np.zeros((6, 1, 1), np.float32), {},
         "input 'per_token_scales' must be 1-D [A] or 2-D [A, S], got shape [6, 1, 1]"),
        ("scales_rank0", f, c, np.zeros((), np.float32), {},
         "input 'per_token_scales' must be 1-D [A] or 2-D [A, S], got shape []"),
        ("scales_first_dim", f, c, np.zeros((5, 2), np.float16), {},
         "input 'per_token_scales' must have first dimension A = 6 (tokens.shape[0]), got shape [5, 2]"),
        ("attr_expert_token_num_type", f, c, None, {"expert_token_num_type": 2},
         "attribute 'expert_token_num_type' must be 0 (cumulative counts) or 1 (per-expert counts), got 2"),
        ("attr_idx_type", f, c, None, {"idx_type": -1},
         "attribute 'idx_type' must be 0 (gather index) or 1 (scatter index), got -1"),
    ]
    # What the function body cannot see (element types): see tests/op_table.BadCase.
    blind_body = {"tokens_type", "counts_type", "scales_type"}
    cases = [BadCase(name, {"tokens": t, "expert_token_num_per_rank": n, "per_token_scales": s}, a, m,
                     body=name not in blind_body)
             for name, t, n, s, a, m in cases]
    # Attributes of another kind or name: torch's own signature typing rejects them first.
    kinds = [
        ("kind_idx_type_float", {"idx_type": 1.0}, "attribute 'idx_type' must be INT, got FLOAT 1"),
        ("kind_idx_type_string", {"idx_type": "1"}, "attribute 'idx_type' must be INT, got STRING '1'"),
        ("kind_idx_type_ints", {"idx_type": [1]}, "attribute 'idx_type' must be INT, got INTS [1]"),
        ("kind_expert_token_num_type_float", {"expert_token_num_type": 0.0},
         "attribute 'expert_token_num_type' must be INT, got FLOAT 0"),
    ]
    cases += [BadCase(name, {"tokens": f, "expert_token_num_per_rank": c}, a, m, torch=False)
              for name, a, m in kinds]
    from tests.op_table import attribute_kind_cases

    cases += attribute_kind_cases({"tokens": f, "expert_token_num_per_rank": c}, "idx_type", "INT", k={})[:1]
    cases.append(BadCase("counts_absent", {"tokens": f, "expert_token_num_per_rank": None,
                                           "per_token_scales": np.zeros(6, np.float32)}, {},
                         "input 'expert_token_num_per_rank' is required, got none", torch=False))
    cases.append(BadCase(
        "unknown_idx", {"tokens": f, "expert_token_num_per_rank": c}, {"idx": 1},
        "attribute 'idx' is not an attribute of MoeReRouting (known: expert_token_num_type, idx_type)",
        ort=False, torch=False))
    return cases


# Counts of the edge cases: empty ranks and experts, one rank, one expert, one block, no tokens.
EDGE_COUNTS = {
    "A0": np.zeros((3, 2), np.int64),
    "zero_blocks": np.array([[0, 4, 0], [0, 0, 0], [2, 0, 1]]),
    "empty_rank": np.array([[0, 0], [3, 2], [0, 0]]),
    "empty_expert": np.array([[0, 2, 1], [0, 1, 1]]),
    "N1": np.array([[3, 0, 2, 1]]),
    "E1": np.array([[2], [0], [3]]),
    "N1E1": np.array([[5]]),
    "one_block": np.array([[0, 0], [0, 4]]),
}


def samples() -> list:
    """Named valid calls that every layer runs (tests/op_table.py): the worked example of
    docs/operators.md §2.2 in every attribute combination (its outputs stated), and the count
    edge cases."""
    from tests.op_table import Sample

    rng = np.random.default_rng(13)
    counts = WORKED_COUNTS.astype(np.int64)
    tokens = rng.integers(-128, 128, (6, 4)).astype(np.int8)
    scales = rng.standard_normal((6, 2)).astype(np.float32)
    out = [Sample("every-input-scatter-cumsum",
                  {"tokens": tokens, "expert_token_num_per_rank": counts, "per_token_scales": scales},
                  dict(idx_type=1, expert_token_num_type=0),
                  expect={"permute_tokens": tokens[WORKED_GATHER], "permute_per_token_scales": scales[WORKED_GATHER]})]
    worked = np.arange(6 * 3, dtype=np.float32).reshape(6, 3)
    for count_type in (np.int32, np.int64):
        for idx_type in (0, 1):
            for etn_type in (0, 1):
                out.append(Sample(
                    f"worked-example-{np.dtype(count_type).name}-idx{idx_type}-etn{etn_type}",
                    {"tokens": worked, "expert_token_num_per_rank": WORKED_COUNTS.astype(count_type)},
                    dict(idx_type=idx_type, expert_token_num_type=etn_type),
                    expect={"permute_tokens": worked[WORKED_GATHER],
                            "permute_per_token_scales": np.zeros((0,), np.float32),
                            "permute_token_idx": WORKED_SCATTER if idx_type else WORKED_GATHER,
                            "expert_token_num": np.array([3, 1, 2] if etn_type else [3, 4, 6], count_type)}))
    for name, edge in EDGE_COUNTS.items():
        a = int(edge.sum())
        for idx_type in (0, 1):
            out.append(Sample(f"edge-{name}-idx{idx_type}",
                              {"tokens": rng.standard_normal((a, 5)).astype(ml_dtypes.bfloat16),
                               "expert_token_num_per_rank": edge,
                               "per_token_scales": rng.random((a, 2)).astype(np.float32)},
                              dict(idx_type=idx_type, expert_token_num_type=0)))
    return out
