"""Generic tests run for every op of tests/op_table.py: the C++ library declares what the ONNX
schema says; every bad case gives the same message in the C++ kernels (through ONNX Runtime),
the NumPy reference, the onnx.reference op and the torch front end."""

from __future__ import annotations

import re
from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper
from onnx.defs import OpSchema
from onnx.reference import ReferenceEvaluator

from ascend_moe_onnx import onnx_schemas, ort_custom_ops
from ascend_moe_onnx.ort_custom_ops import generate_op_defs
from tests.op_table import OPS, bad_case_id, bad_case_params, node_model, present, torch_bad_case_params

ort = pytest.importorskip("onnxruntime")
from tests.ops.moe_re_routing.rerouting_cases import ort_errors, run_feeds, session, to_torch  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
CPU = "CPUExecutionProvider"


def exactly(op, message: str) -> str:
    """A pattern matching '<op>: <message>' at the end of an error text."""
    return re.escape(f"{op.name}: {message}") + r"\s*$"


# ---- one source per fact: the C++ side states what the schema states -----------------------------


@pytest.mark.skipif(not (ROOT / "ort_custom_ops" / "src").is_dir(), reason="needs the source tree")
def test_generated_headers_are_current():
    """ort_custom_ops/src/op_defs.gen.h and ops_src/cpu/attr_defaults.gen.h are what the generator
    makes from the schemas (the headers name this test)."""
    assert generate_op_defs.main(["--check"]) == 0, (
        "stale generated header: run python -m ascend_moe_onnx.ort_custom_ops.generate_op_defs")
    for path in (generate_op_defs.HEADER_PATH, generate_op_defs.DEFAULTS_PATH):
        assert "test_op_table.py::test_generated_headers_are_current" in path.read_text()


@pytest.mark.skipif(not (ROOT / "ops_src" / "cpu").is_dir(), reason="needs the source tree")
def test_kernel_structs_take_their_defaults_from_the_schema():
    """No kernel struct states an attribute default of its own (the ORT and CANN front ends, the
    fake runtime and the benchmarks all fill them from attr_defaults.gen.h)."""
    names = "|".join(n for op in OPS for n in op.spec.SCHEMA.attributes if n != "k")
    literal = re.compile(rf"^\s*(?:int64_t|float|int)\s+({names})\s*=\s*[-0-9.]", re.M)
    for header in sorted((ROOT / "ops_src" / "cpu").rglob("*.h")):
        assert not literal.findall(header.read_text()), (header.name, literal.findall(header.read_text()))


def _schema_params(schema, formal) -> list[dict]:
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    return [{"name": p.name, "optional": p.option == OpSchema.FormalParameterOption.Optional,
             "types": [t[len("tensor("):-1] for t in constraints.get(p.type_str, [p.type_str])]}
            for p in formal]


# Where validation messages name inputs by hand (C++ validators, Python validators): each name is
# one the schema declares, so a renamed input cannot leave a message behind.
_NAMED_INPUT = re.compile("|".join([r'(?:FailInput|CheckBiasLike)\("(\w+)"', r"input '(\w+)'",
                                      r'const char\* k\w+ = "(\w+)"', r'\? "(\w+)" : "(\w+)"']))


@pytest.mark.skipif(not (ROOT / "ort_custom_ops" / "src").is_dir(), reason="needs the source tree")
@pytest.mark.parametrize("op", OPS, ids=bad_case_id)
def test_inputs_named_in_messages_are_the_schemas(op):
    stem = op.spec.__name__.rsplit(".", 1)[1]
    cpp = [ROOT / "ort_custom_ops" / "src" / stem / f"{stem}_{part}.cc" for part in ("op", "validate")]
    assert cpp[0].is_file(), f"the op's ORT glue is {cpp[0].relative_to(ROOT)}"
    sources = [p for p in cpp if p.is_file()] + [ROOT / "onnx_schemas" / f"{stem}.py"]
    named = {n for path in sources for m in _NAMED_INPUT.finditer(path.read_text()) for n in m.groups() if n}
    # (an op whose checks all come from the generated table names no input by hand: nothing to check)
    assert named <= set(op.spec.INPUT_NAMES), sorted(named - set(op.spec.INPUT_NAMES))


@pytest.mark.parametrize("op", OPS, ids=bad_case_id)
def test_library_declares_the_schema(op):
    """Names, input/output order, optional flags, allowed types, attribute kinds and defaults of
    the built library (its manifest) equal the ONNX schema's, for every execution provider."""
    schema = op.spec.SCHEMA
    manifest = ort_custom_ops.manifest()
    assert manifest["domain"] == schema.domain
    entries = [e for e in manifest["ops"] if e["name"] == op.name]
    assert "CPUExecutionProvider" in {e["provider"] for e in entries}
    for entry in entries:
        assert entry["since_version"] == schema.since_version
        assert entry["inputs"] == _schema_params(schema, schema.inputs)
        assert entry["outputs"] == _schema_params(schema, schema.outputs)
        attrs = {a["name"]: a for a in entry["attributes"]}
        assert set(attrs) == set(schema.attributes)
        for name, attr in schema.attributes.items():
            got = attrs[name]
            assert got["kind"] == {OpSchema.AttrType.INT: "int", OpSchema.AttrType.FLOAT: "float"}[attr.type]
            assert got["required"] == attr.required
            if attr.required:
                assert got["default"] is None
                continue
            default = helper.get_attribute_value(attr.default_value)
            assert np.float32(got["default"]) == np.float32(default) if got["kind"] == "float" \
                else got["default"] == default, (name, got, default)


def test_every_schema_is_in_the_table():
    assert {op.name for op in OPS} == set(onnx_schemas.SCHEMAS)
    assert {op["name"] for op in ort_custom_ops.manifest()["ops"]} == set(onnx_schemas.SCHEMAS)


# ---- bad cases: one table per op, identical messages in every layer ---------------------------


_ORT_BLIND = pytest.mark.xfail(strict=True, reason="the ORT custom-op API (up to 1.32) cannot see it: no API "
                                                  "lists a node's attributes (unknown names pass) "
                                                  "(docs/contributing.md)")


@pytest.mark.parametrize("op,case", [pytest.param(op, c, marks=() if c.ort else _ORT_BLIND)
                                     for op, c in bad_case_params()], ids=bad_case_id)
def test_bad_case_in_onnx_runtime(op, case):
    model = node_model(op, case.inputs, case.attrs, ranks=True)
    with pytest.raises(ort_errors(), match=exactly(op, case.ort_message or case.message)):
        run_feeds(session(model), present(case.inputs))


@pytest.mark.parametrize("op,case", [pytest.param(op, c, marks=() if c.ort else _ORT_BLIND)
                                     for op, c in bad_case_params()], ids=bad_case_id)
def test_bad_case_with_constant_inputs_in_onnx_runtime(op, case):
    """The same with every input but the first a constant initializer: a kernel decides from an
    input's presence, never from its data pointer (null for an empty initializer)."""
    model = node_model(op, case.inputs, case.attrs, ranks=True, constants=True)
    first = op.spec.INPUT_NAMES[0]
    with pytest.raises(ort_errors(), match=exactly(op, case.ort_message or case.message)):
        run_feeds(session(model), {first: case.inputs[first]} if case.inputs.get(first) is not None else {})


_BODY_BLIND = pytest.mark.xfail(strict=True, reason="a standard-ONNX function body cannot see this fault "
                                                   "(docs/operators.md: what a function body checks)")


@pytest.mark.parametrize("op,case", [pytest.param(op, c, marks=() if c.body else _BODY_BLIND)
                                     for op, c in bad_case_params()], ids=bad_case_id)
def test_bad_case_in_the_function_body(op, case):
    """ONNX Runtime without the library runs the op's function body: a bad case fails, when the
    body is built (attributes, absent inputs: the validation's message) or when it runs (an index
    the body forces out of range: the runtime's message)."""
    from ascend_moe_onnx.onnx_schemas.functions import attach_functions

    try:
        model = attach_functions(node_model(op, case.inputs, case.attrs, ranks=True))
    except ValueError as e:
        assert re.search(exactly(op, case.message), str(e)), str(e)
        return
    with pytest.raises(ort_errors()):
        run_feeds(session(model, library=False), present(case.inputs))


def _is_attribute_case(case) -> bool:
    """Unknown names, wrong kinds, missing required attributes and inputs (values are the kernels' job)."""
    return re.match(r"(attribute '\w+' (is not an attribute|must be (INT|FLOAT), got|is required)"
                    r"|input '\w+' is required, got none)", case.message) is not None


@pytest.mark.parametrize("op,case", [p for p in bad_case_params() if _is_attribute_case(p[1])],
                         ids=bad_case_id)
def test_bad_attribute_case_in_the_project_session(op, case):
    """``ort_custom_ops.inference_session`` (the project's way into ORT) checks the nodes first, so
    what ORT cannot show a kernel (unknown attribute names) is refused too, with the same message."""
    model = node_model(op, case.inputs, case.attrs, ranks=True)
    with pytest.raises(ValueError, match=exactly(op, case.message)):
        ort_custom_ops.inference_session(model)
    with pytest.raises(ValueError, match=exactly(op, case.message)):
        onnx_schemas.check_nodes(model.SerializeToString())


@pytest.mark.parametrize("op,case", bad_case_params(), ids=bad_case_id)
def test_bad_case_in_the_numpy_reference(op, case):
    with pytest.raises(ValueError, match=exactly(op, case.message)):
        op.spec.reference(*[case.inputs.get(n) for n in op.spec.INPUT_NAMES], **case.attrs)


@pytest.mark.parametrize("op,case", bad_case_params(), ids=bad_case_id)
def test_bad_case_in_the_onnx_reference_evaluator(op, case):
    model = node_model(op, case.inputs, case.attrs)
    evaluator = ReferenceEvaluator(model, new_ops=onnx_schemas.REFERENCE_OPS)
    with pytest.raises(ValueError, match=exactly(op, case.message)):
        evaluator.run(None, present(case.inputs))


@pytest.mark.parametrize("op,case", torch_bad_case_params(), ids=bad_case_id)
def test_bad_case_in_the_torch_op(op, case):
    inputs = {n: to_torch(a) for n, a in case.inputs.items()}
    with pytest.raises(ValueError, match=exactly(op, case.message)):
        op.torch_call(inputs, case.attrs)


# ---- typed kernels: a wrong input type fails when the session is created -------------------------


def _wrong_type_params():
    out = []
    for op in OPS:
        first = op.samples()[0]
        inputs, attrs = op.every_input() if op.every_input else (first.inputs, first.attrs)
        for spec in op.spec.SCHEMA.inputs:
            out.append(pytest.param(op, inputs, attrs, spec, id=f"{op.name}-{spec.name}"))
    return out


@pytest.mark.parametrize("op,inputs,attrs,spec", _wrong_type_params())
def test_wrong_input_type_fails_at_session_creation(op, inputs, attrs, spec):
    """A double input (no input accepts double) is rejected when the session is created, with
    the run-time validation's message naming the input."""
    from ascend_moe_onnx.onnx_schemas._common import type_list

    bad = dict(inputs, **{spec.name: np.asarray(inputs[spec.name]).astype(np.float64)})
    schema = op.spec.SCHEMA
    first_like = next(p.name for p in schema.inputs if p.type_str == spec.type_str)
    constraints = {c.type_param_str: c.allowed_type_strs for c in schema.type_constraints}
    if first_like != spec.name and spec.type_str in constraints:  # shares a type parameter
        like_type = np.asarray(inputs[first_like]).dtype
        from ascend_moe_onnx.onnx_schemas._common import onnx_type_name

        message = f"input '{spec.name}' must have the type of {first_like} ({onnx_type_name(like_type)}), got double"
    else:
        allowed = [t[len("tensor("):-1] for t in constraints.get(spec.type_str, [spec.type_str])]
        message = f"input '{spec.name}' must be {type_list(allowed)}, got double"
    model = node_model(op, bad, attrs)
    with pytest.raises(ort_errors(), match=exactly(op, message)):
        ort.InferenceSession(model.SerializeToString(), ort_custom_ops.session_options(1), providers=[CPU])


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_inputs_of_unknown_rank_never_make_an_output_a_scalar(op):
    """Shape inference with every input of unknown rank: each output's Shape, as ORT's optimisers
    fold it from the declared shape, is the real one (the C API declares a scalar for an output
    given no dims)."""
    sample = op.samples()[0]
    model = node_model(op, sample.inputs, sample.attrs)  # dims of unknown rank
    graph = model.graph
    for name in op.spec.OUTPUT_NAMES:
        graph.node.append(helper.make_node("Shape", [name], [f"shape_{name}"]))
        graph.output.append(helper.make_tensor_value_info(f"shape_{name}", onnx.TensorProto.INT64, None))
    try:
        got = run_feeds(session(model), present(sample.inputs))
    except ort_errors() as e:  # MoeGatingTopKHash refuses x of unknown rank (docs/contributing.md)
        assert "unknown rank" in str(e), str(e)
        return
    outputs = dict(zip([o.name for o in graph.output], got))
    for name in op.spec.OUTPUT_NAMES:
        assert list(outputs[f"shape_{name}"]) == list(np.shape(outputs[name])), name


# ---- omitted required inputs: named by a bare session ---------------------------------------------


def _omitted_input_params():
    out = []
    for op in OPS:
        first = op.samples()[0]
        inputs, attrs = op.every_input() if op.every_input else (first.inputs, first.attrs)
        names = list(op.spec.INPUT_NAMES)
        for i, p in enumerate(op.spec.SCHEMA.inputs):
            if p.option == OpSchema.FormalParameterOption.Optional:
                continue
            left_out = {n: a for n, a in inputs.items() if n in names[:i]}
            out.append(pytest.param(op, left_out, attrs, p.name, id=f"{op.name}-{p.name}-left-out"))
            if any(inputs.get(n) is not None for n in names[i + 1:]):
                out.append(pytest.param(op, dict(inputs, **{p.name: None}), attrs, p.name,
                                        id=f"{op.name}-{p.name}-empty-name"))
    return out


@pytest.mark.parametrize("op,inputs,attrs,name", _omitted_input_params())
def test_omitted_required_input_is_named_at_session_creation(op, inputs, attrs, name):
    """A required input left out at the end of the node or named "" fails a bare ONNX Runtime
    session's creation with the kernel's message naming it (ORT's own check would name a position:
    the library declares every input optional to ORT and the kernel checks presence). What stays
    ORT's message (docs/contributing.md): a node with no input at all whose output types follow
    its inputs, which ORT cannot type before any kernel exists."""
    model = node_model(op, inputs, attrs)
    pattern = exactly(op, f"input '{name}' is required, got none")
    if not present(inputs):
        pattern = f"{pattern}|output arg \\(\\w+\\) type inference failed"
    with pytest.raises(ort_errors(), match=pattern):
        ort.InferenceSession(model.SerializeToString(), ort_custom_ops.session_options(1), providers=[CPU])


# ---- every layer computes the same on valid samples ---------------------------------------------


def _sample_params():
    return [pytest.param(op, sample, id=f"{op.name}-{sample.id}") for op in OPS for sample in op.samples()]


def _is_float(a: np.ndarray) -> bool:
    return a.dtype.kind == "f" or a.dtype == ml_dtypes.bfloat16


def _assert_same_outputs(op, got, expected, what, rtol, atol):
    assert len(got) == len(expected) == len(op.spec.OUTPUT_NAMES), what
    for name, g, e in zip(op.spec.OUTPUT_NAMES, got, expected):
        g, e = np.asarray(g), np.asarray(e)
        assert g.dtype == e.dtype and g.shape == e.shape, (what, name, g.dtype, e.dtype, g.shape, e.shape)
        if _is_float(g):
            np.testing.assert_allclose(g.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{what} {name}")
        else:
            np.testing.assert_array_equal(g, e, err_msg=f"{what} {name}")


def _assert_expected(op, sample, got, what, rtol, atol):
    """The outputs the sample states outright (integers exactly, floats within the tolerance)."""
    outputs = dict(zip(op.spec.OUTPUT_NAMES, got))
    for name, want in sample.expect.items():
        g = np.asarray(outputs[name])
        w = np.asarray(want)
        assert g.shape == w.shape, (what, name, g.shape, w.shape)
        if _is_float(g):
            np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol,
                                       err_msg=f"{what} {name}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"{what} {name}")


@pytest.mark.parametrize("op,sample", _sample_params())
def test_layers_agree_on_samples(op, sample):
    """The NumPy reference gives what the sample states; the C++ kernel, the function body (ORT
    without the library), onnx.reference and the torch op all give the reference's outputs (the
    layers an op has: MoeRoutedExperts has no torch op; its kernel and body sum in float32, the
    reference in float64)."""
    from ascend_moe_onnx.onnx_schemas.functions import attach_functions
    from tests.ops.moe_re_routing.rerouting_cases import to_numpy

    rtol = op.rtol if sample.rtol is None else sample.rtol
    atol = op.atol if sample.atol is None else sample.atol
    inputs, attrs = sample.inputs, sample.attrs
    expected = op.spec.reference(*[inputs.get(n) for n in op.spec.INPUT_NAMES], **attrs)
    _assert_expected(op, sample, expected, "NumPy reference", rtol, atol)
    model = node_model(op, inputs, attrs, ranks=True)
    feeds = present(inputs)
    layers = {
        "C++ kernel": lambda: run_feeds(session(model), feeds),
        "function body": lambda: run_feeds(session(attach_functions(model), library=False), feeds),
        "onnx.reference": lambda: ReferenceEvaluator(model, new_ops=onnx_schemas.REFERENCE_OPS).run(None, feeds),
    }
    if any(np.size(a) == 0 for a in feeds.values()):
        # ORT folds static shapes when the session is created: an empty tensor reaches every
        # shape computation of the body there (a Reshape's -1 cannot be inferred from 0 elements)
        static = node_model(op, inputs, attrs, shapes=True)
        layers["function body, static shapes"] = lambda: run_feeds(session(attach_functions(static), library=False),
                                                                   feeds)
    if op.torch_call is not None:
        layers["torch op"] = lambda: [to_numpy(t) for t in op.torch_call(
            {n: to_torch(a) for n, a in inputs.items()}, attrs)]
    for what, run in layers.items():
        _assert_same_outputs(op, run(), expected, what, rtol, atol)


# ---- opset version ------------------------------------------------------------------------------


@pytest.mark.parametrize("version", [2, 1000])
def test_other_opset_versions_are_rejected_by_check_model(version):
    """The ops exist only at version 1 (a breaking change gets a new op name)."""
    op = OPS[0]
    model = node_model(op, {"x": np.zeros((2, 8), np.float32)}, {"k": 2}, opset_version=version)
    with pytest.raises(onnx.checker.ValidationError, match=re.escape(
            f"imports opset ascend.moe version {version}; the ascend.moe ops exist only at version 1")):
        onnx_schemas.check_model(model)
    with pytest.raises(ValueError, match=re.escape(f"imports opset ascend.moe version {version};")):
        ort_custom_ops.inference_session(model)


def test_check_nodes_looks_inside_subgraphs_and_names_the_node():
    """A node inside an If branch is checked like a top-level one; valid models pass."""
    op = OPS[0]
    inner = node_model(op, {"x": np.zeros((2, 8), np.float32)}, {"k": 2, "norm": 1})
    inner.graph.node[0].name = "router"
    branch = inner.graph
    cond = helper.make_tensor_value_info("c", onnx.TensorProto.BOOL, [])
    outs = [helper.make_tensor_value_info(o.name, o.type.tensor_type.elem_type, None)
            for o in branch.output]
    node = helper.make_node("If", ["c"], [o.name for o in branch.output],
                            then_branch=branch, else_branch=branch)
    graph = helper.make_graph([node], "g", [cond] + list(branch.input), outs)
    model = helper.make_model(graph, opset_imports=list(inner.opset_import))
    with pytest.raises(ValueError, match=re.escape("node 'router': MoeGatingTopKHash: attribute 'norm' "
                                                   "is not an attribute of MoeGatingTopKHash")):
        onnx_schemas.check_nodes(model)
    onnx_schemas.check_nodes(node_model(op, {"x": np.zeros((2, 8), np.float32)}, {"k": 2}))


@pytest.mark.parametrize("op", OPS, ids=lambda op: op.name)
def test_case_and_sample_ids_are_unique_per_op(op):
    """Ids name cases in test ids and in ``OpInfo.body_blind``: a repeated id would hide a case."""
    ids = [c.id for c in op.bad_cases()]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)
    unknown = op.body_blind - set(ids)
    assert not unknown, f"body_blind names no case: {sorted(unknown)}"
