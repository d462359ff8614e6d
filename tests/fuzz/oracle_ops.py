"""The Validation sections of docs/operators.md for the pipeline ops (GroupedMatmul §4,
MoeInitRoutingV3 §5, MoeTokenPermute §6, MoeFinalizeRoutingV2 §8, MoeTokenUnpermute §9,
MoeInitRouting §10) applied to a concrete case, written from the document, independently of
the library's and the references' validation code (as :mod:`tests.fuzz.oracle`)."""

from __future__ import annotations

import numpy as np

from tests.fuzz.cases import FLOAT_TYPES, Case, type_name
from tests.fuzz.cases_ops import (
    DEFAULTS,
    FINALIZE,
    GMM,
    GMM_QUANT_INPUTS,
    INIT_V1,
    INIT_V3,
    INPUTS,
    PERMUTE,
    REQUIRED,
    SWIGLU,
    UNPERMUTE,
)

INT_TYPES = ("int32", "int64")
MAX_PAIRS = 2**31 - 1  # N*K < 2^31
MAX_ID = 2**31 - 1     # ids in [0, 2^31 - 1)


def _shape(a) -> tuple:
    return tuple(int(d) for d in a.shape)


def check(case: Case, f, attributes) -> None:
    """Record the faults of ``case`` in ``f`` (an oracle ``_Faults``); ``attributes`` is the
    oracle's attribute resolver."""
    defaults = dict(DEFAULTS[case.op])
    quantized = case.op == GMM and any(n in case.node_inputs for n in GMM_QUANT_INPUTS) or (
        case.op == GMM and "output_dtype" in case.attrs)
    if quantized:
        defaults["output_dtype"] = 0
    kinds = {n: "INT" for n in defaults}
    required = tuple(n for n, v in defaults.items() if v is None)
    a = attributes(case, f, kinds, defaults, required)
    given = {n: (case.inputs.get(n) if n in case.node_inputs else None) for n in INPUTS[case.op]}
    missing = [n for n in INPUTS[case.op][:REQUIRED[case.op]] if given[n] is None]
    for n in missing:  # ORT's own graph check names them by position
        f.add(f"required input '{n}' missing", n, f"input {INPUTS[case.op].index(n)}")
    if quantized:
        given.update({n: (case.inputs.get(n) if n in case.node_inputs else None) for n in GMM_QUANT_INPUTS})
        _grouped_matmul_quantized(a, given, f, bool(missing))
        return
    CHECKS[case.op](a, given, f, bool(missing))


def _in(f, a: dict, name: str, allowed) -> None:
    if a[name] is not None and a[name] not in allowed:
        f.add(f"{name}={a[name]} not in {tuple(allowed)}", name, attribute=True)


def _dtype(f, given, name, allowed) -> bool:
    x = given[name]
    if x is not None and type_name(x) not in allowed:
        f.add(f"{name} is {type_name(x)}", name)
        return False
    return True


# ---- GroupedMatmul §4.3 ------------------------------------------------------------------------


def _grouped_matmul(a, g, f, missing) -> None:
    _in(f, a, "group_list_type", (0, 1))
    _in(f, a, "transpose_weight", (0, 1))
    x, w, gl, bias = (g[n] for n in ("x", "weight", "group_list", "bias"))
    x_ok = _dtype(f, g, "x", FLOAT_TYPES)
    if x is not None and w is not None and type_name(w) != type_name(x):
        f.add(f"weight is {type_name(w)}, x {type_name(x)}", "weight", "x")
    _dtype(f, g, "group_list", INT_TYPES)
    if x is not None and bias is not None and type_name(bias) not in (type_name(x), "float"):
        f.add(f"bias is {type_name(bias)}", "bias")
    if missing or not x_ok:
        return
    if x.ndim != 2:
        f.add(f"x has rank {x.ndim}", "x")
        return
    M, K = _shape(x)
    tw = a["transpose_weight"]
    if tw not in (0, 1):
        return
    if w.ndim != 3 or w.shape[0] < 1 or w.shape[2 if tw else 1] != K:
        f.add(f"weight {list(w.shape)} for K={K}", "weight", "x")
        return
    E, N = w.shape[0], w.shape[1 if tw else 2]
    if gl.ndim != 1 or gl.shape[0] != E:
        f.add(f"group_list {list(gl.shape)} for E={E}", "group_list", "weight")
    if bias is not None and _shape(bias) != (E, N):
        f.add(f"bias {list(bias.shape)} != [{E}, {N}]", "bias")
    if f.reasons or a["group_list_type"] is None:
        return
    values = [int(v) for v in gl.tolist()]
    if a["group_list_type"] == 1:
        total = 0
        for v in values:
            total += v
            if v < 0 or total > M:
                f.add("a group_list count negative or the running sum past M", "group_list")
                return
    elif any(v < p for v, p in zip(values, [0] + values)) or any(v > M for v in values):
        f.add("group_list ends decreasing, negative or past M", "group_list")


def _grouped_matmul_quantized(a, g, f, missing) -> None:
    """§4.3 for calls with quantized inputs (antiquant W8A16 / W4A16, W8A8)."""
    _in(f, a, "group_list_type", (0, 1))
    _in(f, a, "transpose_weight", (0, 1))
    _in(f, a, "output_dtype", (0, 1, 6, 10, 16))
    if missing or f.reasons:
        return
    x, w, gl = g["x"], g["weight"], g["group_list"]
    xt, wt = type_name(x), type_name(w)
    out = a["output_dtype"]
    present = {n for n in GMM_QUANT_INPUTS + ("bias",) if g[n] is not None}
    if "offset" in present:
        f.add("offset present", "offset")
    elif xt == "int8":
        if wt != "int8" or present & {"antiquant_scale", "antiquant_offset"} or \
                (g["bias"] is not None and type_name(g["bias"]) != "int32") or out == 0 or \
                (out == 6 and present & {"scale", "per_token_scale"}) or (out != 6 and "scale" not in present):
            f.add("a W8A8 type rule", "x", "weight", "bias", "scale", "per_token_scale", "output_dtype")
    elif xt in FLOAT_TYPES:
        if wt not in ("int8", "int32") or out not in (0, {"float": 1, "float16": 10, "bfloat16": 16}[xt]) or \
                present & {"scale", "per_token_scale"} or g["antiquant_scale"] is None or \
                type_name(g["antiquant_scale"]) != xt or (g["antiquant_offset"] is not None and
                                                          type_name(g["antiquant_offset"]) != xt) or \
                (g["bias"] is not None and type_name(g["bias"]) not in (xt, "float")):
            f.add("an antiquant type rule", "weight", "antiquant_scale", "antiquant_offset", "bias", "output_dtype")
    else:
        f.add(f"x is {xt}", "x")
    if f.reasons:
        return
    tw = a["transpose_weight"]
    M, K = _shape(x)
    pack = 8 if wt == "int32" else 1
    E = w.shape[0]
    k_len = (w.shape[2] * pack if tw else w.shape[1]) if w.ndim == 3 else -1
    N = w.shape[1] if tw else w.shape[2] * pack
    if x.ndim != 2 or w.ndim != 3 or E < 1 or k_len != K or _shape(gl) != (E,):
        f.add("shapes", "x", "weight", "group_list")
        return
    s = g["antiquant_scale"]
    if s is not None:
        G = 1 if s.ndim == 2 else s.shape[1]
        if _shape(s) not in ((E, N), (E, G, N)) or G < 1 or K % G or (pack == 8 and tw and (K // G) % 2):
            f.add("antiquant_scale shape", "antiquant_scale")
        if g["antiquant_offset"] is not None and _shape(g["antiquant_offset"]) != _shape(s):
            f.add("antiquant_offset shape", "antiquant_offset")
    for name, shape in (("bias", (E, N)), ("scale", (E, N)), ("per_token_scale", (M,))):
        if g[name] is not None and _shape(g[name]) != shape:
            f.add(f"{name} shape", name)
    if f.reasons:
        return
    values = [int(v) for v in gl.tolist()]
    ends = np.cumsum(values) if a["group_list_type"] == 1 else np.array(values)
    if any(v < 0 for v in values) or any(e > M for e in ends) or any(np.diff(ends) < 0):
        f.add("group_list values", "group_list")


# ---- MoeInitRoutingV3 §5.3 -------------------------------------------------------------------


def _init_routing_v3(a, g, f, missing) -> None:
    E = a["expert_num"]
    if E is not None and E < 1:
        f.add(f"expert_num={E}", "expert_num", attribute=True)
    for name, allowed in (("drop_pad_mode", (0, 1)), ("expert_tokens_num_type", (0, 1, 2)),
                          ("expert_tokens_num_flag", (0, 1)), ("quant_mode", (-1, 0, 1)), ("row_idx_type", (0, 1))):
        _in(f, a, name, allowed)
    if a["active_num"] is not None and a["active_num"] < -1:
        f.add(f"active_num={a['active_num']}", "active_num", attribute=True)
    start, end = a["active_expert_start"], a["active_expert_end"]
    range_ok = None not in (start, end, E) and E >= 1
    if range_ok:
        end = E if end == -1 else end
        if not 0 <= start < end <= E:
            f.add(f"active range [{start}, {end}) for expert_num={E}", "active_expert_start", "active_expert_end",
                  attribute=True)
            range_ok = False
    if a["drop_pad_mode"] == 1:
        C = a["expert_capacity"]
        if C is not None and (C < 1 or (E is not None and E >= 1 and E * C > MAX_PAIRS)):
            f.add(f"expert_capacity={C}", "expert_capacity", attribute=True)
        if a["expert_tokens_num_type"] not in (1, None):
            f.add("drop/pad with expert_tokens_num_type != 1", "expert_tokens_num_type", "drop_pad_mode",
                  attribute=True)
        if a["row_idx_type"] not in (0, None):
            f.add("drop/pad with row_idx_type != 0", "row_idx_type", "drop_pad_mode", attribute=True)
        if range_ok and (start, end) != (0, E):
            f.add("drop/pad with a partial expert range", "active_expert_start", "active_expert_end",
                  "drop_pad_mode", attribute=True)
    x, idx, scale, offset = (g[n] for n in INPUTS[INIT_V3])
    quant = a["quant_mode"]
    _dtype(f, g, "x", ("float", "float16", "bfloat16", "int8"))
    _dtype(f, g, "expert_idx", INT_TYPES)
    _dtype(f, g, "scale", ("float",))
    _dtype(f, g, "offset", ("float",))
    if missing:  # shapes are checked whatever the element types (faults are reported in any order)
        return
    if x.ndim != 2 or x.shape[1] < 1:
        f.add(f"x {list(x.shape)}", "x")
        return
    N, H = _shape(x)
    if idx.ndim != 2 or idx.shape[0] != N or idx.shape[1] < 1:
        f.add(f"expert_idx {list(idx.shape)} for N={N}", "expert_idx", "x")
        return
    if idx.size > MAX_PAIRS:
        f.add("N*K >= 2^31", "expert_idx")
    if type_name(x) == "int8" and quant in (0, 1):
        f.add("int8 x with quantisation", "x", "quant_mode")
    if quant not in (-1, 0, 1) or (quant == 1 and not range_ok):
        return
    if quant == 0:
        for name, v in (("scale", scale), ("offset", offset)):
            if v is None or _shape(v) != (1,):
                f.add(f"{name} for static quantisation", name)
    else:
        if offset is not None:
            f.add("offset without static quantisation", "offset")
        if scale is not None and quant == -1 and _shape(scale) != (N,):
            f.add(f"scale {list(scale.shape)} for N={N}", "scale")
        if scale is not None and quant == 1 and (scale.ndim != 2 or scale.shape[1] != H
                                                 or scale.shape[0] not in (1, end - start)):
            f.add(f"smoothing scale {list(scale.shape)}", "scale")
    if f.reasons:
        return
    ids = idx.astype(np.int64)
    if ((ids < 0) | (ids >= E)).any():
        f.add("an expert id outside [0, expert_num)", "expert_idx")


# ---- MoeInitRouting §10.3 ----------------------------------------------------------------------


def _init_routing_v1(a, g, f, missing) -> None:
    if a["active_num"] is not None and a["active_num"] < 0:
        f.add(f"active_num={a['active_num']}", "active_num", attribute=True)
    x, row_idx, idx = (g[n] for n in INPUTS[INIT_V1])
    _dtype(f, g, "x", FLOAT_TYPES)
    _dtype(f, g, "row_idx", ("int32",))
    _dtype(f, g, "expert_idx", ("int32",))
    if missing:
        return
    if x.ndim != 2 or x.shape[1] < 1:
        f.add(f"x {list(x.shape)}", "x")
        return
    N = x.shape[0]
    if idx.ndim != 2 or idx.shape[0] != N or idx.shape[1] < 1:
        f.add(f"expert_idx {list(idx.shape)} for N={N}", "expert_idx", "x")
        return
    if _shape(row_idx) != _shape(idx):
        f.add(f"row_idx {list(row_idx.shape)} != expert_idx's", "row_idx", "expert_idx")
        return
    if f.reasons:
        return
    ids = idx.astype(np.int64)
    if ((ids < 0) | (ids >= MAX_ID)).any():
        f.add("an expert id outside [0, 2^31 - 1)", "expert_idx")
        return
    rows = np.sort(row_idx.reshape(-1).astype(np.int64))
    if not np.array_equal(rows, np.arange(rows.size)):
        f.add("row_idx not a permutation of [0, N*K)", "row_idx")


# ---- MoeTokenPermute §6.3 ----------------------------------------------------------------------


def _token_permute(a, g, f, missing) -> None:
    _in(f, a, "padded_mode", (0,))
    tokens, idx = g["tokens"], g["indices"]
    _dtype(f, g, "tokens", ("float", "float16", "bfloat16", "int8"))
    _dtype(f, g, "indices", INT_TYPES)
    if missing:
        return
    if tokens.ndim != 2 or tokens.shape[1] < 1:
        f.add(f"tokens {list(tokens.shape)}", "tokens")
        return
    N = tokens.shape[0]
    if idx.ndim not in (1, 2) or idx.shape[0] != N or (idx.ndim == 2 and idx.shape[1] < 1):
        f.add(f"indices {list(idx.shape)} for N={N}", "indices", "tokens")
        return
    if f.reasons:
        return
    ids = idx.astype(np.int64)
    if ((ids < 0) | (ids >= MAX_ID)).any():
        f.add("an expert id outside [0, 2^31 - 1)", "indices")


# ---- MoeFinalizeRoutingV2 §8.3 -----------------------------------------------------------------


def _same_types(f, g, groups) -> None:
    """Inputs sharing a type parameter have one element type, each in its allowed set."""
    for names, allowed in groups:
        present = [n for n in names if g[n] is not None]
        for n in present:
            _dtype(f, g, n, allowed)
        if len({type_name(g[n]) for n in present}) > 1:
            f.add(f"{', '.join(present)} of different types", *present[1:])


def _finalize(a, g, f, missing) -> None:
    _in(f, a, "drop_pad_mode", (0, 1, 2, 3))
    mode = a["drop_pad_mode"]
    _same_types(f, g, [(("expanded_x", "x1", "x2", "bias"), FLOAT_TYPES), (("expanded_row_idx",), INT_TYPES),
                       (("scales",), FLOAT_TYPES), (("expert_idx",), INT_TYPES)])
    if missing or mode not in (0, 1, 2, 3):
        return
    x, idx, x1, x2, bias, scales, experts = (g[n] for n in INPUTS[FINALIZE])
    drop_pad = mode in (1, 3)
    if x.ndim != (3 if drop_pad else 2):
        f.add(f"expanded_x rank {x.ndim} for drop_pad_mode {mode}", "expanded_x")
        return
    H = x.shape[-1]
    if idx.ndim != 1:
        f.add(f"expanded_row_idx rank {idx.ndim}", "expanded_row_idx")
        return
    if scales is not None:
        if scales.ndim != 2 or scales.shape[1] < 1:
            f.add(f"scales {list(scales.shape)}", "scales")
            return
        N, K = _shape(scales)
    else:
        N, K = idx.shape[0], 1
    if idx.shape[0] != N * K:
        f.add(f"expanded_row_idx has {idx.shape[0]} entries, N*K={N * K}", "expanded_row_idx", "scales")
    if not drop_pad and x.shape[0] != N * K:
        f.add(f"expanded_x rows {x.shape[0]} != N*K={N * K}", "expanded_x", "expanded_row_idx", "scales")
    for name, v in (("x1", x1), ("x2", x2)):
        if v is not None and _shape(v) != (N, H):
            f.add(f"{name} {list(v.shape)} != [{N}, {H}]", name)
    if x2 is not None and x1 is None:
        f.add("x2 without x1", "x2", "x1")
    if bias is not None:
        if experts is None:
            f.add("bias without expert_idx", "bias", "expert_idx")
        if bias.ndim != 2 or bias.shape[0] < 1 or bias.shape[1] != H or (drop_pad and bias.shape[0] != x.shape[0]):
            f.add(f"bias {list(bias.shape)}", "bias")
    if experts is not None and _shape(experts) != (N, K):
        f.add(f"expert_idx {list(experts.shape)} != [{N}, {K}]", "expert_idx")
    if f.reasons:
        return
    R = int(np.prod(x.shape[:-1]))
    rows = idx.astype(np.int64)
    if ((rows < (-1 if drop_pad else 0)) | (rows >= R)).any():
        f.add("a row index out of range", "expanded_row_idx")
        return
    if bias is not None:
        e = experts.astype(np.int64)
        if ((e < 0) | (e >= bias.shape[0])).any():
            f.add("an expert index outside [0, E)", "expert_idx")


# ---- MoeTokenUnpermute §9.3 --------------------------------------------------------------------


def _unpermute(a, g, f, missing) -> None:
    _in(f, a, "padded_mode", (0,))
    _same_types(f, g, [(("permuted_tokens",), FLOAT_TYPES), (("sorted_indices",), INT_TYPES),
                       (("probs",), FLOAT_TYPES)])
    if missing:
        return
    tokens, idx, probs = (g[n] for n in INPUTS[UNPERMUTE])
    if tokens.ndim != 2:
        f.add(f"permuted_tokens rank {tokens.ndim}", "permuted_tokens")
        return
    if idx.ndim != 1:
        f.add(f"sorted_indices rank {idx.ndim}", "sorted_indices")
        return
    if probs is not None:
        if probs.ndim != 2 or probs.shape[1] < 1:
            f.add(f"probs {list(probs.shape)}", "probs")
            return
        N, K = _shape(probs)
        if idx.shape[0] != N * K:
            f.add(f"sorted_indices has {idx.shape[0]} entries, N*K={N * K}", "sorted_indices", "probs")
            return
    else:
        N, K = idx.shape[0], 1
    if f.reasons:
        return
    limit = max(tokens.shape[0], N * K)
    v = idx.astype(np.int64)
    read = np.ones(v.shape, bool) if probs is None else probs.reshape(-1).astype(np.float32) != 0
    if (((v < 0) | (v >= limit)) & read).any():
        f.add("an index of a read slot outside [0, max(P, N*K))", "sorted_indices")


# ---- SwiGlu §11.3 ------------------------------------------------------------------------------


def _swiglu(a, g, f, missing) -> None:
    x = g["x"]
    dim = a["dim"]
    _dtype(f, g, "x", FLOAT_TYPES)
    if missing or x is None:
        return
    if x.ndim < 1:
        f.add("x is a scalar", "x")
        return
    if dim is not None and not -x.ndim <= dim < x.ndim:
        f.add(f"dim={dim} for rank {x.ndim}", "dim", attribute=True)
        return
    if dim is not None and x.shape[dim] % 2:
        f.add(f"odd size {x.shape[dim]} along dim", "x", "dim")


CHECKS = {GMM: _grouped_matmul, INIT_V3: _init_routing_v3, INIT_V1: _init_routing_v1, PERMUTE: _token_permute,
          FINALIZE: _finalize, UNPERMUTE: _unpermute, SWIGLU: _swiglu}
