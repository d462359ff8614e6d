"""Shared MoeGatingTopKHash test cases: configurations, random inputs, routing comparison."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import normalise

NP_DTYPES = {"float": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
# Relative tolerance on weights: a few ulp of the output type.
WEIGHT_RTOL = {"float": 4e-6, "float16": 2e-3, "bfloat16": 1.6e-2}

# name -> attributes (E is chosen by make_inputs)
CONFIGS = {
    "softmax": dict(k=4, norm_type=0),
    "softmax_renorm": dict(k=4, norm_type=0, renorm=1, routed_scaling_factor=1.5),
    "sigmoid_groups_top2": dict(k=4, k_group=2, group_count=4, group_select_mode=1, norm_type=1,
                                routed_scaling_factor=2.5),
    "softmax_groups_max": dict(k=3, k_group=3, group_count=4, group_select_mode=0, norm_type=0,
                               routed_scaling_factor=16.0),
    "sqrt_softplus": dict(k=6, norm_type=2, routed_scaling_factor=1.5, out_flag=1),
}
# bias mode -> which optional inputs are present
BIAS_MODES = ("none", "bias", "additional")


def make_inputs(rng, config: dict, bias_mode: str, hash_ids: str | None, dtype: str,
                lead: tuple, experts: int = 16, table_rows: int = 50):
    """Random inputs for one case as a dict of NumPy arrays keyed by ONNX input name."""
    np_dtype = NP_DTYPES[dtype]
    x = rng.standard_normal((*lead, experts)).astype(np.float32).astype(np_dtype)
    inputs = {"x": x}
    if bias_mode in ("bias", "additional"):
        inputs["bias"] = (rng.standard_normal(experts) * 0.5).astype(np.float32).astype(np_dtype)
    if bias_mode == "additional":
        inputs["additional_bias"] = (rng.standard_normal(experts) * 0.5).astype(np.float32).astype(np_dtype)
        inputs["additional_token_mask"] = rng.random(lead) < 0.4
    if hash_ids is not None:
        ids_dtype, table_dtype = hash_ids.split("/")
        inputs["input_ids"] = rng.integers(0, table_rows, lead).astype(ids_dtype)
        inputs["tid2eid"] = rng.integers(0, experts, (table_rows, config["k"])).astype(table_dtype)
    return inputs


def selection_scores(inputs: dict, attrs: dict) -> np.ndarray:
    """The float32 selection scores b = s + bias_row of every row, [R, E] (for near-tie checks)."""
    x = np.asarray(inputs["x"])
    x2 = x.reshape(-1, x.shape[-1]).astype(np.float32)
    s = normalise(x2, attrs.get("norm_type", 0))
    b = s if inputs.get("bias") is None else s + inputs["bias"].astype(np.float32)
    if inputs.get("additional_token_mask") is not None:
        mask = inputs["additional_token_mask"].reshape(-1)
        b = np.where(mask[:, None], s + inputs["additional_bias"].astype(np.float32), b)
    return b


def assert_routing_equal(got_idx, ref_idx, b: np.ndarray | None = None, tie_tol: float = 1e-6):
    """Expert indices must match exactly, except where the differing experts are tied within
    ``tie_tol`` in the selection scores ``b``; such near-ties are reported, never silently skipped."""
    got = np.asarray(got_idx).reshape(-1, np.shape(ref_idx)[-1])
    ref = np.asarray(ref_idx).reshape(got.shape)
    rows = np.flatnonzero((got != ref).any(axis=1))
    if rows.size == 0:
        return []
    if b is None:
        raise AssertionError(f"expert indices differ in rows {rows[:10].tolist()}:\n"
                             f"got {got[rows[:3]]}\nref {ref[rows[:3]]}")
    near_ties = []
    for r in rows:
        g_set, r_set = set(got[r].tolist()), set(ref[r].tolist())
        diff = sorted(g_set ^ r_set) or sorted(set(np.flatnonzero(got[r] != ref[r]).tolist()))
        vals = b[r, list(g_set ^ r_set)] if g_set != r_set else b[r, got[r][got[r] != ref[r]]]
        spread = float(np.nanmax(vals) - np.nanmin(vals)) if vals.size else 0.0
        if spread > tie_tol * max(1.0, float(np.nanmax(np.abs(vals)))):
            raise AssertionError(
                f"row {r}: expert indices differ beyond a near-tie (score spread {spread:.3g}):\n"
                f"got {got[r].tolist()}\nref {ref[r].tolist()}\nexperts {diff}")
        near_ties.append((int(r), diff, spread))
    print(f"near-ties within rounding (row, experts, score spread): {near_ties}")
    return near_ties


def assert_weights_close(got_y, ref_y, dtype: str):
    """Weights within a few ulp of the output type (relative, with an absolute floor)."""
    got = np.asarray(got_y).astype(np.float64)
    ref = np.asarray(ref_y).astype(np.float64)
    rtol = WEIGHT_RTOL[dtype]
    np.testing.assert_allclose(got, ref, rtol=rtol, atol=rtol * 1e-3)
