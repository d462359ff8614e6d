"""The transformers MoE family table: every family patches to its expected status and agrees with
HF eager; its MoE layers export (fused routing: one MoeGatingTopKHash node per fused layer) and
run in ONNX Runtime, with the library and through the function bodies, at two token counts.

A few representative families run by default; ``--all-families`` runs the whole table."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tests import hf_families as F  # skips the module without transformers

# isort: split

from ascend_moe_onnx import hf  # noqa: E402
from ascend_moe_onnx.hf import export as hf_export  # noqa: E402
from ascend_moe_onnx.hf.patching import layer_status  # noqa: E402
from ascend_moe_onnx.models.runtime import sessions  # noqa: E402

TOLERANCE = 1e-5  # float32, max |err| / max |ref|


def _rel(got, ref) -> float:
    got, ref = np.asarray(got, np.float64), np.asarray(ref, np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def _cases():
    return [pytest.param(c, marks=() if c in F.DEFAULT_RUN else pytest.mark.all_families) for c in F.FAMILIES]


def _block_out(block, x):
    y = block(x[None])
    return (y[0] if isinstance(y, tuple) else y)[0]


@pytest.mark.parametrize("case", _cases())
def test_family_patches_to_its_status_and_matches_hf(case):
    model = F.model(case)
    ids = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = F.logits(model, ids)
        hf.patch(model, quiet=True)
        got = F.logits(model, ids)
    status = layer_status(model)
    assert status, f"{case}: no MoE layer found"
    expected = F.FAMILIES[case][0]
    assert {s for s, _ in status.values()} == {expected}, status
    assert all(note for s, note in status.values() if s == "unfused"), "an unfused layer must say why"
    assert _rel(got, ref) <= TOLERANCE


@pytest.mark.parametrize("case", _cases())
def test_family_moe_layers_export_and_match_hf_in_ort(case):
    model = F.model(case)
    hf.patch(model, quiet=True)
    blocks = hf_export.moe_blocks(model)
    if any(getattr(b, "is_hash", False) for b in blocks.values()):
        pytest.skip("hash layers take input_ids: covered by test_hf_patch")
    if case in F.NO_EXPORT:
        with pytest.raises(Exception, match="data-dependent|Could not guard"):
            hf_export.export_model(model, layers=(0, max(blocks)))
        return
    proto, wrapper = hf_export.export_model(model, layers=(0, max(blocks)))
    fused = sum(getattr(b, "_ascend_status", None) == "fused" for b in blocks.values())
    assert sum(n.op_type == "MoeGatingTopKHash" for n in proto.graph.node) == fused
    runs = sessions(proto.SerializeToString())
    for tokens in (5, 13):
        x = torch.randn(tokens, model.config.get_text_config().hidden_size,
                        generator=torch.Generator().manual_seed(tokens))
        with torch.no_grad():
            refs = [_block_out(blocks[i], x).numpy() for i in wrapper.layer_ids]
        for name, session in runs.items():
            assert not isinstance(session, str), session
            outs = session.run(None, {"hidden_states": x.numpy()})
            for i, got, ref in zip(wrapper.layer_ids, outs, refs):
                assert _rel(got, ref) <= TOLERANCE, f"{case} {name} layer {i} at {tokens} tokens"


def test_step3p7_experts_clamped_after_the_silu_stay_hf_and_say_why():
    """Step-3.7's experts run as routed rows (tests above); a layer whose swiglu_limits clamps
    silu(gate) keeps HF's experts, and its note names the field and the value."""
    cfg = F.config("step3p7")
    cfg.swiglu_limits = [0.0, 7.0]
    model = F._model_class(cfg)(cfg).eval()
    hf.patch(model, quiet=True)
    ((status, note),) = layer_status(model).values()
    assert status == "fused" and "swiglu_limits=7: Step3p7Experts clamps silu(gate)" in note, note


def test_cli_prints_the_layer_summary_and_exports_an_unfused_family(tmp_path, capsys):
    from ascend_moe_onnx.cli import main as cli

    F.model("phimoe").save_pretrained(tmp_path / "ckpt")
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--layers", "0-1", "-o", str(tmp_path / "m.onnx")])
    text = capsys.readouterr()
    assert code == 0, text.err
    assert "model.layers.0.mlp: unfused (router PhimoeTopKRouter: sparsemixer" in text.out
    assert "summary: 0 fused, 2 unfused, 0 dense" in text.out


# bfloat16 checkpoints of a few router-table families (loaded as from_pretrained loads them: the
# modelling's float32 modules stay float32): their MoE layers export and run in ONNX Runtime with
# the library within the project's bfloat16 tolerance of HF eager. (A bfloat16 whole model does
# not run on ORT's CPU provider: HF's attention has no bfloat16 kernels there.)
BF16_CASES = ("olmoe", "minimax_m2", "gpt_oss", "qwen3_next", "qwen3_5_moe", "ernie4_5_moe", "dots1")
# bfloat16 MoE layers whose graph ORT's CPU provider cannot run (it has no bfloat16 Gemm / MatMul:
# only layers whose every matmul is inside the library's ops or computed in float32 run there), and why
_BF16_LINEAR = "a bfloat16 Linear outside the library's ops (Gemm / MatMul: no bfloat16 kernel on ORT's CPU provider)"
BF16_NOT_ON_CPU = {"phimoe": f"the unfused layer's HF router: {_BF16_LINEAR}"}


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in F.DEFAULT_RUN else pytest.mark.all_families)
                                  for c in (*BF16_CASES, *BF16_NOT_ON_CPU)])
def test_bfloat16_moe_layers_run_in_ort(case, tmp_path):
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.cli import verify
    from ascend_moe_onnx.models.runtime import run_ort

    F.model(case).save_pretrained(tmp_path)
    model, eager = hf_export.load(tmp_path, torch.bfloat16), hf_export.load(tmp_path, torch.bfloat16)
    hf.patch(model, quiet=True)
    blocks = hf_export.moe_blocks(model)
    names = {id(m): n for n, m in model.named_modules()}
    hf_blocks = dict(eager.named_modules())  # the same blocks, unpatched
    proto, wrapper = hf_export.export_model(model, layers=(0, max(blocks)))
    if case in BF16_NOT_ON_CPU:  # exports; the day ORT gains the kernel this fails and says so
        with pytest.raises(Exception, match="NOT_IMPLEMENTED"):
            ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                 providers=["CPUExecutionProvider"])
        return
    session = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                   providers=["CPUExecutionProvider"])
    x = torch.randn(13, model.config.get_text_config().hidden_size,
                    generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    with torch.no_grad():
        refs = tuple(_block_out(hf_blocks[names[id(blocks[i])]], x) for i in wrapper.layer_ids)
    for i, got, ref in zip(wrapper.layer_ids, run_ort(session, wrapper, (x,), refs), refs):
        assert _rel(got.astype(np.float32), ref.float()) <= verify.TOLERANCES["bfloat16"], f"{case} layer {i}"


@pytest.mark.parametrize("case", [pytest.param(c, marks=() if c in F.DEFAULT_RUN else pytest.mark.all_families)
                                  for c in F.WHOLE_MODEL])
def test_whole_model_in_ort_matches_hf(case):
    """The whole tiny model (prefill: input_ids -> logits) exports and matches HF eager in ONNX
    Runtime, with the library and through the function bodies."""
    model = F.model(case)
    ids = torch.randint(0, model.config.get_text_config().vocab_size, (2, 7),
                        generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = F.logits(model, ids).numpy()
    proto, _ = hf_export.export_model(model)
    for name, session in sessions(proto.SerializeToString()).items():
        assert not isinstance(session, str), session
        (got,) = session.run(None, {"input_ids": ids.numpy()})
        assert _rel(got, ref) <= 1e-4, f"{case} {name}"


@pytest.mark.parametrize("case", [pytest.param(c, marks=pytest.mark.all_families) for c in F.WHOLE_MODEL_FIXED_SEQUENCE])
def test_whole_model_with_a_fixed_sequence_is_refused_naming_layers(case):
    """A model whose HF code turns the sequence length into a constant never exports a graph that
    is wrong for other lengths: one ValueError naming the input, the dimension and --layers."""
    model = F.model(case)
    with pytest.raises(ValueError, match=r"'input_ids' dimension 1 at 8.*--layers") as info:
        hf_export.export_model(model)
    assert "\n" not in str(info.value)


def test_tiny_model_computes_after_save_and_load_what_it_computes_in_memory(tmp_path):
    """Random weights, but config-derived buffers (rotary inv_freq) as the model makes them: a saved and
    reloaded tiny model is the same model."""
    model = F.model("qwen3_moe")
    model.save_pretrained(tmp_path)
    loaded = type(model).from_pretrained(tmp_path).eval()
    ids = torch.tensor([[5, 17, 3, 42, 8]])
    torch.testing.assert_close(F.logits(loaded, ids), F.logits(model, ids), rtol=0, atol=0)
