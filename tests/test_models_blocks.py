"""Graph-level accuracy of the MoE blocks: export with a dynamic token dimension, run in ONNX Runtime
(with the custom-op library, and without it through the attached function bodies) at token counts
other than the export example, and compare with the torch export path and the plain-torch
reference. Expert indices must agree exactly except near-ties, which are detected and reported
(as warnings in the pytest summary)."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
import torch

from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.exporters import experts_graph
from ascend_moe_onnx.models import experts as routed_experts
from ascend_moe_onnx.models import presets

EXPORT_TOKENS = verify.EXPORT_TOKENS
# never the export example
TOKEN_COUNTS = (1, 3, 17, 64)


def token_counts(block) -> tuple:
    """TOKEN_COUNTS and one count past the `ort` formulation's own-kernel branch (routed rows T·k;
    the expert-parallel block's rows are its T tokens), so that its MoE-op branch is checked too."""
    rows_per_token = 1 if block.cfg.ranks else block.cfg.top_k
    return (*TOKEN_COUNTS, 1 + experts_graph.OWN_KERNEL_MAX_ROWS // rows_per_token)
# float32 for every preset; bfloat16 / float16 where they exercise something different: logits in
# the low-precision dtype (qwen3-moe, mixtral), float32 logits with low-precision experts
# (deepseek-v3, deepseek-v2), hash + image routing, int8 and bf16 expert-parallel blocks.
CASES = ([(name, "float32") for name in presets.PRESETS if name != "ep-bf16"]
         + [("deepseek-v3", "bfloat16"), ("qwen3-moe", "bfloat16"), ("deepseek-v4-hash-image", "bfloat16"),
            ("ep-int8", "bfloat16"), ("ep-bf16", "bfloat16"),
            ("mixtral", "float16"), ("deepseek-v2", "float16"), ("ep-bf16", "float16")])


# Every case through every routed-rows formulation; padded (the old formulation) in float32 only.
FORMULATION_CASES = [(n, d, f) for n, d in CASES for f in routed_experts.FORMULATIONS
                     if f != "padded" or d == "float32"]
# Op types each formulation must (or must not) put in the graph (routed blocks: onnx also has an If).
FORMULATION_OPS = {"ort": ({"MoE", experts_graph.OWN_KERNEL_OP}, {"Loop"}), "onnx": ({"If"}, {"MoE", "Loop"}),
                   "padded": (set(), {"MoE", "Loop"})}


def _exported(block, experts=None):
    key = (block.preset, "tiny", block.dtype_name, None, 0)
    data = verify.export_block(block, EXPORT_TOKENS, cache_key=key, experts=experts)
    return onnx.load_from_string(data), verify.sessions(data)


def _all_op_types(graph) -> set:
    ops = set()
    for n in graph.node:
        ops.add(n.op_type)
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                ops |= _all_op_types(a.g)
    return ops


def assert_output_close(got, ref, dtype: str, rows=None, what=""):
    """max|got - ref| / max|ref| within the dtype's tolerance, on the given rows."""
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    if rows is not None:
        got, ref = got[rows], ref[rows]
    if ref.size == 0:
        return
    err = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30)
    assert err <= verify.TOLERANCES[dtype], f"{what}: max rel error {err:.3g} > {verify.TOLERANCES[dtype]:g}"


@pytest.mark.parametrize("name,dtype,experts", FORMULATION_CASES,
                         ids=[f"{n}-{d}-{f}" for n, d, f in FORMULATION_CASES])
def test_block_graph(name, dtype, experts):
    """The verify harness (what `moe-onnx verify` runs) passes every path pair at every count, with
    each expert formulation; the graph holds that formulation's ops."""
    block = presets.build(name, "tiny", dtype)
    with routed_experts.using(block, experts):
        _check_block_graph(block, name, dtype, experts)


def _check_block_graph(block, name, dtype, experts):
    model, sessions = _exported(block, experts)
    ours = [n for n in model.graph.node if n.domain == "ascend.moe"]
    assert len(ours) == 1, [n.op_type for n in ours]
    assert not [n for n in model.graph.node if n.domain == routed_experts.DOMAIN]
    need, never = FORMULATION_OPS[experts]
    ops = _all_op_types(model.graph)
    assert need <= ops and not (never & ops), (experts, sorted(ops))
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "tokens"
    assert not isinstance(sessions["ort-functions"], str), sessions["ort-functions"]
    counts = token_counts(block)
    checks = verify.verify_block(block, counts, cache_key=(block.preset, "tiny", block.dtype_name, None, 0),
                                 experts=experts)
    assert [(c.got, c.ref) for c in checks] == list(verify.PATHS)
    for c in checks:
        what = f"{name} {dtype} {experts} {c.got} vs {c.ref}"
        assert c.experts == experts, what
        assert c.tokens == list(counts) and c.compared == len(counts), what
        assert c.passed, f"{what}: {c}"
        if c.near_ties:  # shown in pytest's warnings summary, not only with -s
            warnings.warn(f"{what}: near-ties (tokens, row, experts, score spread) {c.near_ties}", stacklevel=2)


@pytest.mark.parametrize("experts", routed_experts.FORMULATIONS)
@pytest.mark.parametrize("name", list(presets.PRESETS))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16", "float16"])
def test_export_path_matches_reference_in_torch(name, dtype, experts):
    """Eager torch, every preset, dtype and expert formulation: the custom-op path against the
    plain-torch reference."""
    block = presets.build(name, "tiny", dtype, seed=1)
    inputs = block.example_inputs(40, seed=2)
    with torch.no_grad(), routed_experts.using(block, experts):
        (out, idx), (ref_out, ref_idx) = block(*inputs), block.forward_native(*inputs)
    assert out.dtype == ref_out.dtype == block.dtype
    rows = np.ones(40, dtype=bool)
    if hasattr(block, "selection_scores"):
        with torch.no_grad():
            scores = block.selection_scores(dict(zip(block.input_names, inputs))).double().numpy()
        # The plain-torch reference ranks bfloat16 / float16 scores with torch.topk: rows may
        # differ from the op at near-ties, classified by the verify harness's own rule.
        ties, bad = verify.classify_rows(idx.numpy(), ref_idx.numpy(), scores, verify.tie_tolerance(block))
        assert not bad, f"{name} {dtype}: rows differ beyond a near-tie: {bad[:5]}"
        rows[[t[0] for t in ties]] = False
    else:
        assert torch.equal(idx, ref_idx)
    assert_output_close(verify.to_numpy(out).astype(np.float64), verify.to_numpy(ref_out).astype(np.float64),
                        dtype, rows, f"{name} {dtype}")


def test_tied_experts_follow_the_tie_rule_and_are_reported():
    """Two experts with identical router rows tie on every token: the op (ORT and torch) takes the
    lower index; where torch.topk in the reference picks the other one, the mismatch is reported
    as a near-tie, and the same mismatch with distinct scores fails."""
    block = presets.build("mixtral", "tiny", "float32", seed=5)
    with torch.no_grad():
        block.gate.weight[5] = block.gate.weight[2]
        block.gate.weight *= 4  # make experts 2/5 win often
    inputs = block.example_inputs(64, seed=3)
    data = verify.export_block(block, EXPORT_TOKENS)
    sess = verify.sessions(data)
    results, like = verify.run_torch(block, inputs)
    ort_out = verify.run_ort(sess["ort"], block, inputs, like)
    np.testing.assert_array_equal(ort_out[1], results["torch"][1])
    idx = ort_out[1]
    rows = np.flatnonzero((idx == 5).any(axis=1))
    assert rows.size, "experts 2/5 should be chosen by some tokens"
    # k = 2 and 2/5 tie on every token: both are chosen together, the lower index first.
    assert (idx[rows] == [2, 5]).all(), idx[rows]
    forced = idx.copy()
    forced[rows] = [5, 2]  # what a reference with the other tie order returns
    scores = block.selection_scores({"hidden_states": inputs[0]}).double().numpy()
    ties, bad = verify.classify_rows(forced, idx, scores, verify.tie_tolerance(block))
    assert [t[0] for t in ties] == rows.tolist() and all(t[2] == 0.0 for t in ties) and not bad
    forced[rows[0]] = [5, 7]  # expert 7 instead of 2 is not a tie
    ties, bad = verify.classify_rows(forced, idx, scores, verify.tie_tolerance(block))
    assert [t[0] for t in bad] == [rows[0]] and [t[0] for t in ties] == rows[1:].tolist()


@pytest.mark.parametrize("experts", ["ort", "onnx"])
def test_empty_and_single_token_batches_in_ort(experts):
    """0 and 1 tokens run through a graph exported with 8 (routed and expert-parallel blocks)."""
    for name in ("deepseek-v3", "ep-int8"):
        block = presets.build(name)
        _, sessions = _exported(block, experts)
        for T in (0, 1):
            inputs = block.example_inputs(T, seed=9)
            results, like = verify.run_torch(block, inputs)
            got = verify.run_ort(sessions["ort"], block, inputs, like)
            assert got[0].shape == (T, block.cfg.hidden)
            assert_output_close(got[0], results["reference"][0], "float32", what=f"{name} T={T}")


def test_unknown_formulation_is_a_clear_error():
    block = presets.build("mixtral")
    with pytest.raises(routed_experts.ExpertsError, match="unknown formulation 'fused'.*ort, onnx, padded"), \
            routed_experts.using(block, "fused"):
        pass


def test_onnx_formulation_serves_decode_and_prefill_on_one_file():
    """One exported file, 1 to 64 tokens; hash rows repeat experts (duplicates inside a token's k,
    so one expert's segment holds several rows of the same token)."""
    block = presets.build("deepseek-v4-hash", "tiny", "float32")
    _, sessions = _exported(block, "onnx")
    for T in (1, 2, 5, 64):
        inputs = block.example_inputs(T, seed=T)
        results, like = verify.run_torch(block, inputs)
        got = verify.run_ort(sessions["ort"], block, inputs, like)
        np.testing.assert_array_equal(got[1], results["reference"][1])
        assert_output_close(got[0], results["reference"][0], "float32", what=f"T={T}")


@pytest.mark.parametrize("experts", ["ort", "onnx"])
def test_expert_weights_are_stored_in_their_final_layout(experts):
    """No node rearranges weights at session creation: ONNX Runtime 1.27+ does not constant-fold
    results over 1 GiB, so a full-size block would redo the layout on every call. The stacked
    weights the placeholders read are replaced, not kept beside their new layout."""
    block = presets.build("deepseek-v3", "tiny", "bfloat16")
    model = _exported(block, experts)[0]
    constant = {t.name for t in model.graph.initializer}
    constant |= {o for n in model.graph.node if n.op_type == "Constant" for o in n.output}
    folded = [n.op_type for n in model.graph.node  # Shape's output is a few integers
              if n.op_type != "Shape" and n.input and all(i in constant for i in n.input if i)]
    assert not folded, folded
    weights = {t.name: t for t in model.graph.initializer}
    if experts == "ort":  # MoE op and MoeRoutedExperts (the If's two branches) read the same weights
        from ascend_moe_onnx.onnx_schemas._common import walk_graphs

        nodes = [n for g in walk_graphs(model.graph) for n in g.node]
        fc1 = {n.input[2] for n in nodes if n.op_type == "MoE"} | {n.input[3] for n in nodes
                                                                 if n.op_type == "MoeRoutedExperts"}
        assert len(fc1) == 1 and weights[fc1.pop()].data_type == onnx.TensorProto.FLOAT
    assert not any(name.endswith(("gate_proj", "up_proj")) for name in weights), sorted(weights)


@pytest.mark.parametrize("name", ["deepseek-v3", "deepseek-v2", "deepseek-v4"])
def test_ort_runs_the_shared_expert_inside_the_experts_call(name):
    """``ort``: the shared expert(s) of width s*I are s more experts of the one MoeRoutedExperts /
    MoE call (one slot of weight 1 per token each), so no MatMul but the router's is left; the
    block's answers are checked against torch by test_block_graph."""
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs

    block = presets.build(name, "tiny", "float32")
    cfg = block.cfg
    assert cfg.shared, name
    model = _exported(block, "ort")[0]
    nodes = [n for g in walk_graphs(model.graph) for n in g.node]
    assert sum(n.op_type in ("MatMul", "Gemm") for n in nodes) == 1, sorted(n.op_type for n in nodes)
    weights = {t.name: t for t in model.graph.initializer}
    own = next(n for n in nodes if n.op_type == "MoeRoutedExperts")
    moe = next(n for n in nodes if n.op_type == "MoE")
    assert weights[own.input[3]].dims[0] == weights[own.input[4]].dims[0] == cfg.experts + cfg.shared
    assert own.input[3] == moe.input[2]
    assert onnx.helper.get_attribute_value(next(a for a in moe.attribute if a.name == "k")) == cfg.top_k + cfg.shared
    # the If switches on the routed rows T*k (the measured threshold), not on T*(k + s)
    producer = {o: n for n in model.graph.node for o in n.output}
    branch = next(n for n in model.graph.node if n.op_type == "If")
    size = producer[producer[branch.input[0]].input[0]]
    assert size.op_type == "Size" and producer[size.input[0]].op_type == "MoeGatingTopKHash", size


def test_ort_lays_out_external_weights_with_nodes(tmp_path):
    """Weights stored as external data are not read at export: ``ort`` lays them out (and appends
    two shared slices) with nodes instead; both If branches still agree with torch."""
    import onnxruntime as ort

    from ascend_moe_onnx import exporters, ort_custom_ops

    block = presets.build("deepseek-v2", "tiny", "float32")
    path = tmp_path / "block.onnx"
    with routed_experts.using(block, "ort"):
        exporters.export(block, block.example_inputs(8), path, external_data=True,
                         dynamic_shapes=block.dynamic_shapes(), input_names=list(block.input_names),
                         output_names=list(block.output_names))
    session = ort.InferenceSession(str(path), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    rows_past_threshold = experts_graph.OWN_KERNEL_MAX_ROWS // block.cfg.top_k + 1
    for T in (3, rows_past_threshold):
        inputs = block.example_inputs(T, seed=T)
        results, like = verify.run_torch(block, inputs)
        got = verify.run_ort(session, block, inputs, like)
        assert_output_close(got[0], results["reference"][0], "float32", what=f"T={T}")


@pytest.mark.parametrize("name,dtype", [("deepseek-v3", "float32"), ("qwen3-moe", "bfloat16"),
                                        ("ep-int8", "bfloat16")])
def test_onnx_formulation_reads_each_expert_in_place(name, dtype):
    """``onnx``: one If per expert, whose MatMuls read that expert's own initializers (no Gather
    copies an expert out of a stacked weight); an expert without rows only hands on an empty block."""
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs

    block = presets.build(name, "tiny", dtype)
    model = onnx.load_from_string(verify.export_block(block, EXPORT_TOKENS, experts="onnx"))
    weights = {t.name for t in model.graph.initializer}
    per_expert = [n for n in model.graph.node if n.op_type == "If"]
    assert len(per_expert) == block.cfg.experts
    for node in per_expert:
        then = next(a.g for a in node.attribute if a.name == "then_branch")
        read = [n.input[1] for g in walk_graphs(then) for n in g.node if n.op_type == "MatMul"]
        assert len(read) == 3 and set(read) <= weights, read
        skip = next(a.g for a in node.attribute if a.name == "else_branch")
        assert [n.op_type for n in skip.node] == ["Identity"]
    nodes = [n for g in walk_graphs(model.graph) for n in g.node]
    assert not [n for n in nodes if n.op_type == "Gather" and n.input[0] in weights]
