"""Fuzz cases for MoeGatingTopKHash, MoeReRouting and MoeRoutedExperts (the pipeline ops:
tests/fuzz/cases_ops.py): a mostly valid configuration (docs/operators.md §1.3 / §2.3 / §3.3)
with special values, ties and optional inputs/outputs, then zero to two injected faults. Whether
the result is valid is decided afterwards by :mod:`tests.fuzz.oracle` from the concrete case,
never from the generator's intent."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import ml_dtypes
import numpy as np

GATING = "MoeGatingTopKHash"
REROUTING = "MoeReRouting"
EXPERTS = "MoeRoutedExperts"
EXPERTS_INPUTS = ("x", "expert_idx", "routing_weights", "gate_up_weights", "down_weights")
EXPERTS_DEFAULTS = dict(swiglu_limit=0.0)
# int8 / 4-bit expert weights (docs/quantization.md): the scale inputs and attributes they add
EXPERTS_SCALES = ("gate_up_scales", "down_scales")
EXPERTS_QUANT_DEFAULTS = dict(weight_bits=8, block_size=0)
GATING_INPUTS = ("x", "bias", "input_ids", "tid2eid", "additional_bias", "additional_token_mask")
GATING_OUTPUTS = ("y", "expert_idx", "out")
REROUTING_INPUTS = ("tokens", "expert_token_num_per_rank", "per_token_scales")
REROUTING_OUTPUTS = ("permute_tokens", "permute_per_token_scales", "permute_token_idx", "expert_token_num")

NP_TYPES = {
    "float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16,
    "float8e4m3fn": ml_dtypes.float8_e4m3fn, "float8e5m2": ml_dtypes.float8_e5m2,
    "int8": np.int8, "uint8": np.uint8, "int32": np.int32, "int64": np.int64,
    "double": np.float64, "bool": np.bool_,
}
FLOAT_TYPES = ("float", "float16", "bfloat16")
GATING_INT_ATTRS = ("k", "k_group", "group_count", "group_select_mode", "renorm", "norm_type", "out_flag")
GATING_FLOAT_ATTRS = ("routed_scaling_factor", "eps")
GATING_DEFAULTS = dict(k_group=1, group_count=1, group_select_mode=0, renorm=0, norm_type=0,
                       out_flag=0, routed_scaling_factor=1.0, eps=1e-20)
REROUTING_DEFAULTS = dict(expert_token_num_type=1, idx_type=0)
MISSPELLED = ("norm", "K", "topk", "group_num", "routed_scale", "idx", "expert_token_num", "idx_typ")


@dataclass
class Case:
    """One model + feed: attributes keep their Python kind (int→INT, float→FLOAT, str→STRING,
    list→INTS/FLOATS); ``node_inputs``/``outputs`` hold "" for omitted optional slots."""

    op: str
    attrs: dict[str, Any]
    inputs: dict[str, np.ndarray]
    node_inputs: list[str]
    outputs: list[str]
    input_dims: dict[str, str] = field(default_factory=dict)  # static | symbolic | unknown_rank
    opset: int = 1
    optimize: bool = True
    threads: int = 1
    shape_probes: bool = False
    # Every input but the node's first is a constant initializer (ORT hands a kernel an empty one
    # with a null data pointer).
    constants: bool = False
    tags: list[str] = field(default_factory=list)

    def describe(self) -> dict:
        """A JSON-friendly summary: everything but the array contents."""
        def attr(v):
            if isinstance(v, OTHER_KIND_TYPES):
                return f"<{type(v).__name__}>"
            return v if not isinstance(v, float) or np.isfinite(v) else repr(v)
        return {
            "op": self.op,
            "attrs": {n: (list(map(attr, v)) if isinstance(v, list) else attr(v)) for n, v in self.attrs.items()},
            "inputs": {n: [list(a.shape), type_name(a)] for n, a in self.inputs.items()},
            "node_inputs": self.node_inputs, "outputs": self.outputs, "input_dims": self.input_dims,
            "opset": self.opset, "optimize": self.optimize, "threads": self.threads,
            "shape_probes": self.shape_probes, "constants": self.constants, "tags": self.tags,
        }


def type_name(a: np.ndarray) -> str:
    """ONNX-style element type name of an array."""
    for name, t in NP_TYPES.items():
        if np.dtype(a.dtype) == np.dtype(t):
            return name
    return np.dtype(a.dtype).name


def _other_kind_types() -> tuple:
    import onnx

    return (onnx.TensorProto, onnx.GraphProto, onnx.SparseTensorProto, onnx.TypeProto, onnx.AttributeProto)


OTHER_KIND_TYPES = _other_kind_types()


# ---- values ------------------------------------------------------------------------------------

VALUE_STYLES = ("normal", "normal", "ties", "few", "special", "tiny", "very_negative", "wide")


def float_values(src, rng: np.random.Generator, shape, dtype: str, tags: list) -> np.ndarray:
    """Logit-like values in ``dtype``: plain, tied, few distinct, NaN/inf/denormal, underflowing."""
    style = src.choice(VALUE_STYLES)
    tags.append(style)
    n = int(np.prod(shape))
    if style == "ties":
        v = np.full(n, src.choice([0.0, 1.5, -3.0]), np.float32)
    elif style == "few":
        v = rng.integers(-2, 3, n).astype(np.float32)
    elif style == "tiny":
        v = (rng.standard_normal(n) * 1e-39).astype(np.float32)
    elif style == "very_negative":
        v = (-87.0 - 30.0 * np.abs(rng.standard_normal(n))).astype(np.float32)
    elif style == "wide":
        v = (rng.standard_normal(n) * 1e4).astype(np.float32)
    else:
        v = (rng.standard_normal(n) * src.choice([1.0, 4.0])).astype(np.float32)
    if style == "special" or src.prob(0.05):
        specials = np.array([np.nan, np.inf, -np.inf, 1e-40, -1e-41, -0.0, 3e38], np.float32)
        hit = rng.random(n) < 0.1
        v[hit] = rng.choice(specials, int(hit.sum()))
        if "special" not in tags:
            tags.append("special")
    with np.errstate(over="ignore"):
        return v.reshape(shape).astype(NP_TYPES[dtype])


def split_rows(src, rows: int, rank: int) -> tuple:
    """Leading dims of ``rank - 1`` axes whose product is ``rows``."""
    lead = [1] * (rank - 1)
    if rows == 0:
        lead[src.int(0, rank - 2)] = 0
        return tuple(lead)
    rest = rows
    for i in range(rank - 2):
        divs = [d for d in range(1, min(rest, 64) + 1) if rest % d == 0]
        lead[i] = src.choice(divs)
        rest //= lead[i]
    lead[-1] = rest
    return tuple(lead)


def _dims_modes(src, names) -> dict:
    return {n: src.choice(("static", "symbolic", "symbolic", "unknown_rank")) for n in names}


def _node_inputs(src, all_names, present) -> list:
    names = [n if n in present else "" for n in all_names]
    if src.prob(0.7):
        while names and names[-1] == "":
            names.pop()
    return names


# ---- MoeGatingTopKHash -------------------------------------------------------------------------

EXPERT_COUNTS = (1, 2, 3, 4, 6, 8, 16, 32, 64, 66, 96, 128, 160, 256, 384, 2048)


def gen_gating(src) -> Case:
    """A MoeGatingTopKHash case (docs/operators.md §1)."""
    tags: list = []
    E = src.int(1, 300) if src.prob(0.2) else src.choice(EXPERT_COUNTS)
    divisors = [d for d in range(1, E + 1) if E % d == 0]
    gc = src.choice(divisors) if src.prob(0.5) else 1
    kg = src.int(1, gc)
    P = E // gc
    k = src.int(1, min(64, E, kg * P))
    grouped = gc > 1 and kg < gc
    mode = src.int(0, 1) if (not grouped or P >= 2) else 0
    attrs: dict[str, Any] = {"k": k}
    chosen = dict(k_group=kg, group_count=gc, group_select_mode=mode, renorm=src.int(0, 1),
                  norm_type=src.int(0, 2), out_flag=src.int(0, 1),
                  routed_scaling_factor=src.choice([1.0, 2.5, 16.0, 0.5, 0.0, -1.0, 1e-3]),
                  eps=src.choice([1e-20, 0.0, 1e-6, 1.0]))
    for name, value in chosen.items():
        if value != GATING_DEFAULTS[name] or src.prob(0.3):
            attrs[name] = value
    dtype = src.choice(FLOAT_TYPES)
    rows = src.choice([0, 1, 2, 5, 17, 64, 300]) if E <= 384 else src.choice([0, 1, 3, 20])
    rank = src.choice([2, 2, 2, 3, 4])
    lead = split_rows(src, rows, rank)
    rng = np.random.default_rng(src.seed())
    inputs = {"x": float_values(src, rng, lead + (E,), dtype, tags)}
    bias_mode = src.choice(["none", "bias", "additional", "both"])
    if bias_mode in ("bias", "both"):
        inputs["bias"] = float_values(src, rng, (E,), dtype, []) if src.prob(0.2) else \
            (rng.standard_normal(E) * 0.5).astype(np.float32).astype(NP_TYPES[dtype])
    if bias_mode in ("additional", "both"):
        inputs["additional_bias"] = (rng.standard_normal(E) * 0.5).astype(np.float32).astype(NP_TYPES[dtype])
        inputs["additional_token_mask"] = (rng.random(lead) < src.choice([0.0, 0.4, 1.0])).reshape(
            lead if src.prob(0.6) else (rows,))
    if not grouped and src.prob(0.3):
        n = src.choice([1, 5, 50])
        inputs["input_ids"] = rng.integers(0, n, rows).astype(src.choice(["int32", "int64"])).reshape(
            lead if src.prob(0.6) else (rows,))
        inputs["tid2eid"] = rng.integers(0, E, (n, k)).astype(src.choice(["int32", "int64"]))
        tags.append("hash")
    outputs = list(src.choice([GATING_OUTPUTS[:2], GATING_OUTPUTS, GATING_OUTPUTS, ("y", "expert_idx", "")]))
    case = Case(GATING, attrs, inputs, [], outputs, _dims_modes(src, GATING_INPUTS),
                optimize=src.prob(0.7), threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=tags,
                constants=src.prob(0.15))
    _inject_faults(src, case, GATING_FAULTS, rng)
    case.node_inputs = _node_inputs(src, GATING_INPUTS, case.inputs)
    if "missing_x" in case.tags:
        case.node_inputs[0] = ""
    return case


def _g_attr_value(src, c, rng):
    x = c.inputs.get("x")
    E = int(x.shape[-1]) if x is not None and x.ndim else 8
    gc = c.attrs.get("group_count", 1)
    gc = gc if isinstance(gc, int) else 1
    name, value = src.choice([
        ("k", 0), ("k", 65), ("k", E + 1), ("k", -1), ("k_group", 0), ("k_group", gc + 1),
        ("group_count", 0), ("group_count", -2), ("group_count", E + 1), ("group_select_mode", 2),
        ("group_select_mode", -1), ("norm_type", 3), ("norm_type", -1), ("renorm", 2), ("out_flag", 2),
        ("routed_scaling_factor", float("inf")), ("routed_scaling_factor", float("nan")),
        ("eps", -1.0), ("eps", float("inf")), ("eps", float("nan")),
    ])
    c.attrs[name] = value


def other_kind_value(src, name: str):
    """A value of an attribute kind no op declares (TENSOR, GRAPH, STRINGS, empty INTS, ...)."""
    from onnx import AttributeProto, TensorProto, helper, numpy_helper

    kind = src.choice(["TENSOR", "GRAPH", "STRINGS", "TENSORS", "GRAPHS", "SPARSE_TENSOR", "TYPE_PROTO",
                       "TYPE_PROTOS", "INTS []", "FLOATS []"])
    tensor = numpy_helper.from_array(np.array(1, np.int64))
    graph = helper.make_graph([], "g", [], [])
    type_proto = helper.make_tensor_type_proto(TensorProto.FLOAT, [1])
    return {
        "TENSOR": tensor, "GRAPH": graph, "STRINGS": ["a", "b"], "TENSORS": [tensor], "GRAPHS": [graph],
        "SPARSE_TENSOR": helper.make_sparse_tensor(numpy_helper.from_array(np.array([1.0], np.float32)),
                                                   numpy_helper.from_array(np.array([0], np.int64)), [2]),
        "TYPE_PROTO": type_proto, "TYPE_PROTOS": [type_proto],
        "INTS []": helper.make_attribute(name, [], attr_type=AttributeProto.INTS),
        "FLOATS []": helper.make_attribute(name, [], attr_type=AttributeProto.FLOATS),
    }[kind]


def _attr_kind(src, c, rng, defaults):
    names = [n for n in list(c.attrs) + list(defaults)
             if isinstance(c.attrs.get(n, defaults.get(n)), (int, float))]
    if not names:
        return
    name = src.choice(names)
    v = c.attrs.get(name, defaults.get(name))
    if src.prob(0.3):
        c.attrs[name] = other_kind_value(src, name)
    elif isinstance(v, int):
        c.attrs[name] = src.choice([float(v), str(v), [v], [float(v)]])
    else:
        i = int(v) if np.isfinite(v) else 1
        c.attrs[name] = src.choice([i, str(v), [v], [i]])


def _g_attr_kind(src, c, rng):
    _attr_kind(src, c, rng, GATING_DEFAULTS)


def _r_attr_kind(src, c, rng):
    _attr_kind(src, c, rng, REROUTING_DEFAULTS)


def _attr_unknown(src, c, rng):
    c.attrs[src.choice(MISSPELLED)] = src.choice([1, 0, 2.5])


def _g_missing_k(src, c, rng):
    c.attrs.pop("k", None)


def _g_x_dtype(src, c, rng):
    with np.errstate(invalid="ignore", over="ignore"):
        new_type = NP_TYPES[src.choice(["double", "int32", "float", "float16"])]
        c.inputs["x"] = c.inputs["x"].astype(np.float32).astype(new_type)


def _g_x_rank1(src, c, rng):
    c.inputs["x"] = c.inputs["x"].reshape(-1)


def _g_too_many_experts(src, c, rng):
    lead = c.inputs["x"].shape[:-1]
    c.inputs["x"] = rng.standard_normal(lead + (2049,)).astype(c.inputs["x"].dtype)


def _g_bias_shape(src, c, rng):
    name = src.choice(["bias", "additional_bias"])
    b = c.inputs.get(name, c.inputs["x"].reshape(-1)[:1])
    c.inputs[name] = src.choice([np.resize(b, b.size + 1), np.resize(b, (1, max(b.size, 1))), np.resize(b, 0)])


def _g_bias_dtype(src, c, rng):
    name = src.choice(["bias", "additional_bias"])
    E = c.inputs["x"].shape[-1]
    c.inputs[name] = np.zeros(E, NP_TYPES[src.choice(["float", "float16", "bfloat16", "double"])])


def _g_hash_half(src, c, rng):
    rows = int(np.prod(c.inputs["x"].shape[:-1]))
    if "tid2eid" in c.inputs:
        c.inputs.pop(src.choice(["tid2eid", "input_ids"]), None)
    elif src.prob(0.5):
        c.inputs["input_ids"] = np.zeros(rows, np.int64)
    else:
        k = c.attrs["k"] if isinstance(c.attrs.get("k"), int) else 1
        c.inputs["tid2eid"] = np.zeros((3, k), np.int32)


def _ensure_hash(c, rng, n=5):
    x = c.inputs["x"]
    rows = int(np.prod(x.shape[:-1]))
    k = c.attrs["k"] if isinstance(c.attrs.get("k"), int) and c.attrs["k"] > 0 else 1
    if "input_ids" not in c.inputs:
        c.inputs["input_ids"] = rng.integers(0, n, rows).astype(np.int64)
    if "tid2eid" not in c.inputs:
        c.inputs["tid2eid"] = rng.integers(0, max(x.shape[-1], 1), (n, k)).astype(np.int32)


def _g_table_shape(src, c, rng):
    _ensure_hash(c, rng)
    t = c.inputs["tid2eid"]
    c.inputs["tid2eid"] = src.choice([np.zeros((t.shape[0], t.shape[1] + 1), t.dtype), t.reshape(-1),
                                      np.zeros((0, t.shape[1]), t.dtype), t.astype(np.float32)])


def _g_table_empty(src, c, rng):
    """tid2eid [0, k] with hash rows: every used id is out of range (never plain top-k)."""
    _ensure_hash(c, rng)
    c.inputs["tid2eid"] = np.zeros((0, c.inputs["tid2eid"].shape[-1]), c.inputs["tid2eid"].dtype)


def _g_ids_count(src, c, rng):
    _ensure_hash(c, rng)
    ids = c.inputs["input_ids"].reshape(-1)
    c.inputs["input_ids"] = np.concatenate([ids, ids[:1] if ids.size else np.zeros(1, ids.dtype)])


def _g_ids_range(src, c, rng):
    _ensure_hash(c, rng)
    ids = c.inputs["input_ids"].copy()
    if ids.size:
        ids.reshape(-1)[src.int(0, ids.size - 1)] = src.choice([-1, c.inputs["tid2eid"].shape[0], 2**31 - 1])
    c.inputs["input_ids"] = ids if src.prob(0.8) else ids.astype(np.float32)


def _g_table_range(src, c, rng):
    _ensure_hash(c, rng)
    t = c.inputs["tid2eid"].copy()
    if t.size:
        t.reshape(-1)[src.int(0, t.size - 1)] = src.choice([-1, c.inputs["x"].shape[-1], 2**31 - 1])
    c.inputs["tid2eid"] = t


def _g_hash_with_groups(src, c, rng):
    E = c.inputs["x"].shape[-1]
    if E % 2 == 0 and isinstance(c.attrs.get("k"), int) and 1 <= c.attrs["k"] <= E // 2:
        c.attrs.update(group_count=2, k_group=1)
        if c.attrs.get("group_select_mode") == 1 and E < 4:
            c.attrs["group_select_mode"] = 0
    _ensure_hash(c, rng)


def _g_mask_alone(src, c, rng):
    rows = int(np.prod(c.inputs["x"].shape[:-1]))
    c.inputs.pop("additional_bias", None)
    c.inputs.setdefault("additional_token_mask", np.ones(rows, bool))


def _g_mask_bad(src, c, rng):
    E = c.inputs["x"].shape[-1]
    rows = int(np.prod(c.inputs["x"].shape[:-1]))
    c.inputs.setdefault("additional_bias", np.zeros(E, c.inputs["x"].dtype))
    c.inputs["additional_token_mask"] = src.choice([np.ones(rows + 1, bool), np.ones(rows, np.int32),
                                                    np.ones(rows, np.uint8)])


def _opset(src, c, rng):
    c.opset = src.choice([2, 1000])


def _missing_first(src, c, rng):
    c.tags.append("missing_x" if c.op == GATING else "missing_required")


GATING_FAULTS = [
    (_g_attr_value, 4), (_g_attr_kind, 2), (_attr_unknown, 1),
    (_g_missing_k, 0.5), (_g_x_dtype, 1), (_g_x_rank1, 0.5), (_g_too_many_experts, 0.3),
    (_g_bias_shape, 1), (_g_bias_dtype, 1), (_g_hash_half, 1), (_g_table_shape, 1), (_g_table_empty, 1),
    (_g_ids_count, 1),
    (_g_ids_range, 2), (_g_table_range, 2), (_g_hash_with_groups, 1), (_g_mask_alone, 1),
    (_g_mask_bad, 1), (_opset, 0.3), (_missing_first, 0.2),
]


def _inject_faults(src, case: Case, faults, rng) -> None:
    n = src.choice([0] * 11 + [1] * 7 + [2] * 2)
    weights = np.array([w for _, w in faults], float)
    cumulative = np.cumsum(weights / weights.sum())
    for _ in range(n):
        u = src.int(0, 9999) / 10000
        fn = faults[int(np.searchsorted(cumulative, u, side="right"))][0]
        try:
            fn(src, case, rng)
        except (IndexError, KeyError, ValueError, TypeError):  # a fault that does not fit this case
            case.tags.append("fault_skipped:" + fn.__name__.lstrip("_"))
            continue
        case.tags.append("fault:" + fn.__name__.lstrip("_"))


# ---- MoeReRouting ------------------------------------------------------------------------------

TOKEN_TYPES = ("float", "float16", "bfloat16", "int8", "uint8", "float8e4m3fn", "float8e5m2")


def random_bits(rng, shape, dtype: str) -> np.ndarray:
    """Any bit pattern of ``dtype`` (NaN payloads included): values must be moved bit for bit."""
    t = np.dtype(NP_TYPES[dtype])
    n = int(np.prod(shape)) * t.itemsize
    return np.frombuffer(rng.bytes(n), np.uint8).view(t).reshape(shape) if n else np.zeros(shape, t)


def gen_rerouting(src) -> Case:
    """A MoeReRouting case (docs/operators.md §2)."""
    tags: list = []
    rng = np.random.default_rng(src.seed())
    N = src.int(1, 40) if src.prob(0.2) else src.choice([1, 2, 4, 8, 32])
    E = src.int(1, 70) if src.prob(0.2) else src.choice([1, 2, 8, 16, 64])
    cmax = src.choice([0, 1, 3, 10])
    counts = rng.integers(0, cmax + 1, (N, E))
    if src.prob(0.2):
        counts[src.int(0, N - 1)] = 0
    A = int(counts.sum())
    H = src.choice([1, 2, 7, 64, 128, 2880])
    while A * H > 2_000_000 and H > 1:
        H //= 2
    huge = A == 0 and src.prob(0.3)
    if huge:
        H = src.choice([2**31 + src.int(0, 16), 2**40, 2**60 - 1])
        tags.append("huge_empty")
    inputs = {"tokens": random_bits(rng, (A, H), src.choice(TOKEN_TYPES)),
              "expert_token_num_per_rank": counts.astype(src.choice(["int32", "int64"]))}
    if src.prob(0.6):
        S = src.choice([2**31 + 1, 2**60 - 1]) if huge and src.prob(0.5) else src.choice([0, 1, 4])
        shape = (A,) if src.prob(0.4) else (A, S)
        inputs["per_token_scales"] = random_bits(rng, shape, src.choice(FLOAT_TYPES))
    attrs: dict[str, Any] = {}
    for name, default in REROUTING_DEFAULTS.items():
        value = src.int(0, 1)
        if value != default or src.prob(0.3):
            attrs[name] = value
    case = Case(REROUTING, attrs, inputs, [], list(REROUTING_OUTPUTS), _dims_modes(src, REROUTING_INPUTS),
                optimize=src.prob(0.7), threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=tags,
                constants=src.prob(0.15))
    _inject_faults(src, case, REROUTING_FAULTS, rng)
    case.node_inputs = _node_inputs(src, REROUTING_INPUTS, case.inputs)
    if "missing_required" in case.tags:
        case.node_inputs[src.int(0, 1)] = ""
    return case


def _r_attr_value(src, c, rng):
    c.attrs[src.choice(list(REROUTING_DEFAULTS))] = src.choice([2, -1, 5, 2**40])


def _r_tokens_shape(src, c, rng):
    t = c.inputs["tokens"]
    c.inputs["tokens"] = src.choice([t.reshape(-1), t.reshape(t.shape + (1,)), np.zeros((t.shape[0], 0), t.dtype)])


def _r_tokens_dtype(src, c, rng):
    new_type = NP_TYPES[src.choice(["int32", "double", "bool", "int64"])]
    c.inputs["tokens"] = np.zeros(c.inputs["tokens"].shape, new_type)


def _r_counts_bad(src, c, rng):
    cnt = c.inputs["expert_token_num_per_rank"]
    kind = src.choice(["dtype", "rank", "empty", "negative", "sum", "overflow"])
    if (cnt.size == 0 or cnt.dtype.kind != "i") and kind in ("negative", "sum"):
        kind = "overflow"
    if kind == "dtype":
        cnt = cnt.astype(src.choice([np.float32, np.int8, np.uint64]))
    elif kind == "rank":
        cnt = src.choice([cnt.reshape(-1), cnt.reshape((1,) + cnt.shape)])
    elif kind == "empty":
        cnt = np.zeros(src.choice([(0, 3), (2, 0)]), cnt.dtype)
    elif kind == "negative":
        cnt = cnt.copy()
        cnt.reshape(-1)[src.int(0, cnt.size - 1)] = -1
    elif kind == "sum":
        cnt = cnt.copy()
        cnt.reshape(-1)[src.int(0, cnt.size - 1)] += src.choice([1, -1])
    else:  # wraps to the token count in int64 / int32 arithmetic
        if cnt.dtype == np.int64:
            cnt = np.full((1, 4), 2**62, np.int64)
        else:
            cnt = np.full((1, 2), 2**31 - 1, np.int32)
            cnt[0, 1] = 1
        for name in ("tokens", "per_token_scales"):
            if name in c.inputs and c.inputs[name].ndim:
                c.inputs[name] = c.inputs[name][:0]
    c.inputs["expert_token_num_per_rank"] = cnt


def _r_scales_bad(src, c, rng):
    A = c.inputs["tokens"].shape[0] if c.inputs["tokens"].ndim else 1
    c.inputs["per_token_scales"] = src.choice([
        np.zeros((A + 1,), np.float32), np.zeros((A, 2, 2), np.float32), np.zeros((), np.float32),
        np.zeros((A,), np.int8), np.zeros((A, 1), np.float64)])


REROUTING_FAULTS = [
    (_r_attr_value, 2), (_r_attr_kind, 2), (_attr_unknown, 1),
    (_r_tokens_shape, 1), (_r_tokens_dtype, 1), (_r_counts_bad, 4), (_r_scales_bad, 2), (_opset, 0.3),
    (_missing_first, 0.2),
]


# ---- MoeRoutedExperts --------------------------------------------------------------------------


def gen_experts(src) -> Case:
    """A MoeRoutedExperts case (docs/operators.md §3): H = 0 (an empty y) now and then, with
    weights that then declare huge E or I and hold no element; a third of the cases quantized."""
    if src.prob(0.35):
        return gen_quantized_experts(src)
    tags: list = []
    rng = np.random.default_rng(src.seed())
    T = src.choice([0, 1, 2, 5, 17])
    k = 0 if src.prob(0.05) else src.choice([1, 2, 4])
    H = 0 if src.prob(0.1) else src.choice([1, 3, 16, 40])
    E, I = src.choice([1, 2, 5, 16]), src.choice([1, 3, 8])
    if H == 0 and src.prob(0.5):
        E, I = src.choice([(2**40, 1), (1, 2**40), (2**31 + 3, 2**20)])
        tags.append("huge_empty")
    inputs = {"x": rng.standard_normal((T, H)).astype(np.float32),
              "expert_idx": rng.integers(0, min(E, 2**31 - 1), (T, k)).astype(src.choice(["int32", "int64"])),
              "routing_weights": rng.random((T, k)).astype(np.float32),
              "gate_up_weights": (rng.standard_normal((E, 2 * I, H)) * 0.3).astype(np.float32),
              "down_weights": (rng.standard_normal((E, H, I)) * 0.3).astype(np.float32)}
    limit = src.choice([0.0, 0.0, 0.5, 7.0])
    attrs: dict[str, Any] = {"swiglu_limit": limit} if limit or src.prob(0.3) else {}
    case = Case(EXPERTS, attrs, inputs, list(EXPERTS_INPUTS), ["y"], _dims_modes(src, EXPERTS_INPUTS),
                optimize=src.prob(0.7), threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=tags,
                constants=src.prob(0.15))
    _inject_faults(src, case, EXPERTS_FAULTS, rng)
    if "missing_required" in case.tags:
        case.node_inputs[src.int(0, len(EXPERTS_INPUTS) - 1)] = ""
    return case


def gen_quantized_experts(src) -> Case:
    """A valid MoeRoutedExperts case with int8 or 4-bit weights and their scales, per channel or
    per block: row lengths that reach the kernel's 4-bit phases (multiples of 128 / 64 / 32
    inputs), the down rows' lane tiles (one pair per expert) and panel tiles (several), the
    switches to dequantized rows (many pairs per expert), with vector tails beside them. No faults
    are injected: the float cases probe the validation, these the quantized kernels' arithmetic."""
    from ascend_moe_onnx.onnx_schemas import weight_quant

    rng = np.random.default_rng(src.seed())
    bits = src.choice([8, 4])
    H, I = src.choice([16, 40, 64, 128, 150, 256]), src.choice([8, 24, 64, 72, 128])
    blocks = [b for b in (8, 16, 24, 32, 64, 128) if H % b == 0 and I % b == 0]
    block = src.choice([0] + blocks) if blocks else 0
    T, k, E = src.choice([1, 2, 5, 17, 40]), src.choice([1, 2, 4, 8]), src.choice([1, 2, 5, 16])
    inputs = {"x": rng.standard_normal((T, H)).astype(np.float32),
              "expert_idx": rng.integers(0, E, (T, k)).astype(src.choice(["int32", "int64"])),
              "routing_weights": rng.random((T, k)).astype(np.float32)}
    for name, w in (("gate_up", rng.standard_normal((E, 2 * I, H)) / np.sqrt(H)),
                    ("down", rng.standard_normal((E, H, I)) / np.sqrt(I))):
        inputs[f"{name}_weights"], inputs[f"{name}_scales"] = weight_quant.quantize(w, bits, block)
    attrs: dict[str, Any] = {"weight_bits": bits, "block_size": block}
    if src.prob(0.3):
        attrs["swiglu_limit"] = src.choice([0.5, 7.0])
    names = EXPERTS_INPUTS + EXPERTS_SCALES
    return Case(EXPERTS, attrs, inputs, list(names), ["y"], _dims_modes(src, names), optimize=src.prob(0.7),
                threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=["quantized"],
                constants=src.prob(0.15))


def _e_index_range(src, c, rng):
    idx = c.inputs["expert_idx"].copy()
    E = c.inputs["gate_up_weights"].shape[0]
    if idx.size:
        info = np.iinfo(idx.dtype)  # the oracle judges the value the array holds
        idx.reshape(-1)[src.int(0, idx.size - 1)] = int(np.clip(src.choice([-1, -E, E, 2**31 - 1]), info.min,
                                                                info.max))
    c.inputs["expert_idx"] = idx


def _e_dtype(src, c, rng):
    name = src.choice(EXPERTS_INPUTS)
    c.inputs[name] = c.inputs[name].astype(np.float32 if name == "expert_idx" else
                                           NP_TYPES[src.choice(["double", "float16", "int32"])])


def _e_shape(src, c, rng):
    x, idx = c.inputs["x"], c.inputs["expert_idx"]
    gu, down = c.inputs["gate_up_weights"], c.inputs["down_weights"]
    shapes = [("routing_weights", (idx.shape[0], idx.shape[1] + 1)), ("gate_up_weights", (gu.shape[0], 3, gu.shape[2])),
              ("gate_up_weights", (0,) + gu.shape[1:]), ("gate_up_weights", gu.shape[:2] + (gu.shape[2] + 1,)),
              ("down_weights", (down.shape[0] + 1,) + down.shape[1:]),
              ("down_weights", down.shape[:2] + (down.shape[2] + 1,))]
    shapes = [(n, sh) for n, sh in shapes if np.prod(sh, dtype=float) < 1e7]  # huge E or I: only empty ones
    name, value = src.choice([("x", x.reshape((1,) + x.shape)), ("expert_idx", idx[:max(idx.shape[0] - 1, 0)])]
                             + [(n, np.zeros(sh, np.float32)) for n, sh in shapes])
    c.inputs[name] = value


def _e_limit(src, c, rng):
    c.attrs["swiglu_limit"] = src.choice([-1.0, float("inf"), float("nan")])


def _e_attr_kind(src, c, rng):
    _attr_kind(src, c, rng, EXPERTS_DEFAULTS)


EXPERTS_FAULTS = [
    (_e_index_range, 3), (_e_dtype, 1), (_e_shape, 3), (_e_limit, 1), (_e_attr_kind, 1), (_attr_unknown, 0.5),
    (_opset, 0.2), (_missing_first, 0.3),
]


def gen_case(src) -> Case:
    """One case of any op: gating 30 % (it has the most to get wrong), re-routing 15 %, routed
    experts 10 %, the six pipeline ops (tests/fuzz/cases_ops.py) 45 %."""
    from tests.fuzz.cases_ops import gen_pipeline_case

    u = src.int(0, 19)
    return gen_gating(src) if u < 6 else gen_rerouting(src) if u < 9 else gen_experts(src) if u < 11 \
        else gen_pipeline_case(src)
