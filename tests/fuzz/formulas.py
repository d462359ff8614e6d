"""The fuzzer's value oracle for the Ascend MoE family: each op's outputs computed in float64 NumPy
straight from the formulas of docs/operators.md (§3.2, §4.2, §5.2, §6.2, §8.2, §9.2, §10.2, §11.2),
written apart from the project's references (``onnx_schemas.*.reference``) and kernels, so that a
mistake shared by them does not pass unseen. Inputs are assumed valid (the validity oracle,
:mod:`tests.fuzz.oracle_ops`, decides that first).

Each function returns ``(outputs, magnitudes)``: the outputs in the types the contract gives them,
and for outputs that are sums, the float64 sum of the magnitudes of their terms (the scale of the
float32 rounding error a kernel may make; None for outputs that are moved or exact). Non-finite
terms count 0 in the magnitudes: a finite result has none, and a non-finite one is judged by
IEEE arithmetic unless its finite terms alone may overflow a float32 sum."""

from __future__ import annotations

import ml_dtypes
import numpy as np

F64 = np.float64
# ONNX element type codes of GroupedMatmul's output_dtype (docs/operators.md §4.1)
OUTPUT_DTYPES = {1: np.float32, 6: np.int32, 10: np.float16, 16: ml_dtypes.bfloat16}


def _f64(a) -> np.ndarray:
    return np.asarray(a).astype(F64)


def _round_to(v: np.ndarray, dtype) -> np.ndarray:
    """float64 -> float32 -> the output type (the kernels round a float32 value once)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return v.astype(np.float32).astype(dtype)


def _finite(v: np.ndarray) -> np.ndarray:
    """``v`` with its inf and NaN entries 0 (for magnitudes)."""
    return np.where(np.isfinite(v), v, 0.0)


def _products(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """x [R, K] @ w [K, N] (inf * 0 giving NaN as IEEE does) and the magnitudes of its finite
    terms, in float64."""
    with np.errstate(over="ignore", invalid="ignore"):
        return x @ w, np.abs(_finite(x)) @ np.abs(_finite(w))


# ---- GroupedMatmul §4.2 --------------------------------------------------------------------------


def int4_words(words: np.ndarray) -> np.ndarray:
    """int32 words [..., W] -> int64 [..., 8 W]: element 8j + i is bits [4i, 4i + 4) of word j,
    two's complement (docs/operators.md §4.1, "int4 layout")."""
    u = words.astype(np.int64) & 0xFFFFFFFF
    nibbles = np.stack([(u >> (4 * i)) & 0xF for i in range(8)], axis=-1)
    nibbles = np.where(nibbles >= 8, nibbles - 16, nibbles)
    return nibbles.reshape(words.shape[:-1] + (words.shape[-1] * 8,))


def grouped_matmul(x, weight, group_list, bias=None, scale=None, offset=None, antiquant_scale=None,
                   antiquant_offset=None, per_token_scale=None, group_list_type=0, transpose_weight=0,
                   output_dtype=0, **_):
    M = x.shape[0]
    w = int4_words(weight) if weight.dtype == np.int32 else weight
    if transpose_weight:
        w = np.swapaxes(w, 1, 2)  # [E, K, N]
    E, K, N = w.shape
    counts = np.asarray(group_list).astype(np.int64)
    ends = np.cumsum(counts) if group_list_type == 1 else counts
    starts = np.concatenate([[0], ends[:-1]])
    if x.dtype == np.int8:  # W8A8: exact integer sums, then the float64 dequant in that order
        acc = np.zeros((M, N), np.int64)
        for e in range(E):
            a, b = int(starts[e]), int(ends[e])
            acc[a:b] = x[a:b].astype(np.int64) @ w[e].astype(np.int64)
            if bias is not None:
                acc[a:b] += bias[e].astype(np.int64)
        out_type = OUTPUT_DTYPES[output_dtype]
        if out_type == np.int32:
            return [acc.astype(np.int32)], [None]
        y = np.zeros((M, N))
        for e in range(E):
            a, b = int(starts[e]), int(ends[e])
            y[a:b] = acc[a:b].astype(F64)
            if scale is not None:
                y[a:b] = y[a:b] * _f64(scale[e])
            if per_token_scale is not None:
                y[a:b] = y[a:b] * _f64(per_token_scale[a:b])[:, None]
        return [_round_to(y, out_type)], [None]
    wd = _f64(w)
    if antiquant_scale is not None:  # (w + offset) * scale, group g over rows [g K/G, (g+1) K/G)
        s = _f64(antiquant_scale).reshape(E, -1, N)
        o = np.zeros_like(s) if antiquant_offset is None else _f64(antiquant_offset).reshape(E, -1, N)
        rows = K // s.shape[1]
        for g in range(s.shape[1]):
            wd[:, g * rows:(g + 1) * rows] = (wd[:, g * rows:(g + 1) * rows] + o[:, g:g + 1]) * s[:, g:g + 1]
    xs = _f64(x)
    y, mag = np.zeros((M, N)), np.zeros((M, N))
    for e in range(E):
        a, b = int(starts[e]), int(ends[e])
        if a == b:
            continue
        y[a:b], mag[a:b] = _products(xs[a:b], wd[e])
        if bias is not None:
            y[a:b] += _f64(bias[e])
            mag[a:b] += np.abs(_finite(_f64(bias[e])))
    return [_round_to(y, x.dtype)], [mag]


# ---- MoeInitRoutingV3 §5.2 -----------------------------------------------------------------------


def _quantize_dynamic(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """float32 rows [R, H] -> (int8 q, float32 s) with s = max|r| / 127, q = round(r / s)."""
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        s = (np.abs(rows).max(axis=1) if rows.shape[1] else np.zeros(rows.shape[0], np.float32)) / np.float32(127)
        s = s.astype(np.float32)
        if rows.size and np.isnan(rows).any():
            s = np.where(np.isnan(rows).any(axis=1), np.float32(np.nan), s)
        q = np.rint(rows / s[:, None])
    q = np.where(np.isnan(q), 0, np.clip(q, -128, 127))
    return q.astype(np.int8), s


def _quantize_static(rows: np.ndarray, scale: float, offset: float) -> np.ndarray:
    h = np.float16
    with np.errstate(over="ignore", invalid="ignore"):
        v = (rows.astype(h) * h(scale)).astype(h)
        v = (v + h(offset)).astype(h)
        q = np.rint(v.astype(F64))
    return np.where(np.isnan(q), 0, np.clip(q, -128, 127)).astype(np.int8)


def init_routing_v3(x, expert_idx, scale=None, offset=None, active_num=-1, expert_capacity=-1, expert_num=-1,
                    drop_pad_mode=0, expert_tokens_num_type=0, expert_tokens_num_flag=0, quant_mode=-1,
                    active_expert_start=0, active_expert_end=-1, row_idx_type=0, **_):
    N, K = expert_idx.shape
    H = x.shape[1]
    E = expert_num
    start, end = active_expert_start, (E if active_expert_end == -1 else active_expert_end)
    ids = expert_idx.reshape(-1).astype(np.int64)
    P = N * K
    active = (ids >= start) & (ids < end)
    positions = np.arange(P)
    act = positions[active]
    order = act[np.argsort(ids[act], kind="stable")]
    A = order.size
    counts = np.array([int((ids[act] == e).sum()) for e in range(start, end)], np.int64)
    if expert_tokens_num_type == 1:
        count_out = counts
    elif expert_tokens_num_type == 0:
        count_out = np.cumsum(counts)
    else:
        nz = [(start + i, c) for i, c in enumerate(counts.tolist()) if c > 0]
        count_out = np.zeros((E, 2), np.int64)
        if nz:
            count_out[:len(nz)] = np.array(nz, np.int64)
    token_scale = None if scale is None or quant_mode != -1 else scale.astype(np.float32)

    def rows_of(tokens: np.ndarray, experts: np.ndarray):
        """The rows for these tokens (expert of each for the smoothing scale) and their scales."""
        src = x[tokens]
        if quant_mode == -1:
            sc = token_scale[tokens] if token_scale is not None else np.zeros(tokens.size, np.float32)
            return src, sc
        if quant_mode == 0:
            return (_quantize_static(src, float(scale.reshape(-1)[0]), float(offset.reshape(-1)[0])),
                    np.zeros(tokens.size, np.float32))
        r = src.astype(np.float32)
        if scale is not None:
            smooth = scale.astype(np.float32)
            r = r * (smooth[np.zeros(tokens.size, np.int64)] if smooth.shape[0] == 1 else smooth[experts - start])
        return _quantize_dynamic(r.astype(np.float32))

    out_type = x.dtype if quant_mode == -1 else np.int8
    if drop_pad_mode == 1:
        C = expert_capacity
        ex = np.zeros((E * C, H), out_type)
        es = np.zeros(E * C, np.float32)
        row_idx = np.full(P, -1, np.int64)
        slot = {}
        dest, src_pos = [], []
        for p in order.tolist():
            e = int(ids[p])
            j = slot.get(e, 0)
            slot[e] = j + 1
            if j < C:
                row_idx[p] = e * C + j
                dest.append(e * C + j)
                src_pos.append(p)
        if dest:
            d, sp = np.array(dest), np.array(src_pos)
            ex[d], es[d] = rows_of(sp // K, ids[sp])
        return [ex.reshape(E, C, H), row_idx.astype(np.int32), count_out, es], [None] * 4
    R = P if active_num <= 0 else min(active_num, P)
    n = min(R, A)
    ex = np.zeros((R, H), out_type)
    es = np.zeros(R, np.float32)
    if n:
        ex[:n], es[:n] = rows_of(order[:n] // K, ids[order[:n]])
    row_idx = np.full(P, -1, np.int64)
    if row_idx_type == 0:
        row_idx[order] = np.arange(A)
    else:
        row_idx[:A] = order
    return [ex, row_idx.astype(np.int32), count_out, es], [None] * 4


# ---- MoeTokenPermute §6.2 ------------------------------------------------------------------------


def token_permute(tokens, indices, num_out_tokens=0, padded_mode=0, **_):
    ids = indices.reshape(-1).astype(np.int64)
    K = indices.shape[1] if indices.ndim == 2 else 1
    P = ids.size
    order = np.argsort(ids, kind="stable")
    R = min(num_out_tokens, P) if num_out_tokens > 0 else max(P + num_out_tokens, 0)
    inverse = np.zeros(P, np.int64)
    inverse[order] = np.arange(P)
    return [tokens[order[:R] // K], inverse.astype(np.int32)], [None, None]


# ---- MoeFinalizeRoutingV2 §8.2 -------------------------------------------------------------------


def finalize_routing_v2(expanded_x, expanded_row_idx, x1=None, x2=None, bias=None, scales=None, expert_idx=None,
                        drop_pad_mode=0, **_):
    H = expanded_x.shape[-1]
    rows = _f64(expanded_x).reshape(-1, H)
    idx = expanded_row_idx.astype(np.int64)
    if scales is not None:
        N, K = scales.shape
        w = _f64(scales)
    else:
        N, K = idx.shape[0], 1
        w = np.ones((N, 1))
    y, mag = np.zeros((N, H)), np.zeros((N, H))
    for skip in (x1, x2):
        if skip is not None:
            y += _f64(skip)
            mag += np.abs(_finite(_f64(skip)))
    slot_major = drop_pad_mode in (0, 1)
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(N):
            for k in range(K):
                r = int(idx[k * N + i] if slot_major else idx[i * K + k])
                term = rows[r] if r >= 0 else np.zeros(H)
                if bias is not None:
                    term = term + _f64(bias[int(expert_idx[i, k])])
                y[i] += w[i, k] * term
                mag[i] += _finite(np.abs(w[i, k]) * (np.abs(rows[r]) if r >= 0 else 0)) + (
                    _finite(np.abs(w[i, k] * _f64(bias[int(expert_idx[i, k])]))) if bias is not None else 0)
    return [_round_to(y, expanded_x.dtype)], [mag]


# ---- MoeTokenUnpermute §9.2 ----------------------------------------------------------------------


def token_unpermute(permuted_tokens, sorted_indices, probs=None, padded_mode=0, **_):
    P, H = permuted_tokens.shape
    rows = _f64(permuted_tokens)
    idx = sorted_indices.astype(np.int64)
    if probs is not None:
        N, K = probs.shape
        w = _f64(probs)
    else:
        N, K = idx.shape[0], 1
        w = np.ones((N, 1))
    y, mag = np.zeros((N, H)), np.zeros((N, H))
    with np.errstate(over="ignore", invalid="ignore"):
        for i in range(N):
            for k in range(K):
                r = int(idx[i * K + k])
                if w[i, k] == 0 or r >= P:  # not read at all: nothing added
                    continue
                y[i] += w[i, k] * rows[r]
                mag[i] += _finite(np.abs(w[i, k] * rows[r]))
    return [_round_to(y, permuted_tokens.dtype)], [mag]


# ---- MoeInitRouting §10.2 ------------------------------------------------------------------------


def init_routing(x, row_idx, expert_idx, active_num=0, **_):
    N, K = expert_idx.shape
    experts = expert_idx.reshape(-1).astype(np.int64)
    order = np.argsort(experts, kind="stable")
    dst_to_src = row_idx.reshape(-1).astype(np.int64)[order]
    rows = min(N, active_num) * K
    expanded_x = x[dst_to_src[:rows] % N] if N else x[:0]
    expanded_row_idx = np.zeros(N * K, np.int64)
    expanded_row_idx[dst_to_src] = np.arange(N * K)
    return [expanded_x, expanded_row_idx.astype(np.int32), experts[order].astype(np.int32)], [None] * 3


# ---- SwiGlu §11.2 --------------------------------------------------------------------------------


def swiglu(x, dim=-1, **_):
    a, b = np.split(_f64(x), 2, axis=dim)
    with np.errstate(over="ignore", invalid="ignore"):
        y = a / (1 + np.exp(-a)) * b
        # computed in float32 (§11.2), exp(-a) overflows below a = -88.7 and silu(a) becomes ±0:
        # there the whole value (below 1e-36 · |b|) is within the float32 evaluation's error, and
        # with b = ±inf the float32 result is 0 · inf = NaN (or ±inf at the threshold)
        flushed = np.exp(-a) > np.finfo(np.float32).max
        magnitude = _finite(np.where(flushed, np.abs(y) * 2.0**24, np.abs(y)))
        magnitude = np.where(flushed & ~np.isfinite(b), np.inf, magnitude)
    return [_round_to(y, x.dtype)], [magnitude]


# ---- MoeRoutedExperts §3.2 -----------------------------------------------------------------------


def _expert_weights(q: np.ndarray, scales, bits: int, block: int) -> np.ndarray:
    """float64 [E, rows, cols] of int8 / 4-bit weights times their row or block scales (§3.2)."""
    if scales is None:
        return _f64(q)
    v = q.astype(np.int64)
    if bits == 4:  # element 2j in the low nibble, 2j + 1 in the high one, two's complement
        u = v & 0xFF
        lo, hi = u & 0xF, u >> 4
        v = np.stack([np.where(lo >= 8, lo - 16, lo), np.where(hi >= 8, hi - 16, hi)], axis=-1)
        v = v.reshape(q.shape[:-1] + (q.shape[-1] * 2,))
    s = _f64(scales)
    if block == 0:
        return v * s[..., None]
    return v * np.repeat(s, block, axis=-1)


def routed_experts(x, expert_idx, routing_weights, gate_up_weights, down_weights, gate_up_scales=None,
                   down_scales=None, gate_up_bias=None, down_bias=None, swiglu_limit=0.0, weight_bits=8,
                   block_size=0, activation_alpha=1.0, activation_beta=0.0, **_):
    T, H = x.shape
    if H == 0:  # an empty y, whatever E and I the (empty) weights declare
        return [np.zeros((T, 0), np.float32)], [None]
    gu = _expert_weights(gate_up_weights, gate_up_scales, weight_bits, block_size)  # [E, 2I, H]
    dn = _expert_weights(down_weights, down_scales, weight_bits, block_size)  # [E, H, I]
    xs = _f64(x)
    y = np.zeros((T, H))
    for t in range(T):
        for j in range(expert_idx.shape[1]):
            e = int(expert_idx[t, j])
            h = gu[e] @ xs[t] + (0.0 if gate_up_bias is None else _f64(gate_up_bias[e]))
            g, u = h[0::2], h[1::2]
            if swiglu_limit > 0:
                g, u = np.minimum(g, swiglu_limit), np.clip(u, -swiglu_limit, swiglu_limit)
            a = g / (1 + np.exp(-activation_alpha * g)) * (u + activation_beta)
            out = dn[e] @ a + (0.0 if down_bias is None else _f64(down_bias[e]))
            y[t] += float(routing_weights[t, j]) * out
    return [y.astype(np.float32)], [None]


FORMULAS = {
    "GroupedMatmul": grouped_matmul, "MoeInitRoutingV3": init_routing_v3, "MoeTokenPermute": token_permute,
    "MoeFinalizeRoutingV2": finalize_routing_v2, "MoeTokenUnpermute": token_unpermute,
    "MoeInitRouting": init_routing, "SwiGlu": swiglu, "MoeRoutedExperts": routed_experts,
}


def evaluate(op: str, given: dict, attrs: dict) -> tuple[list, list]:
    """``(outputs, magnitudes)`` of ``op`` on the given inputs (name -> array) and attributes."""
    return FORMULAS[op](**given, **attrs)
