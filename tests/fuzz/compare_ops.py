"""The pipeline ops' side of :mod:`tests.fuzz.execute`: declared output types, and the comparison
of the kernels' outputs with the independent float64 oracle (:mod:`tests.fuzz.formulas`).

Rows that an op moves (init routing, permute) must be equal bit for bit, integer outputs
exactly; sums (GroupedMatmul, MoeFinalizeRoutingV2, MoeTokenUnpermute) and SwiGlu within a bound
derived from the contract: the kernels compute in float32 (possibly with fused multiply-adds)
and round once to the output type, so they may differ from the float64 value by one unit of the
output type plus the float32 error of a sum of that many terms, measured on the sum of the
terms' magnitudes."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto

from tests.fuzz import formulas
from tests.fuzz.cases import Case
from tests.fuzz.cases_ops import FINALIZE, GMM, INIT_V3, INPUTS, OUTPUTS, SWIGLU, UNPERMUTE

# unit roundoff and smallest subnormal of each output type
_ROUNDOFF = {"float32": (2.0**-24, 2.0**-149), "float16": (2.0**-11, 2.0**-24), "bfloat16": (2.0**-8, 2.0**-133)}
# GroupedMatmul's output_dtype codes (W8A8)
_OUTPUT_DTYPES = {1: TensorProto.FLOAT, 6: TensorProto.INT32, 10: TensorProto.FLOAT16, 16: TensorProto.BFLOAT16}


def output_types(case: Case, input_type) -> dict:
    """Element type of each output as the kernels write it; ``input_type(name, fallback)`` is
    the ONNX type of a given input."""
    first = INPUTS[case.op][0]
    out_dtype = case.attrs.get("output_dtype", 0)
    gmm_y = input_type("x")
    if gmm_y == TensorProto.INT8:
        gmm_y = _OUTPUT_DTYPES.get(out_dtype, TensorProto.FLOAT) if type(out_dtype) is int else None
    types = {GMM: {"y": gmm_y}, SWIGLU: {"y": input_type("x")},
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
    """``(outputs, magnitudes)`` of the independent float64 oracle (:mod:`tests.fuzz.formulas`)."""
    return formulas.evaluate(case.op, given, case.attrs)


def _compare_sum(case: Case, name: str, got: np.ndarray, ref: np.ndarray, magnitude: np.ndarray,
                 terms: int) -> str | None:
    u, tiny = _ROUNDOFF[ref.dtype.name]
    g, r = got.astype(np.float64), ref.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bound = 2 * u * np.abs(r) + 2.0 * terms * 2.0**-24 * magnitude + 2 * tiny
        finite = np.isfinite(r)
        close = np.where(finite, np.abs(g - r) <= bound,
                         (np.isnan(g) & np.isnan(r)) | (g == r))
        # terms whose magnitudes sum past float32's range: a float32 partial sum may overflow (to
        # ±inf, or NaN beside an inf of the other sign) where the float64 one does not
        close |= ~np.isfinite(g) & (magnitude > np.finfo(np.float32).max)
    if close.all():
        return None
    i = np.unravel_index(int(np.flatnonzero(~close.reshape(-1))[0]), close.shape)
    return (f"{name} differs from the reference at {list(map(int, i))}: {g[i]!r} vs {r[i]!r} "
            f"(bound {bound[i]:.3g}, {int((~close).sum())} elements)")


def _terms(case: Case, given: dict) -> int:
    """How many float32 roundings one output element's sum may carry."""
    if case.op == GMM:
        return given["x"].shape[1] + 1
    if case.op == SWIGLU:
        return 8  # exp, the division and two products in float32
    weights = given.get("scales", given.get("probs"))
    return (1 if weights is None else weights.shape[1]) + 2


def compare(case: Case, got: dict, ref) -> str | None:
    given = {n: case.inputs[n] for n in case.node_inputs if n}
    outputs, magnitudes = ref
    for name, r, mag in zip(OUTPUTS[case.op], outputs, magnitudes):
        if name not in got:
            continue
        g = got[name]
        if g.dtype != r.dtype or g.shape != r.shape:
            return f"{name} is {g.dtype}{list(g.shape)}, reference {r.dtype}{list(r.shape)}"
        if mag is not None:
            problem = _compare_sum(case, name, g, r, mag, _terms(case, given))
            if problem:
                return problem
        elif g.tobytes() != np.ascontiguousarray(r).tobytes():
            bad = np.flatnonzero(g.reshape(-1).view(np.uint8) != np.ascontiguousarray(r).reshape(-1).view(np.uint8))
            return f"{name} differs from the reference (bit for bit) from byte {int(bad[0])}"
    return None
