"""Runs one fuzz case through ONNX Runtime with the library and classifies the outcome against
the contract (:mod:`tests.fuzz.oracle`) and the NumPy references. Runs inside a worker process
(:mod:`tests.fuzz.pool`): a crash here kills only the worker."""

from __future__ import annotations

import re
import time

import numpy as np
import onnx
from onnx import TensorProto, helper

from tests.fuzz import compare_ops, formulas
from tests.fuzz.cases import EXPERTS, GATING, REROUTING_OUTPUTS, Case, type_name
from tests.fuzz.cases_ops import PIPELINE_OPS
from tests.fuzz.oracle import Expectation, expect

OK = "ok"
CRASH = "crash"
HANG = "hang"
MISMATCH = "mismatch"
UNCLEAR = "unclear_error"
WRONG_REJECTION = "wrong_rejection"
ACCEPTED_BAD_ATTRIBUTE = "accepted_bad_attribute"
ACCEPTED_BAD_INPUT = "accepted_bad_input"
REFERENCE_ERROR = "reference_error"
KNOWN_DEFECT = "known_defect"
OUTCOMES = (OK, CRASH, HANG, MISMATCH, UNCLEAR, WRONG_REJECTION, ACCEPTED_BAD_ATTRIBUTE, ACCEPTED_BAD_INPUT,
            REFERENCE_ERROR, KNOWN_DEFECT)
FAILURES = tuple(o for o in OUTCOMES if o not in (OK, KNOWN_DEFECT))

ELEM_TYPES = {
    "float": TensorProto.FLOAT, "float16": TensorProto.FLOAT16, "bfloat16": TensorProto.BFLOAT16,
    "double": TensorProto.DOUBLE, "int8": TensorProto.INT8, "uint8": TensorProto.UINT8,
    "int16": TensorProto.INT16, "int32": TensorProto.INT32, "int64": TensorProto.INT64,
    "uint64": TensorProto.UINT64,
    "bool": TensorProto.BOOL, "float8e4m3fn": TensorProto.FLOAT8E4M3FN, "float8e5m2": TensorProto.FLOAT8E5M2,
}


# ---- model -------------------------------------------------------------------------------------


def _output_types(case: Case) -> dict:
    def t(name, fallback="float"):
        a = case.inputs.get(name) if name in case.node_inputs else None
        return ELEM_TYPES.get(type_name(a), TensorProto.FLOAT) if a is not None else ELEM_TYPES[fallback]

    if case.op in PIPELINE_OPS:
        return compare_ops.output_types(case, t)
    if case.op == GATING:
        return {"y": t("x"), "expert_idx": TensorProto.INT32, "out": TensorProto.FLOAT}
    if case.op == EXPERTS:
        return {"y": TensorProto.FLOAT}
    return {"permute_tokens": t("tokens"), "permute_per_token_scales": t("per_token_scales"),
            "permute_token_idx": TensorProto.INT32, "expert_token_num": t("expert_token_num_per_rank", "int64")}


def constant_inputs(case: Case) -> list:
    """The node inputs that are initializers: all but the first present one when ``case.constants``."""
    present = [n for n in case.node_inputs if n]
    return present[1:] if case.constants else []


def build_model(case: Case):
    """Single-node model (plus Shape probes of the outputs when ``case.shape_probes``)."""
    graph_inputs = []
    fixed = constant_inputs(case)
    initializers = [helper.make_tensor(n, ELEM_TYPES[type_name(case.inputs[n])], case.inputs[n].shape,
                                       np.ascontiguousarray(case.inputs[n]).tobytes(), raw=True) for n in fixed]
    for name in case.node_inputs:
        if not name or name in fixed:
            continue
        a = case.inputs[name]
        mode = case.input_dims.get(name, "static")
        dims = None if mode == "unknown_rank" else (
            list(a.shape) if mode == "static" else [f"{name}_{i}" for i in range(a.ndim)])
        graph_inputs.append(helper.make_tensor_value_info(name, ELEM_TYPES[type_name(a)], dims))
    protos = {n: v for n, v in case.attrs.items() if isinstance(v, onnx.AttributeProto)}
    node = helper.make_node(case.op, case.node_inputs, case.outputs, domain="ascend.moe",
                            **{n: v for n, v in case.attrs.items() if n not in protos})
    node.attribute.extend(protos.values())
    nodes = [node]
    types = _output_types(case)
    graph_outputs = [helper.make_tensor_value_info(o, types[o], None) if types[o] is not None
                     else helper.make_value_info(o, onnx.TypeProto()) for o in case.outputs if o]
    if case.shape_probes:
        for o in case.outputs:
            if o:
                nodes.append(helper.make_node("Shape", [o], [f"shape__{o}"]))
                graph_outputs.append(helper.make_tensor_value_info(f"shape__{o}", TensorProto.INT64, [None]))
    graph = helper.make_graph(nodes, "fuzz", graph_inputs, graph_outputs, initializers)
    return helper.make_model(graph, ir_version=10, opset_imports=[
        helper.make_opsetid("", 21), helper.make_opsetid("ascend.moe", case.opset)])


def run_ort(case: Case) -> dict:
    """Build, create the session and run; returns {graph output name: array}."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from tests.ort_values import to_numpy, to_ortvalue

    so = ort_custom_ops.session_options(case.threads)
    so.log_severity_level = 4
    so.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_ALL if case.optimize
                                   else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    sess = ort.InferenceSession(build_model(case).SerializeToString(), so, providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    for name in case.node_inputs:
        if name and name not in constant_inputs(case):
            binding.bind_ortvalue_input(name, to_ortvalue(case.inputs[name]))
    names = [o.name for o in sess.get_outputs()]
    for name in names:
        binding.bind_output(name)
    sess.run_with_iobinding(binding)
    return {n: to_numpy(v) for n, v in zip(names, binding.get_outputs())}


# ---- classification ----------------------------------------------------------------------------


def names_any(message: str, names) -> bool:
    """Whether the message names one of ``names`` as a word (``'x'``, ``(x)``, ``x=``...)."""
    return any(re.search(rf"(?<![\w.]){re.escape(n)}(?![\w])", message) for n in names)


def _reference(case: Case):
    from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash, moe_re_routing

    given = {n: case.inputs[n] for n in case.node_inputs if n}
    if case.op in PIPELINE_OPS:
        return compare_ops.reference(case, given)
    if case.op == GATING:
        return moe_gating_top_k_hash.reference(**given, **case.attrs)
    if case.op == EXPERTS:
        return formulas.evaluate(EXPERTS, given, case.attrs)
    return moe_re_routing.reference(given.get("tokens"), given.get("expert_token_num_per_rank"),
                                    given.get("per_token_scales"), **case.attrs)


def _subnormal_slack(x: np.ndarray, ridx: np.ndarray, norm_type: int) -> np.ndarray:
    """Per row: 8 * 2^-149 / (smallest chosen score), the relative error subnormal scores allow."""
    from ascend_moe_onnx.onnx_schemas.moe_gating_top_k_hash import normalise

    rows = ridx.shape[:-1]
    if x.size == 0 or ridx.size == 0:
        return np.zeros(rows)
    E = x.shape[-1]
    with np.errstate(all="ignore"):
        scores = normalise(x.reshape(-1, E).astype(np.float32), norm_type).astype(np.float64)
        chosen = np.take_along_axis(scores, np.clip(ridx.reshape(-1, ridx.shape[-1]), 0, E - 1).astype(np.int64),
                                    axis=1)
        smallest = np.nan_to_num(np.abs(chosen), nan=1.0).min(axis=1)
        return np.minimum(8 * 2.0**-149 / np.maximum(smallest, 2.0**-149), 1.0).reshape(rows)


# docs/kernel.md: the kernel's scores lie within 16 ulp of the correctly rounded value (4 for
# sigmoid / sqrt-softplus), NumPy's within a few: experts whose reference selection scores are this
# close (e.g. logits one ulp apart that NumPy rounds to one score) may rank either way. Random
# campaigns meet such rows; the fixed-seed tests compare exactly (tests/ops/moe_gating_top_k_hash/gating_cases.py).
_NEAR_TIE_ULP = 32


def _score_near_tie_rows(got: np.ndarray, ref: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Rows [R, k] whose experts differ only among experts within _NEAR_TIE_ULP of each other in ``b``."""
    rows = np.zeros(got.shape[0], dtype=bool)
    for r in np.flatnonzero((got != ref).any(axis=1)):
        differ = sorted(set(got[r].tolist()) ^ set(ref[r].tolist())) or got[r][got[r] != ref[r]].tolist()
        vals = b[r, differ].astype(np.float32)
        if np.isfinite(vals).all():
            rows[r] = np.ptp(vals) <= _NEAR_TIE_ULP * np.spacing(np.abs(vals).max())
    return rows


def _compare_gating(case: Case, got: dict, ref) -> str | None:
    from tests.ops.moe_gating_top_k_hash.gating_cases import WEIGHT_RTOL, assert_routing_equal, selection_scores

    ry, ridx, rout = ref
    x = case.inputs["x"]
    y, idx = got["y"], got["expert_idx"]
    if y.dtype != ry.dtype or y.shape != ry.shape:
        return f"y is {y.dtype}{list(y.shape)}, reference {ry.dtype}{list(ry.shape)}"
    if idx.dtype != np.int32 or idx.shape != ridx.shape:
        return f"expert_idx is {idx.dtype}{list(idx.shape)}, reference int32{list(ridx.shape)}"
    attrs = {"norm_type": case.attrs.get("norm_type", 0)}
    present = {n: case.inputs[n] for n in case.node_inputs if n}
    try:
        k = ridx.shape[-1]
        b = selection_scores(present, attrs)
        ties = _score_near_tie_rows(idx.reshape(-1, k), ridx.reshape(-1, k), b)
        assert_routing_equal(idx.reshape(-1, k)[~ties], ridx.reshape(-1, k)[~ties], b[~ties])
        same = (idx == ridx).all(axis=-1)
        rtol = WEIGHT_RTOL[type_name(x)]
        # Where the chosen experts' scores are subnormal, docs/operators.md bounds them absolutely
        # (4 * 2^-149), so the weights made from them get that much relative slack per row.
        slack = _subnormal_slack(x, ridx, attrs["norm_type"])[same][:, None]
        got_y, ref_y = y.astype(np.float64)[same], ry.astype(np.float64)[same]
        with np.errstate(invalid="ignore", over="ignore"):
            bound = (rtol + slack) * np.abs(ref_y) + rtol * 1e-3
            close = (got_y == ref_y) | (np.isnan(got_y) & np.isnan(ref_y)) | (np.abs(got_y - ref_y) <= bound)
        if not close.all():
            worst = float(np.nanmax(np.where(close, 0.0, np.abs(got_y - ref_y) - bound)))
            raise AssertionError(f"weights differ from the reference beyond rtol {rtol} "
                                 f"(+ subnormal slack): worst excess {worst:.3g}")
        if "out" in got:
            out = got["out"]
            if out.dtype != np.float32 or out.shape != rout.shape:
                return f"out is {out.dtype}{list(out.shape)}, reference float32{list(rout.shape)}"
            np.testing.assert_allclose(out, rout, rtol=4e-6, atol=1e-30)
    except AssertionError as e:
        return str(e).strip()[:600]
    return None


def _compare_rerouting(case: Case, got: dict, ref) -> str | None:
    for name, r in zip(REROUTING_OUTPUTS, ref):
        g = got[name]
        if g.dtype != r.dtype or g.shape != r.shape:
            return f"{name} is {g.dtype}{list(g.shape)}, reference {r.dtype}{list(r.shape)}"
        if g.tobytes() != np.ascontiguousarray(r).tobytes():
            want = np.ascontiguousarray(r).reshape(-1).view(np.uint8)
            bad = np.flatnonzero(g.reshape(-1).view(np.uint8) != want)
            return f"{name} differs from the reference (bit for bit) from byte {int(bad[0])}"
    return None


def _compare_experts(case: Case, got: dict, ref) -> str | None:
    """y within the op table's tolerance (the kernel sums in float32, the oracle in float64)."""
    (r,), _ = ref
    y = got["y"]
    if y.dtype != r.dtype or y.shape != r.shape:
        return f"y is {y.dtype}{list(y.shape)}, reference {r.dtype}{list(r.shape)}"
    try:
        np.testing.assert_allclose(y, r, rtol=2e-5, atol=1e-5)
    except AssertionError as e:
        return str(e).strip()[:600]
    return None


def _check_probes(got: dict) -> str | None:
    for name, value in got.items():
        if name.startswith("shape__"):
            real = list(got[name[len("shape__"):]].shape)
            if value.tolist() != real:
                return f"Shape({name[len('shape__'):]}) gives {value.tolist()} in the graph, the tensor is {real}"
    return None


def _project_reference(case: Case):
    """The project's NumPy reference (onnx_schemas) of ``case``."""
    from ascend_moe_onnx import onnx_schemas

    given = {n: case.inputs[n] for n in case.node_inputs if n}
    spec = next(m for m in onnx_schemas.OP_MODULES if case.op == m.OP_TYPE)
    if case.op in PIPELINE_OPS or case.op == EXPERTS:
        return spec.reference(*[given.get(n) for n in spec.INPUT_NAMES], **case.attrs)
    return _reference(case)


def _check_reference_rejects(case: Case, exp: Expectation) -> str | None:
    """For an invalid case: the project's NumPy reference must raise a clear error too."""
    try:
        _project_reference(case)
    except (ValueError, TypeError) as e:
        return None if names_any(str(e), exp.names) else f"reference error names none of {sorted(exp.names)}: {e}"
    except Exception as e:  # noqa: BLE001 - any other exception is a reference defect
        return f"reference raises {type(e).__name__}: {e}"
    return f"reference accepts the invalid case ({'; '.join(exp.reasons)})"


def classify(case: Case) -> dict:
    """Run ``case`` and return {outcome, detail, seconds, reasons}."""
    exp = expect(case)
    start = time.perf_counter()
    error = None
    try:
        got = run_ort(case)
    except Exception as e:  # noqa: BLE001 - ORT raises several exception types
        error = str(e)
    seconds = time.perf_counter() - start

    def result(outcome, detail=""):
        return {"outcome": outcome, "detail": detail, "seconds": seconds, "reasons": exp.reasons,
                "valid": exp.valid}

    if error is not None:
        if exp.valid:
            return result(WRONG_REJECTION, error[:600])
        if not names_any(error, exp.names):
            return result(UNCLEAR, f"expected one of {sorted(exp.names)} named: {error[:600]}")
    elif not exp.valid:
        kind = ACCEPTED_BAD_ATTRIBUTE if exp.attribute_fault else ACCEPTED_BAD_INPUT
        return result(kind, "; ".join(exp.reasons))
    if not exp.valid:
        problem = _check_reference_rejects(case, exp) if exp.reference_applies else None
        return result(REFERENCE_ERROR, problem) if problem else result(OK)
    try:
        ref = _reference(case)
    except Exception as e:  # noqa: BLE001
        return result(REFERENCE_ERROR, f"reference rejects a valid case: {type(e).__name__}: {e}"[:600])
    compare = {GATING: _compare_gating, EXPERTS: _compare_experts,
               **{op: compare_ops.compare for op in PIPELINE_OPS}}.get(case.op, _compare_rerouting)
    problem = compare(case, got, ref) or _check_probes(got)
    return result(MISMATCH, problem) if problem else result(OK)
