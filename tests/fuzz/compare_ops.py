"""The pipeline ops' side of :mod:`tests.fuzz.execute`: declared output types, the NumPy
references (onnx_schemas) and the comparison of the kernels' outputs with them.

Rows that an op moves (init routing, permute) must be equal bit for bit, integer outputs
exactly; sums (GroupedMatmul, MoeFinalizeRoutingV2, MoeTokenUnpermute) within a bound derived
from the contract: the kernels sum in float32 (the GroupedMatmul reference in float64, the
others in float32 in slot order, the kernels possibly with fused multiply-adds) and round once
to the output type, so they may differ by one unit of the output type plus the float32 error of
a sum of that many terms, measured on the sum of the terms' magnitudes."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tests.fuzz.cases import Case
from tests.fuzz.cases_ops import FINALIZE, GMM, INIT_V3, INPUTS, OUTPUTS, UNPERMUTE

# unit roundoff and smallest subnormal of each output type
_ROUNDOFF = {"float32": (2.0**-24, 2.0**-149), "float16": (2.0**-11, 2.0**-24), "bfloat16": (2.0**-8, 2.0**-133)}


def _spec(op: str):
    from ascend_moe_onnx.onnx_schemas import (
        grouped_matmul,
        moe_finalize_routing_v2,
        moe_init_routing,
        moe_init_routing_v3,
        moe_token_permute,
        moe_token_unpermute,
    )

    return {GMM: grouped_matmul, INIT_V3: moe_init_routing_v3, "MoeInitRouting": moe_init_routing,
            "MoeTokenPermute": moe_token_permute, FINALIZE: moe_finalize_routing_v2,
            UNPERMUTE: moe_token_unpermute}[op]


def output_types(case: Case, input_type) -> dict:
    """Element type of each output as the kernels write it; ``input_type(name, fallback)`` is
    the ONNX type of a given input."""
    first = INPUTS[case.op][0]
    types = {GMM: {"y": input_type("x")},
             INIT_V3: {"expanded_x": input_type("x"), "expanded_row_idx": TensorProto.INT32,
                       "expert_tokens_count_or_cumsum": TensorProto.INT64, "expanded_scale": TensorProto.FLOAT},
             "MoeInitRouting": {"expanded_x": input_type("x"), "expanded_row_idx": TensorProto.INT32,
                                "expanded_expert_idx": TensorProto.INT32},
             "MoeTokenPermute": {"permuted_tokens": input_type("tokens"), "sorted_indices": TensorProto.INT32},
             FINALIZE: {"y": input_type(first)}, UNPERMUTE: {"unpermuted_tokens": input_type(first)}}[case.op]
    if case.op == INIT_V3:
        quant = case.attrs.get("quant_mode", -1)
        if type(quant) is not int or quant not in (-1, 0, 1):
            # the type is the invalid attribute's to decide: the graph leaves it to the op (ORT
            # compares a declared type with the inferred one before the kernel can refuse the node)
            types["expanded_x"] = None
        elif quant in (0, 1):
            types["expanded_x"] = TensorProto.INT8
    return types


def reference(case: Case, given: dict):
    spec = _spec(case.op)
    return spec.reference(*[given.get(n) for n in spec.INPUT_NAMES], **case.attrs)


def _magnitude(case: Case, given: dict) -> np.ndarray:
    """Per output element: the sum of the magnitudes of the terms it sums (float64)."""
    a = {n: (np.abs(v.astype(np.float64)) if v.dtype.kind == "f" or v.dtype.name == "bfloat16" else v)
         for n, v in given.items()}
    if case.op == GMM:
        w = a["weight"].transpose(0, 2, 1) if case.attrs.get("transpose_weight", 0) == 1 else a["weight"]
        glt = case.attrs.get("group_list_type", 0)
        ends = np.cumsum(a["group_list"]) if glt == 1 else a["group_list"].astype(np.int64)
        out = np.zeros((a["x"].shape[0], w.shape[2]))
        start = 0
        for e, end in enumerate(ends.tolist()):
            with np.errstate(invalid="ignore", over="ignore"):
                out[start:end] = a["x"][start:end] @ w[e] + (a["bias"][e] if "bias" in a else 0)
            start = end
        return out
    # float32 sums of |terms| (the references' own gather), enough as a bound's scale
    mag = reference(case, {n: (v.astype(np.float32) if v.dtype == np.float64 else v) for n, v in a.items()})[0]
    return np.abs(mag.astype(np.float64))


def _compare_sum(case: Case, got: np.ndarray, ref: np.ndarray, given: dict) -> str | None:
    name = OUTPUTS[case.op][0]
    u, tiny = _ROUNDOFF[ref.dtype.name]
    weights = given.get("scales", given.get("probs"))
    terms = given["x"].shape[1] + 1 if case.op == GMM else (1 if weights is None else weights.shape[1]) + 2
    g, r = got.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = 2 * u * np.abs(r) + 2.0 * terms * 2.0**-24 * np.nan_to_num(_magnitude(case, given), nan=np.inf) + \
            2 * tiny
        finite = np.isfinite(r)
        close = np.where(finite, np.abs(g - r) <= bound,
                         (np.isnan(g) & np.isnan(r)) | (g == r))
    if close.all():
        return None
    i = np.unravel_index(int(np.flatnonzero(~close.reshape(-1))[0]), close.shape)
    return (f"{name} differs from the reference at {list(map(int, i))}: {g[i]!r} vs {r[i]!r} "
            f"(bound {bound[i]:.3g}, {int((~close).sum())} elements)")


def compare(case: Case, got: dict, ref) -> str | None:
    given = {n: case.inputs[n] for n in case.node_inputs if n}
    for name, r in zip(OUTPUTS[case.op], ref):
        if name not in got:
            continue
        g = got[name]
        if g.dtype != r.dtype or g.shape != r.shape:
            return f"{name} is {g.dtype}{list(g.shape)}, reference {r.dtype}{list(r.shape)}"
        if case.op in (GMM, FINALIZE, UNPERMUTE):
            problem = _compare_sum(case, g, r, given)
            if problem:
                return problem
        elif g.tobytes() != np.ascontiguousarray(r).tobytes():
            bad = np.flatnonzero(g.reshape(-1).view(np.uint8) != np.ascontiguousarray(r).reshape(-1).view(np.uint8))
            return f"{name} differs from the reference (bit for bit) from byte {int(bad[0])}"
    return None
