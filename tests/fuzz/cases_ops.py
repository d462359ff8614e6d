"""Fuzz cases for the pipeline ops (GroupedMatmul, float and quantized, MoeInitRoutingV3,
MoeInitRouting, MoeTokenPermute, MoeFinalizeRoutingV2, MoeTokenUnpermute, SwiGlu): a mostly valid configuration (the
Validation sections of docs/operators.md) with edge sizes (0 tokens, H or K of 0 where allowed,
empty groups, huge dims that hold no element), then zero to two injected faults. As in
:mod:`tests.fuzz.cases`, validity is decided afterwards by the oracle from the concrete case."""

from __future__ import annotations

from typing import Any

import numpy as np

from tests.fuzz.cases import (
    FLOAT_TYPES,
    NP_TYPES,
    Case,
    _attr_kind,
    _attr_unknown,
    _dims_modes,
    _inject_faults,
    _missing_first,
    _node_inputs,
    _opset,
    float_values,
    random_bits,
)

GMM = "GroupedMatmul"
INIT_V3 = "MoeInitRoutingV3"
INIT_V1 = "MoeInitRouting"
PERMUTE = "MoeTokenPermute"
FINALIZE = "MoeFinalizeRoutingV2"
UNPERMUTE = "MoeTokenUnpermute"
SWIGLU = "SwiGlu"
PIPELINE_OPS = (GMM, INIT_V3, INIT_V1, PERMUTE, FINALIZE, UNPERMUTE, SWIGLU)

INPUTS = {
    GMM: ("x", "weight", "group_list", "bias"),
    INIT_V3: ("x", "expert_idx", "scale", "offset"),
    INIT_V1: ("x", "row_idx", "expert_idx"),
    PERMUTE: ("tokens", "indices"),
    FINALIZE: ("expanded_x", "expanded_row_idx", "x1", "x2", "bias", "scales", "expert_idx"),
    UNPERMUTE: ("permuted_tokens", "sorted_indices", "probs"),
    SWIGLU: ("x",),
}
# GroupedMatmul's quantized inputs (docs/operators.md §4.1), after the float ones
GMM_QUANT_INPUTS = ("scale", "offset", "antiquant_scale", "antiquant_offset", "per_token_scale")
OUTPUTS = {
    GMM: ("y",),
    INIT_V3: ("expanded_x", "expanded_row_idx", "expert_tokens_count_or_cumsum", "expanded_scale"),
    INIT_V1: ("expanded_x", "expanded_row_idx", "expanded_expert_idx"),
    PERMUTE: ("permuted_tokens", "sorted_indices"),
    FINALIZE: ("y",),
    UNPERMUTE: ("unpermuted_tokens",),
    SWIGLU: ("y",),
}
REQUIRED = {GMM: 3, INIT_V3: 2, INIT_V1: 3, PERMUTE: 2, FINALIZE: 2, UNPERMUTE: 2, SWIGLU: 1}  # leading inputs
DEFAULTS = {
    GMM: dict(group_list_type=0, transpose_weight=0),
    INIT_V3: dict(active_num=-1, expert_capacity=-1, expert_num=-1, drop_pad_mode=0, expert_tokens_num_type=0,
                  expert_tokens_num_flag=0, quant_mode=-1, active_expert_start=0, active_expert_end=-1,
                  row_idx_type=0),
    INIT_V1: dict(active_num=None),
    PERMUTE: dict(num_out_tokens=0, padded_mode=0),
    FINALIZE: dict(drop_pad_mode=0),
    UNPERMUTE: dict(padded_mode=0),
    SWIGLU: dict(dim=-1),
}
INDEX_TYPES = ("int32", "int64")
ROW_TYPES = ("float", "float16", "bfloat16", "int8")
BAD_TYPES = ("double", "int32", "int64", "uint8", "bool")


def _case(src, op, attrs, inputs, tags, faults, rng) -> Case:
    """Every output is named (the schemas declare none optional: ONNX refuses fewer)."""
    names = INPUTS[op]
    case = Case(op, attrs, inputs, [], list(OUTPUTS[op]), _dims_modes(src, names),
                optimize=src.prob(0.7), threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=tags,
                constants=src.prob(0.15))
    with np.errstate(invalid="ignore", over="ignore"):  # casts of NaN / inf in dtype faults
        _inject_faults(src, case, faults + COMMON_FAULTS, rng)
    case.node_inputs = _node_inputs(src, names, case.inputs)
    while len(case.node_inputs) < REQUIRED[op]:  # a required input dropped by a fault stays a slot
        case.node_inputs.append("")
    if "missing_required" in case.tags:
        case.node_inputs[src.int(0, REQUIRED[op] - 1)] = ""
    return case


def _set_attrs(src, chosen: dict, defaults: dict, always=()) -> dict:
    """The attributes that differ from the default, the others now and then explicitly."""
    return {n: v for n, v in chosen.items() if n in always or v != defaults.get(n) or src.prob(0.3)}


def _sizes(src, choices, edge=(0,), p_edge=0.1):
    return src.choice(edge) if src.prob(p_edge) else src.choice(choices)


def _rows_values(src, rng, shape, dtype, tags, bits: bool) -> np.ndarray:
    """Rows an op moves (``bits``: any bit pattern, NaN payloads included) or computes with."""
    if bits or dtype == "int8":
        return random_bits(rng, shape, dtype)
    return float_values(src, rng, shape, dtype, tags)


def _matmul_values(src, rng, shape, dtype, tags) -> np.ndarray:
    """Moderate values (a float32 sum must not overflow where the float64 reference does not),
    NaN / inf / -0 / denormals sprinkled now and then."""
    v = (rng.standard_normal(int(np.prod(shape))) * src.choice([0.1, 1.0, 8.0])).astype(np.float32)
    if src.prob(0.1):
        hit = rng.random(v.size) < 0.05
        v[hit] = rng.choice(np.array([np.nan, np.inf, -np.inf, -0.0, 1e-40], np.float32), int(hit.sum()))
        tags.append("special")
    return v.reshape(shape).astype(NP_TYPES[dtype])


def _split(src, rng, total: int, parts: int) -> np.ndarray:
    """``parts`` non-negative counts summing to ``total`` (empty groups included)."""
    if parts == 0:
        return np.zeros(0, np.int64)
    cuts = np.sort(rng.integers(0, total + 1, parts - 1)) if parts > 1 else np.zeros(0, np.int64)
    return np.diff(np.concatenate([[0], cuts, [total]])).astype(np.int64)


# ---- GroupedMatmul -----------------------------------------------------------------------------


def gen_grouped_matmul(src) -> Case:
    if src.prob(0.35):
        return gen_grouped_matmul_quant(src)
    tags: list = []
    rng = np.random.default_rng(src.seed())
    M, K, N = _sizes(src, [1, 2, 5, 17, 64]), _sizes(src, [1, 3, 16, 33], p_edge=0.05), \
        _sizes(src, [1, 2, 7, 16], p_edge=0.05)
    E = src.choice([1, 2, 3, 8])
    if M == 0 and src.prob(0.3):
        K, N = src.choice([(2**40, 0), (2**31 + 1, 0), (0, 2**33)])
        tags.append("huge_empty")
    dtype = src.choice(FLOAT_TYPES)
    glt, tw = src.int(0, 1), src.int(0, 1)
    counts = _split(src, rng, src.int(0, M) if src.prob(0.4) else M, E)
    group_list = counts if glt == 1 else np.cumsum(counts)
    inputs = {"x": _matmul_values(src, rng, (M, K), dtype, tags),
              "weight": _matmul_values(src, rng, (E, N, K) if tw else (E, K, N), dtype, tags),
              "group_list": group_list.astype(src.choice(INDEX_TYPES))}
    if src.prob(0.5) and "huge_empty" not in tags:
        inputs["bias"] = _matmul_values(src, rng, (E, N), src.choice([dtype, "float"]), tags)
    attrs = _set_attrs(src, dict(group_list_type=glt, transpose_weight=tw), DEFAULTS[GMM])
    return _case(src, GMM, attrs, inputs, tags, GMM_FAULTS, rng)


def gen_grouped_matmul_quant(src) -> Case:
    """A valid quantized GroupedMatmul case (docs/operators.md §4.1-§4.2): antiquant W8A16 / W4A16
    (int8 or int4-in-int32 weights, both layouts, per channel or per group, with or without
    antiquant_offset, x holding inf / NaN now and then) or W8A8 (every output_dtype). Row counts
    reach the int4 switch to dequantized panels (32 rows per group). No faults are injected: the
    float cases probe the validation, these the quantized kernels' arithmetic."""
    tags: list = ["quantized"]
    rng = np.random.default_rng(src.seed())
    mode = src.choice(["w8a16", "w4a16", "w8a8"])
    E, tw = src.choice([1, 2, 3]), src.int(0, 1)
    K = src.choice([8, 16, 32, 64]) if mode == "w4a16" else src.choice([1, 3, 8, 16, 33])
    N = src.choice([8, 16, 24]) if mode == "w4a16" else src.choice([1, 2, 7, 16])
    M = src.choice([0, 1, 3, 8, 40, 70])
    counts = _split(src, rng, src.int(0, M) if src.prob(0.3) else M, E)
    glt = src.int(0, 1)
    group_list = (counts if glt == 1 else np.cumsum(counts)).astype(src.choice(INDEX_TYPES))
    attrs: dict[str, Any] = dict(group_list_type=glt, transpose_weight=tw)
    inputs: dict[str, Any] = {}
    if mode == "w8a8":
        inputs["x"] = rng.integers(-128, 128, (M, K)).astype(np.int8)
        inputs["weight"] = rng.integers(-128, 128, (E, N, K) if tw else (E, K, N)).astype(np.int8)
        inputs["group_list"] = group_list
        out = src.choice([1, 6, 10, 16])
        attrs["output_dtype"] = out
        if src.prob(0.5):
            inputs["bias"] = rng.integers(-1000, 1000, (E, N)).astype(np.int32)
        if out != 6:
            inputs["scale"] = (rng.random((E, N)) * 0.01).astype(src.choice([np.float32, NP_TYPES["bfloat16"]]))
            if src.prob(0.5):
                inputs["per_token_scale"] = (rng.random(M) * 2).astype(np.float32)
        return _quant_case(src, inputs, attrs, tags)
    dtype = src.choice(FLOAT_TYPES)
    x = (rng.standard_normal((M, K)) * src.choice([0.5, 2.0])).astype(np.float32)
    if M and src.prob(0.3):  # docs/operators.md §4.2: x @ ((w + offset) * scale) keeps inf / NaN as IEEE does
        hit = rng.random(x.shape) < 0.05
        hit[rng.integers(0, M), rng.integers(0, K)] = True
        x[hit] = rng.choice(np.array([np.inf, -np.inf, np.nan], np.float32), int(hit.sum()))
        tags.append("special")
    inputs["x"] = x.astype(NP_TYPES[dtype])
    if mode == "w8a16":
        inputs["weight"] = rng.integers(-128, 128, (E, N, K) if tw else (E, K, N)).astype(np.int8)
    else:
        shape = (E, N, K // 8) if tw else (E, K, N // 8)
        inputs["weight"] = rng.integers(-(2**31), 2**31, shape, dtype=np.int64).astype(np.int32)
    inputs["group_list"] = group_list
    groups = [g for g in (2, 4, 8) if K % g == 0 and (mode != "w4a16" or not tw or (K // g) % 2 == 0)]
    G = src.choice(groups) if groups and src.prob(0.5) else 0
    shape = (E, G, N) if G else (E, N)
    inputs["antiquant_scale"] = (rng.random(shape) * 0.1 + 0.01).astype(NP_TYPES[dtype])
    if src.prob(0.6):
        offset = rng.integers(-4, 5, shape) if src.prob(0.7) else np.zeros(shape)
        inputs["antiquant_offset"] = offset.astype(np.float32).astype(NP_TYPES[dtype])
    if src.prob(0.4):
        inputs["bias"] = (rng.standard_normal((E, N)) * 0.5).astype(NP_TYPES[src.choice([dtype, "float"])])
    return _quant_case(src, inputs, attrs, tags)


def _quant_case(src, inputs: dict, attrs: dict, tags: list) -> Case:
    names = INPUTS[GMM] + GMM_QUANT_INPUTS
    node_inputs = [n if n in inputs else "" for n in names]
    while node_inputs[-1] == "":
        node_inputs.pop()
    attrs = _set_attrs(src, attrs, DEFAULTS[GMM], always=("output_dtype",))
    return Case(GMM, attrs, inputs, node_inputs, list(OUTPUTS[GMM]), _dims_modes(src, names),
                optimize=src.prob(0.7), threads=src.choice([1, 1, 2]), shape_probes=src.prob(0.5), tags=tags,
                constants=src.prob(0.15))


def _gmm_attr_value(src, c, rng):
    c.attrs[src.choice(["group_list_type", "transpose_weight"])] = src.choice([2, -1, 7])


def _gmm_types(src, c, rng):
    name = src.choice(["x", "weight", "group_list", "bias"])
    a = c.inputs.get(name, np.zeros((1, 1), np.float32))
    new = src.choice(("float", "float16", "bfloat16", "double", "int32") if name != "group_list"
                     else ("float", "int8", "uint64", "int16"))
    c.inputs[name] = a.astype(np.float32).astype(NP_TYPES.get(new, new))


def _gmm_shapes(src, c, rng):
    x, w, g = c.inputs["x"], c.inputs["weight"], c.inputs["group_list"]
    small = [a for a in (x, w) if a.size < 10**6 and max(a.shape, default=0) < 2**20]
    options = [("x", x.reshape((1,) + x.shape)), ("group_list", np.concatenate([g, g[:1] * 0])),
               ("group_list", g.reshape(1, -1)), ("weight", w[:0])]
    if len(small) == 2:
        options += [("x", np.zeros((x.shape[0], x.shape[1] + 1), x.dtype)),
                    ("weight", np.zeros(w.shape[:2], w.dtype)),
                    ("bias", np.zeros((w.shape[0] + 1, 1), c.inputs.get("bias", x).dtype))]
    name, value = src.choice(options)
    c.inputs[name] = value


def _gmm_group_values(src, c, rng):
    g = c.inputs["group_list"].astype(np.int64).copy()
    if not g.size:
        raise IndexError
    i = src.int(0, g.size - 1)
    M = c.inputs["x"].shape[0]
    counts = c.attrs.get("group_list_type", 0) == 1
    g[i] = src.choice([-1, M + 1, 2**31 - 1, -(2**31)] if counts else [-1, M + 1, (g[i - 1] - 1) if i else -2])
    info = np.iinfo(c.inputs["group_list"].dtype)
    c.inputs["group_list"] = np.clip(g, info.min, info.max).astype(c.inputs["group_list"].dtype)


def _gmm_count_overflow(src, c, rng):
    """Counts whose running sum wraps around in int64 back to a plausible total."""
    g = c.inputs["group_list"]
    c.attrs["group_list_type"] = 1
    if g.size < 2:
        raise IndexError
    v = np.zeros(g.size, np.int64)
    v[0], v[1] = 2**62, 2**62
    c.inputs["group_list"] = v


GMM_FAULTS = [(_gmm_attr_value, 2), (_gmm_types, 1.5), (_gmm_shapes, 2), (_gmm_group_values, 3),
              (_gmm_count_overflow, 0.5)]


# ---- MoeInitRoutingV3 ------------------------------------------------------------------------


def gen_init_routing_v3(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    N, K, H = _sizes(src, [1, 2, 5, 17, 64]), src.choice([1, 2, 4, 8]), src.choice([1, 3, 16])
    E = src.choice([1, 2, 4, 8, 16, 64, 300])
    quant = src.choice([-1, -1, 0, 1])
    dtype = src.choice(ROW_TYPES if quant == -1 else FLOAT_TYPES)
    drop_pad = src.prob(0.3)
    ids = rng.integers(0, E, (N, K))
    if src.prob(0.2):
        ids[:] = rng.integers(0, E)  # every pair on one expert
    attrs: dict[str, Any] = dict(expert_num=E, active_num=src.choice([-1, 0, src.int(1, N * K + 2)]),
                                 expert_tokens_num_flag=src.int(0, 1), quant_mode=quant)
    if drop_pad:
        attrs.update(drop_pad_mode=1, expert_capacity=src.int(1, N + 1), expert_tokens_num_type=1)
    else:
        start = src.int(0, E - 1) if src.prob(0.3) else 0
        end = src.choice([-1, src.int(start + 1, E)])
        attrs.update(active_expert_start=start, active_expert_end=end, expert_tokens_num_type=src.int(0, 2),
                     row_idx_type=src.int(0, 1))
    end = E if attrs.get("active_expert_end", -1) == -1 else attrs["active_expert_end"]
    inputs = {"x": _rows_values(src, rng, (N, H), dtype, tags, bits=quant == -1),
              "expert_idx": ids.astype(src.choice(INDEX_TYPES))}
    if quant == -1 and src.prob(0.5):
        inputs["scale"] = random_bits(rng, (N,), "float")
    elif quant == 0:
        inputs["scale"] = np.array([src.choice([0.5, 1.0, 3.0, 0.01])], np.float32)
        inputs["offset"] = np.array([src.choice([0.0, 0.25, -7.5])], np.float32)
    elif quant == 1 and src.prob(0.6):
        rows = src.choice([1, end - attrs.get("active_expert_start", 0)])
        inputs["scale"] = (rng.random((rows, H)) * 2).astype(np.float32)
    attrs = _set_attrs(src, attrs, DEFAULTS[INIT_V3], always=("expert_num",))
    return _case(src, INIT_V3, attrs, inputs, tags, V3_FAULTS, rng)


def _v3_attr_value(src, c, rng):
    E = c.attrs.get("expert_num", 8)
    E = E if isinstance(E, int) else 8
    name, value = src.choice([
        ("expert_num", 0), ("expert_num", -1), ("drop_pad_mode", 2), ("expert_tokens_num_type", 3),
        ("expert_tokens_num_flag", 2), ("quant_mode", 2), ("quant_mode", -2), ("row_idx_type", 2),
        ("active_num", -2), ("active_expert_start", -1), ("active_expert_start", E), ("active_expert_end", E + 1),
        ("active_expert_end", 0), ("expert_capacity", 0), ("expert_capacity", "past")])
    if value == "past":  # one past the int32 row limit: never a valid (if huge) [E, C, H] output
        value = (2**31 - 1) // max(E, 1) + 1
    c.attrs[name] = value


def _v3_drop_pad_combo(src, c, rng):
    """drop_pad_mode 1 with a combination the operator does not define."""
    c.attrs.update(drop_pad_mode=1, expert_capacity=c.attrs.get("expert_capacity", 2) if
                   isinstance(c.attrs.get("expert_capacity"), int) and c.attrs["expert_capacity"] > 0 else 2)
    name, value = src.choice([("expert_tokens_num_type", src.choice([0, 2])), ("row_idx_type", 1),
                              ("active_expert_start", 1), ("active_expert_end", 1)])
    c.attrs[name] = value


def _v3_ids(src, c, rng):
    idx = c.inputs["expert_idx"].copy()
    if not idx.size:
        raise IndexError
    E = c.attrs.get("expert_num", 1)
    info = np.iinfo(idx.dtype)
    idx.reshape(-1)[src.int(0, idx.size - 1)] = int(np.clip(src.choice([-1, E, 2**31 - 1, -(2**40)]),
                                                            info.min, info.max))
    c.inputs["expert_idx"] = idx


def _v3_inputs(src, c, rng):
    x, idx = c.inputs["x"], c.inputs["expert_idx"]
    N, H = x.shape
    name, value = src.choice([
        ("x", x.astype(np.float32).astype(NP_TYPES[src.choice(["double", "int32", "uint8"])])),
        ("x", x.reshape((1,) + x.shape)), ("x", np.zeros((N, 0), x.dtype)),
        ("expert_idx", idx.astype(src.choice([np.float32, np.int16, np.uint8]))), ("expert_idx", idx[:N - 1]),
        ("expert_idx", np.zeros((N, 0), idx.dtype)), ("expert_idx", idx.reshape(-1)),
        ("scale", np.ones(N + 1, np.float32)), ("scale", np.ones((N,), np.float64)), ("scale", np.ones((2, 2), np.float32)),
        ("scale", np.ones((3, H + 1), np.float32)), ("offset", np.zeros(1, np.float32)), ("offset", np.zeros(2, np.float32)),
        ("x", random_bits(rng, (N, H), "int8"))])
    c.inputs[name] = value


def _v3_static_missing(src, c, rng):
    c.attrs["quant_mode"] = 0
    c.inputs.pop(src.choice(["scale", "offset"]), None)


V3_FAULTS = [(_v3_attr_value, 3), (_v3_drop_pad_combo, 1), (_v3_ids, 2), (_v3_inputs, 3), (_v3_static_missing, 0.5)]


# ---- MoeInitRouting ----------------------------------------------------------------------------


def gen_init_routing_v1(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    N, K, H = _sizes(src, [1, 2, 5, 17, 64]), src.choice([1, 2, 4, 8]), src.choice([1, 3, 16])
    dtype = src.choice(FLOAT_TYPES)
    high = src.choice([8, 64, 2**31 - 1])
    row_idx = np.arange(N * K).reshape(K, N).T if src.prob(0.6) else rng.permutation(N * K).reshape(N, K)
    inputs = {"x": random_bits(rng, (N, H), dtype), "row_idx": row_idx.astype(np.int32),
              "expert_idx": rng.integers(0, high, (N, K)).astype(np.int32)}
    attrs = {"active_num": src.choice([0, 1, N, N + 3, src.int(0, 2 * N + 1), 2**31 - 1, 2**62])}
    return _case(src, INIT_V1, attrs, inputs, tags, V1_FAULTS, rng)


def _v1_attr(src, c, rng):
    if src.prob(0.4):
        c.attrs.pop("active_num", None)
    else:
        c.attrs["active_num"] = src.choice([-1, -(2**40)])


def _v1_values(src, c, rng):
    name = src.choice(["row_idx", "expert_idx"])
    a = c.inputs[name].copy()
    if not a.size:
        raise IndexError
    i = src.int(0, a.size - 1)
    if name == "row_idx":
        a.reshape(-1)[i] = src.choice([-1, a.size, a.reshape(-1)[(i + 1) % a.size] if a.size > 1 else -5])
    else:
        a.reshape(-1)[i] = src.choice([-1, 2**31 - 1, -(2**31)])
    c.inputs[name] = a


def _v1_inputs(src, c, rng):
    x, r, e = c.inputs["x"], c.inputs["row_idx"], c.inputs["expert_idx"]
    N, H = x.shape
    name, value = src.choice([
        ("x", x.astype(np.float32).astype(NP_TYPES[src.choice(["double", "int8", "int32"])])),
        ("x", x.reshape(-1)), ("x", np.zeros((N, 0), x.dtype)), ("row_idx", r.astype(np.int64)),
        ("expert_idx", e.astype(np.int64)), ("row_idx", r[:, :1]), ("expert_idx", e[: max(N - 1, 0)]),
        ("expert_idx", np.zeros((N, 0), np.int32)), ("row_idx", r.reshape(-1))])
    c.inputs[name] = value


V1_FAULTS = [(_v1_attr, 1.5), (_v1_values, 3), (_v1_inputs, 3)]


# ---- MoeTokenPermute ---------------------------------------------------------------------------


def gen_token_permute(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    N, K, H = _sizes(src, [1, 2, 5, 17, 64]), src.choice([1, 2, 4, 8]), src.choice([1, 3, 16, 2880])
    high = src.choice([4, 64, 2**31 - 1])
    idx = rng.integers(0, high, (N, K) if K > 1 or src.prob(0.5) else (N,))
    P = idx.size
    inputs = {"tokens": random_bits(rng, (N, H), src.choice(ROW_TYPES)),
              "indices": idx.astype(src.choice(INDEX_TYPES) if high < 2**31 - 1 else "int64")}
    n_out = src.choice([0, 0, src.int(1, P + 3), -src.int(0, P + 3), 2**40, -(2**40)])
    attrs = _set_attrs(src, dict(num_out_tokens=n_out, padded_mode=0), DEFAULTS[PERMUTE])
    return _case(src, PERMUTE, attrs, inputs, tags, PERMUTE_FAULTS, rng)


def _p_attr(src, c, rng):
    c.attrs["padded_mode"] = src.choice([1, -1])


def _p_values(src, c, rng):
    idx = c.inputs["indices"].copy()
    if not idx.size:
        raise IndexError
    info = np.iinfo(idx.dtype)
    idx.reshape(-1)[src.int(0, idx.size - 1)] = int(np.clip(src.choice([-1, 2**31 - 1, 2**40]), info.min, info.max))
    c.inputs["indices"] = idx


def _p_inputs(src, c, rng):
    t, idx = c.inputs["tokens"], c.inputs["indices"]
    N = t.shape[0]
    name, value = src.choice([
        ("tokens", np.zeros(t.shape, NP_TYPES[src.choice(["double", "int32", "bool", "uint8"])])),
        ("tokens", t.reshape(-1)), ("tokens", np.zeros((N, 0), t.dtype)),
        ("indices", idx.astype(src.choice([np.float32, np.uint8, np.int16]))), ("indices", idx[: max(N - 1, 0)]),
        ("indices", np.zeros((N, 0), idx.dtype)), ("indices", idx.reshape(idx.shape + (1, 1)))])
    c.inputs[name] = value


PERMUTE_FAULTS = [(_p_attr, 1), (_p_values, 2), (_p_inputs, 3)]


# ---- MoeFinalizeRoutingV2 ----------------------------------------------------------------------


def gen_finalize(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    mode = src.int(0, 3)
    N, H = _sizes(src, [1, 2, 5, 17, 64]), src.choice([1, 3, 16, 40])
    with_scales = src.prob(0.8)
    K = src.choice([1, 2, 4, 8]) if with_scales else 1
    dtype = src.choice(FLOAT_TYPES)
    drop_pad = mode in (1, 3)
    E, C = src.choice([1, 2, 4, 8]), src.choice([1, 2, 4, 8])
    if drop_pad:
        x = float_values(src, rng, (E, C, H), dtype, tags)
        idx = rng.integers(-1, E * C, N * K)
    else:
        x = float_values(src, rng, (N * K, H), dtype, tags)
        idx = rng.permutation(N * K) if src.prob(0.6) else rng.integers(0, max(N * K, 1), N * K)
    inputs = {"expanded_x": x, "expanded_row_idx": idx.astype(src.choice(INDEX_TYPES))}
    if src.prob(0.5):
        inputs["x1"] = float_values(src, rng, (N, H), dtype, [])
        if src.prob(0.5):
            inputs["x2"] = float_values(src, rng, (N, H), dtype, [])
    if src.prob(0.4):
        bias_rows = E if drop_pad or src.prob(0.5) else src.choice([1, 3, 16])
        inputs["bias"] = float_values(src, rng, (bias_rows, H), dtype, [])
        inputs["expert_idx"] = rng.integers(0, bias_rows, (N, K)).astype(src.choice(INDEX_TYPES))
    elif src.prob(0.1):
        inputs["expert_idx"] = rng.integers(0, 4, (N, K)).astype(src.choice(INDEX_TYPES))  # read for bias only
    if with_scales:
        w = rng.random((N, K)).astype(np.float32)
        w[rng.random((N, K)) < 0.1] = 0
        inputs["scales"] = w.astype(NP_TYPES[src.choice(FLOAT_TYPES)])
    attrs = _set_attrs(src, dict(drop_pad_mode=mode), DEFAULTS[FINALIZE])
    return _case(src, FINALIZE, attrs, inputs, tags, FINALIZE_FAULTS, rng)


def _f_attr(src, c, rng):
    c.attrs["drop_pad_mode"] = src.choice([4, -1, 2**33])


def _f_rows(src, c, rng):
    idx = c.inputs["expanded_row_idx"].copy()
    if not idx.size:
        raise IndexError
    x = c.inputs["expanded_x"]
    R = int(np.prod(x.shape[:-1]))
    idx[src.int(0, idx.size - 1)] = src.choice([-1, -2, R, 2**31 - 1])
    c.inputs["expanded_row_idx"] = idx


def _f_experts(src, c, rng):
    if "bias" not in c.inputs:
        raise KeyError
    e = c.inputs["expert_idx"].copy()
    if not e.size:
        raise IndexError
    e.reshape(-1)[src.int(0, e.size - 1)] = src.choice([-1, c.inputs["bias"].shape[0]])
    c.inputs["expert_idx"] = e


def _f_inputs(src, c, rng):
    x, idx = c.inputs["expanded_x"], c.inputs["expanded_row_idx"]
    H = x.shape[-1]
    scales = c.inputs.get("scales")
    N = scales.shape[0] if scales is not None else idx.shape[0]
    K = scales.shape[1] if scales is not None else 1
    other = src.choice([t for t in FLOAT_TYPES if t != "float"] + ["float"])
    name, value = src.choice([
        ("expanded_x", x.reshape((1,) + x.shape)), ("expanded_x", x.reshape(-1, H)[:, None]),
        ("expanded_x", x.astype(np.float32).astype(NP_TYPES[src.choice(["double", "int32"])])),
        ("expanded_row_idx", idx[:-1] if idx.size else np.zeros(1, idx.dtype)),
        ("expanded_row_idx", idx.reshape(1, -1)), ("expanded_row_idx", idx.astype(np.float32)),
        ("x1", np.zeros((N, H + 1), x.dtype)), ("x1", np.zeros((N, H), NP_TYPES[other])),
        ("x2", np.zeros((N, H), x.dtype)), ("bias", np.zeros((3, H), x.dtype)),
        ("bias", np.zeros((x.shape[0] + 1, H), x.dtype)), ("bias", np.zeros((2, H + 1), x.dtype)),
        ("bias", np.zeros((0, H), x.dtype)),
        ("expert_idx", np.zeros((N, K + 1), np.int32)), ("expert_idx", np.zeros((N, K), np.float32)),
        ("scales", np.ones((N, 0), np.float32)), ("scales", np.ones(N * K, np.float32)),
        ("scales", np.ones((N, K), np.float64))])
    if name == "x2":
        c.inputs.pop("x1", None)
    c.inputs[name] = value


FINALIZE_FAULTS = [(_f_attr, 1), (_f_rows, 3), (_f_experts, 1.5), (_f_inputs, 4)]


# ---- MoeTokenUnpermute -------------------------------------------------------------------------


def gen_unpermute(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    N, H = _sizes(src, [1, 2, 5, 17, 64]), src.choice([1, 3, 16, 40])
    with_probs = src.prob(0.8)
    K = src.choice([1, 2, 4, 8]) if with_probs else 1
    P = N * K if src.prob(0.6) else src.int(0, N * K + 3)  # P < N*K: rows dropped by the permute
    dtype = src.choice(FLOAT_TYPES)
    idx = rng.permutation(N * K) if P >= N * K and src.prob(0.5) else rng.integers(0, max(P, N * K, 1), N * K)
    inputs = {"permuted_tokens": float_values(src, rng, (P, H), dtype, tags), "sorted_indices": idx}
    if with_probs:
        w = rng.random((N, K)).astype(np.float32)
        zero = rng.random((N, K)) < src.choice([0.0, 0.2, 1.0])
        w[zero] = 0
        idx[zero.reshape(-1)] = rng.choice([-1, -(2**31), 2**31 - 1], int(zero.sum()))  # never read
        inputs["probs"] = w.astype(NP_TYPES[src.choice(FLOAT_TYPES)])
    inputs["sorted_indices"] = idx.astype(src.choice(INDEX_TYPES))
    attrs = _set_attrs(src, dict(padded_mode=0), DEFAULTS[UNPERMUTE])
    return _case(src, UNPERMUTE, attrs, inputs, tags, UNPERMUTE_FAULTS, rng)


def _u_attr(src, c, rng):
    c.attrs["padded_mode"] = src.choice([1, -1])


def _u_indices(src, c, rng):
    idx = c.inputs["sorted_indices"].copy()
    if not idx.size:
        raise IndexError
    P, NK = c.inputs["permuted_tokens"].shape[0], idx.size
    idx[src.int(0, idx.size - 1)] = src.choice([-1, max(P, NK), 2**31 - 1])
    c.inputs["sorted_indices"] = idx


def _u_inputs(src, c, rng):
    t, idx = c.inputs["permuted_tokens"], c.inputs["sorted_indices"]
    probs = c.inputs.get("probs")
    N = probs.shape[0] if probs is not None else idx.shape[0]
    name, value = src.choice([
        ("permuted_tokens", t.reshape((1,) + t.shape)), ("permuted_tokens", t.astype(np.float32).astype(np.float64)),
        ("sorted_indices", idx[:-1] if idx.size else np.zeros(1, idx.dtype)), ("sorted_indices", idx.reshape(1, -1)),
        ("sorted_indices", idx.astype(np.float32)), ("probs", np.ones((N, 0), np.float32)),
        ("probs", np.ones(N, np.float32)), ("probs", np.ones((N, 1), np.int32))])
    c.inputs[name] = value


UNPERMUTE_FAULTS = [(_u_attr, 1), (_u_indices, 3), (_u_inputs, 3)]


# ---- SwiGlu ------------------------------------------------------------------------------------


def gen_swiglu(src) -> Case:
    tags: list = []
    rng = np.random.default_rng(src.seed())
    rank = src.choice([1, 2, 2, 3])
    shape = [src.choice([0, 1, 3, 5]) if src.prob(0.1) else src.choice([1, 2, 4, 7]) for _ in range(rank)]
    dim = src.int(-rank, rank - 1)
    shape[dim] = 2 * src.choice([1, 2, 8, 64, 129])
    x = float_values(src, rng, tuple(shape), src.choice(FLOAT_TYPES), tags)
    attrs = _set_attrs(src, dict(dim=dim), DEFAULTS[SWIGLU])
    return _case(src, SWIGLU, attrs, {"x": x}, tags, SWIGLU_FAULTS, rng)


def _s_dim(src, c, rng):
    rank = c.inputs["x"].ndim
    c.attrs["dim"] = src.choice([rank, -rank - 1, 2**40])


def _s_inputs(src, c, rng):
    x = c.inputs["x"]
    dim = c.attrs.get("dim", -1)
    dim = dim if type(dim) is int and -x.ndim <= dim < x.ndim else -1
    odd = list(x.shape)
    odd[dim] = src.choice([1, 3, 5])
    c.inputs["x"] = src.choice([np.zeros(odd, x.dtype), x.astype(np.float32).astype(np.float64),
                                x.astype(np.float32).astype(np.int32), np.zeros((), x.dtype)])


SWIGLU_FAULTS = [(_s_dim, 1), (_s_inputs, 2)]


# ---- shared faults -----------------------------------------------------------------------------


def _attr_kind_any(src, c, rng):
    _attr_kind(src, c, rng, {n: v for n, v in DEFAULTS[c.op].items() if v is not None})


COMMON_FAULTS = [(_attr_kind_any, 1), (_attr_unknown, 0.5), (_opset, 0.2), (_missing_first, 0.3)]

GENERATORS = {GMM: gen_grouped_matmul, INIT_V3: gen_init_routing_v3, INIT_V1: gen_init_routing_v1,
              PERMUTE: gen_token_permute, FINALIZE: gen_finalize, UNPERMUTE: gen_unpermute, SWIGLU: gen_swiglu}


def gen_pipeline_case(src) -> Case:
    """A case of one of the pipeline ops, each equally often."""
    return GENERATORS[src.choice(PIPELINE_OPS)](src)
