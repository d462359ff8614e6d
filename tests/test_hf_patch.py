"""patch(model) on tiny random HF models: block equality, export, ONNX Runtime vs HF eager logits."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
import torch

from tests import hf_cases  # skips the module without transformers

# isort: split

from ascend_moe_onnx import hf  # noqa: E402
from ascend_moe_onnx.cli import main as cli  # noqa: E402
from ascend_moe_onnx.cli import verify
from ascend_moe_onnx.hf import export as hf_export  # noqa: E402
from ascend_moe_onnx.hf.patching import patch_block  # noqa: E402
from ascend_moe_onnx.models.runtime import sessions  # noqa: E402

GATING = "MoeGatingTopKHash"


def _rel(got, ref) -> float:
    got, ref = np.asarray(got, dtype=np.float64), np.asarray(ref, dtype=np.float64)
    return float(np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-30))


def _block_inputs(block, tokens=24, seed=3, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, tokens, block.config.hidden_size, generator=g).to(dtype)
    kw = {"input_ids": torch.randint(0, block.config.vocab_size, (1, tokens), generator=g)} \
        if getattr(block, "is_hash", False) else {}
    return x, kw


@pytest.mark.parametrize("case", list(hf_cases.CASES))
@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_patched_block_matches_hf(case, dtype):
    for layer in ((0, 1) if hf_cases.CASES[case][0] == "deepseek_v4" else (1,)):  # V4: hash + normal layer
        block = hf_cases.block(case, layer=layer, dtype=getattr(torch, dtype))
        x, kw = _block_inputs(block, dtype=getattr(torch, dtype))
        with torch.no_grad():
            ref = block(x, **kw)
            patch_block(block, hf.routing(block.config))
            got = block(x, **kw)
        assert got.dtype == ref.dtype and got.shape == ref.shape
        err = _rel(got.float(), ref.float())
        assert err <= verify.TOLERANCES[dtype], f"{case} layer {layer}: max rel err {err:.3g}"


def test_patch_reports_unsupported_blocks_and_unpatch_restores(capsys):
    transformers = hf_cases.transformers
    cfg = transformers.PhimoeConfig(vocab_size=64, hidden_size=32, intermediate_size=16, num_hidden_layers=1,
                                    num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                                    num_experts_per_tok=2)
    model = transformers.AutoModelForCausalLM.from_config(cfg)
    assert hf.patch(model) == []
    err = capsys.readouterr().err
    assert "model.layers.0.mlp: unfused: router PhimoeTopKRouter: sparsemixer routing" in err
    assert "routed-rows experts" in err  # the experts still run on the routed rows only
    assert hf.unpatch(model) == 1  # the experts module

    m = hf_cases.model("mixtral")
    before = {type(b) for b in m.modules()}
    assert hf.patch(m, quiet=True) == ["model.layers.0.mlp", "model.layers.1.mlp"]
    assert hf.patch(m, quiet=True) == ["model.layers.0.mlp", "model.layers.1.mlp"]  # idempotent
    assert hf.unpatch(m) == 2 and {type(b) for b in m.modules()} == before


def test_patch_refuses_a_config_the_op_cannot_honour():
    m = hf_cases.model("deepseek_v2")
    m.config.topk_method = "noaux_tc"
    with pytest.raises(hf.HFConfigError, match="topk_method='noaux_tc'"):
        hf.patch(m)


def _run_both(data: bytes, feeds: dict) -> dict:
    out = {}
    for name, session in sessions(data).items():
        assert not isinstance(session, str), session
        out[name] = session.run(None, feeds)
    return out


# glm4_moe-groups-no-renorm: grouped sigmoid weights from the op's scores (out_flag); V4: a hash layer.
@pytest.mark.parametrize("case", ["glm4_moe-groups-no-renorm", "qwen2_moe", "deepseek_v4"])
def test_moe_layers_export_matches_hf_blocks(case):
    model = hf_cases.model(case)
    layers = (0, 1)
    blocks = {int(n.split(".")[2]): mod for n, mod in model.named_modules() if n.endswith(".mlp")}
    tokens = 13
    x = torch.randn(tokens, model.config.hidden_size, generator=torch.Generator().manual_seed(7))
    ids = torch.randint(0, model.config.vocab_size, (tokens,), generator=torch.Generator().manual_seed(8))
    refs = {}
    with torch.no_grad():
        for i, b in blocks.items():
            if hasattr(b, "experts"):
                kw = {"input_ids": ids[None]} if getattr(b, "is_hash", False) else {}
                refs[i] = b(x[None], **kw)[0].numpy()
    proto, wrapper = hf_export.export_model(model, layers=layers)
    assert sum(n.op_type == GATING for n in proto.graph.node) == len(refs)
    # The experts run on the routed rows only (models.experts' default: an If between the library's
    # MoeRoutedExperts for few routed rows and ORT's MoE op).
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs

    nodes = [n for g in walk_graphs(proto.graph) for n in g.node]
    assert sum((n.domain, n.op_type) == ("com.microsoft", "MoE") for n in nodes) == len(refs)
    assert sum(n.op_type == "MoeRoutedExperts" for n in nodes) == len(refs)
    # A plain shared MLP runs inside the experts' call (n_shared more slots); Qwen2-MoE's gated one
    # is added after it.
    shared = getattr(model.config, "n_shared_experts", 0) or 0
    ks = {onnx.helper.get_attribute_value(a) for n in nodes if n.op_type == "MoE" for a in n.attribute
          if a.name == "k"}
    assert ks == {model.config.num_experts_per_tok + shared}, (ks, shared)
    feeds = {"hidden_states": x.numpy()}
    if "input_ids" in wrapper.input_names:
        feeds["input_ids"] = ids.numpy()
    for name, outs in _run_both(proto.SerializeToString(), feeds).items():
        for i, got in zip(wrapper.layer_ids, outs):
            assert _rel(got, refs[i]) <= 1e-5, f"{name} layer {i}"


# A few architectures (each export takes seconds); qwen3_moe runs through the CLI test, Mixtral through
# transformers' exporter. DeepSeek-V2 rotates with complex numbers (exported as real pairs,
# hf.rotary); DeepSeek-V4's whole model exports and matches too but takes minutes (its layers are
# tested above).
@pytest.mark.parametrize("case", ["deepseek_v3", "qwen2_moe", "deepseek_v2"])
def test_whole_model_in_ort_matches_hf_logits(case):
    model = hf_cases.model(case)
    ids = torch.randint(0, model.config.vocab_size, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = model(ids).logits.numpy()
    proto, _ = hf_export.export_model(model)
    moe_layers = sum(hasattr(m, "_ascend_routing") for m in model.modules())
    assert sum(n.op_type == GATING for n in proto.graph.node) == moe_layers > 0
    for name, (got,) in _run_both(proto.SerializeToString(), {"input_ids": ids.numpy()}).items():
        assert _rel(got, ref) <= 1e-4, name


def _to_ascend_w8a8(directory) -> dict:
    """Rewrite a saved model's expert (and shared-expert) projections as an Ascend w8a8 checkpoint:
    int8 per row, weight_scale [N, 1], zero weight_offset. Returns {name: (q, scales)}."""
    from safetensors.torch import load_file, save_file

    (file,) = directory.glob("*.safetensors")
    tensors, truth = load_file(file), {}
    for name in [k for k in sorted(tensors) if ("experts." in k or "shared_experts." in k)
                 and k.endswith(("gate_proj.weight", "up_proj.weight", "down_proj.weight"))]:
        w = tensors[name].float()
        scale = w.abs().amax(1, keepdim=True) / 100  # |q| <= 100: quantizing again would change them
        q = torch.round(w / scale).to(torch.int8)
        tensors[name], tensors[name + "_scale"] = q, scale
        tensors[name[:-len("weight")] + "weight_offset"] = torch.zeros_like(scale)
        truth[name] = (q.numpy(), scale.reshape(-1).numpy())
    save_file(tensors, file, metadata={"format": "pt"})
    return truth


def test_cli_export_hf_ascend_w8a8_checkpoint_keeps_its_integers(tmp_path, capsys):
    """An Ascend w8a8 checkpoint through --hf: the model computes with q * scale, the graph holds
    the checkpoint's integers and scales as stored (routed and folded shared expert alike)."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.onnx_schemas._common import walk_graphs
    from tests import hf_families

    hf_families.model("dots1").save_pretrained(tmp_path / "ckpt")
    truth = _to_ascend_w8a8(tmp_path / "ckpt")
    out = tmp_path / "m.onnx"
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--layers", "0-1", "-o", str(out)])
    assert code == 0, capsys.readouterr().err
    proto = onnx.load(str(out))
    (node,) = [n for g in walk_graphs(proto.graph) for n in g.node if n.op_type == "MoeRoutedExperts"]
    inits = {t.name: onnx.numpy_helper.to_array(t) for t in proto.graph.initializer}
    q0, s0 = truth["model.layers.1.mlp.experts.0.gate_proj.weight"]
    np.testing.assert_array_equal(inits[node.input[3]][0, 0::2], q0)  # gate rows of expert 0, as stored
    np.testing.assert_array_equal(inits[node.input[5]][0, 0::2], s0)
    qd, sd = truth["model.layers.1.mlp.shared_experts.down_proj.weight"]
    E = hf_families.config("dots1").n_routed_experts  # the shared expert (one slice here) follows
    np.testing.assert_array_equal(inits[node.input[4]][E], qd)
    np.testing.assert_array_equal(inits[node.input[6]][E], sd)
    model = hf_export.load(tmp_path / "ckpt")  # dequantized, unpatched: HF eager on q * scale
    (block,) = [m for n, m in model.named_modules() if n == "model.layers.1.mlp"]
    x = torch.randn(7, model.config.hidden_size, generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = block(x[None])[0].numpy()
    session = ort.InferenceSession(str(out), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    assert _rel(session.run(None, {"hidden_states": x.numpy()})[0], ref) <= 1e-5

    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--layers", "0-1", "--weights-quant", "int4",
                     "-o", str(out)])
    err = capsys.readouterr().err
    assert code == 2 and "the checkpoint is int8 per channel (Ascend w8a8)" in err and "Traceback" not in err


@pytest.mark.parametrize("edit,message", [
    ("offset", "non-zero weight_offset (asymmetric int8"),
    ("scale", "has shape (1, 1): expected one scale per row"),
])
def test_ascend_w8a8_checkpoint_outside_the_layout_is_one_clear_error(tmp_path, edit, message):
    from safetensors.torch import load_file, save_file

    hf_cases.model("qwen3_moe").save_pretrained(tmp_path)
    _to_ascend_w8a8(tmp_path)
    (file,) = tmp_path.glob("*.safetensors")
    tensors = load_file(file)
    name = "model.layers.0.mlp.experts.0.up_proj.weight"
    if edit == "offset":
        tensors[name[:-len("weight")] + "weight_offset"] += 1
    else:
        tensors[name + "_scale"] = tensors[name + "_scale"][:1]
    save_file(tensors, file, metadata={"format": "pt"})
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        hf_export.load(tmp_path)


def _cli_export_checkpoint(model, tmp_path, capsys):
    """Saves ``model`` as a checkpoint and exports it with ``moe-onnx export --hf``: (input ids, the
    model's logits for them, the ONNX file, the exit code, the captured output)."""
    model.save_pretrained(tmp_path / "ckpt")
    ids = torch.randint(0, model.config.vocab_size, (1, 6), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        ref = model(ids).logits.numpy()
    out = tmp_path / "model.onnx"
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "-o", str(out)])
    return ids, ref, out, code, capsys.readouterr()


def test_cli_export_hf_checkpoint(tmp_path, capsys):
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops

    model = hf_cases.model("qwen3_moe")
    ids, ref, out, code, text = _cli_export_checkpoint(model, tmp_path, capsys)
    assert code == 0, text.err
    assert "2 MoeGatingTopKHash node(s)" in text.out
    session = ort.InferenceSession(str(out), ort_custom_ops.session_options(), providers=["CPUExecutionProvider"])
    assert _rel(session.run(None, {"input_ids": ids.numpy()})[0], ref) <= 1e-4

    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "--layers", "1", "-o", str(tmp_path / "l.onnx")])
    assert code == 0 and "MoE layers 1" in capsys.readouterr().out

    for argv, message in (
        (["--layers", "5-9"], "no MoE layer there"),
        (["--layers", "x"], "--layers must be N or N-M"),
        (["--layers", "1", "--whole-model"], None),
    ):
        if message is None:
            with pytest.raises(SystemExit):
                cli.main(["export", "--hf", str(tmp_path / "ckpt"), *argv, "-o", str(out)])
            continue
        code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), *argv, "-o", str(out)])
        assert code == 2 and message in capsys.readouterr().err
    code = cli.main(["export", "--hf", str(tmp_path / "nothing"), "-o", str(out)])
    assert code == 2 and "no config.json" in capsys.readouterr().err


def test_transformers_onnx_exporter_on_a_patched_model():
    exporters_mod = pytest.importorskip("transformers.exporters", reason="transformers without exporters")
    from ascend_moe_onnx.onnx_schemas.functions import attach_functions

    model = hf_cases.model("mixtral")
    ids = torch.randint(0, model.config.vocab_size, (2, 5), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        ref = model(input_ids=ids).logits.numpy()
    hf.patch(model)
    with hf_export.ascend_translations():
        exported = exporters_mod.OnnxExporter().export(model, {"input_ids": ids},
                                                      exporters_mod.OnnxConfig(dynamic=True))
    import onnx_ir

    proto = attach_functions(onnx_ir.serde.serialize_model(exported.program))
    assert sum(n.op_type == GATING for n in proto.graph.node) == 2
    for name, outs in _run_both(proto.SerializeToString(), {"input_ids": ids.numpy()}).items():
        assert _rel(outs[0], ref) <= 1e-4, name  # logits first, then the cache's keys and values


def test_load_maps_kimi_k2_checkpoints_to_deepseek_v3(tmp_path):
    import json

    model = hf_cases.model("kimi_k2-groups")
    model.save_pretrained(tmp_path)
    cfg = json.loads((tmp_path / "config.json").read_text())
    cfg.update(model_type="kimi_k2", auto_map={"AutoConfig": "configuration_deepseek.DeepseekV3Config"})
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    loaded = hf_export.load(tmp_path)
    assert type(loaded).__name__ == "DeepseekV3ForCausalLM"
    ids = torch.arange(12).reshape(2, 6)
    with torch.no_grad():
        ref = model(ids).logits
        assert hf.patch(loaded, quiet=True) == ["model.layers.1.mlp"]
        assert _rel(loaded(ids).logits, ref) <= 1e-5


@pytest.mark.parametrize("case", ["deepseek_v3", "qwen2_moe"])
def test_bfloat16_layer_export_runs_in_ort(tmp_path, case):
    """bfloat16 checkpoints (router kept float32 where HF keeps it): one MoE layer in ONNX Runtime
    with the library, within the project's bfloat16 tolerance of HF eager."""
    import onnxruntime as ort

    from ascend_moe_onnx import ort_custom_ops
    from ascend_moe_onnx.models.runtime import run_ort

    hf_cases.model(case).save_pretrained(tmp_path)
    model = hf_export.load(tmp_path, torch.bfloat16)
    x = torch.randn(13, model.config.hidden_size, generator=torch.Generator().manual_seed(7)).to(torch.bfloat16)
    with torch.no_grad():
        ref = model.model.layers[1].mlp(x[None])[0]
    proto, wrapper = hf_export.export_model(model, layers=(1, 1))
    session = ort.InferenceSession(proto.SerializeToString(), ort_custom_ops.session_options(),
                                   providers=["CPUExecutionProvider"])
    (got,) = run_ort(session, wrapper, (x,), (ref,))
    assert _rel(got.astype(np.float32), ref.float()) <= verify.TOLERANCES["bfloat16"]


@pytest.mark.parametrize("case", ["qwen2_moe", "qwen3_moe", "mixtral"])
def test_output_router_logits_as_hf(case, tmp_path, capsys):
    """``output_router_logits: true``: the patched model returns HF's router logits and auxiliary
    loss (transformers records the logits with a hook on the router module, which the patched
    block still calls), and the whole model exports through the CLI."""
    model = hf_cases.model(case, output_router_logits=True)
    ids = torch.randint(0, model.config.vocab_size, (2, 7), generator=torch.Generator().manual_seed(4))
    with torch.no_grad():
        ref = model(input_ids=ids, labels=ids)
        model.save_pretrained(tmp_path / "ckpt")
        hf.patch(model, quiet=True)
        got = model(input_ids=ids, labels=ids)
    assert len(got.router_logits) == len(ref.router_logits) == 2
    for g, r in zip(got.router_logits, ref.router_logits):
        assert g.shape == r.shape and _rel(g, r) <= 1e-6
    assert _rel(got.aux_loss, ref.aux_loss) <= 1e-5 and _rel(got.loss, ref.loss) <= 1e-5
    assert hf.unpatch(model) == 2
    code = cli.main(["export", "--hf", str(tmp_path / "ckpt"), "-o", str(tmp_path / "m.onnx")])
    assert code == 0, capsys.readouterr().err


def _error_lines(capsys) -> list[str]:
    """stderr lines of the last command other than progress bars (loading, writing shards)."""
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.strip() and "it/s]" not in line]


def test_whole_model_export_failures_are_one_line(tmp_path, capsys, monkeypatch):
    """A torch.onnx failure of a whole-model export becomes one line naming --layers."""

    def fail(*args, **kwargs):
        raise torch.onnx.OnnxExporterError("Failed to export the model with torch.export.\nmany lines")

    hf_cases.model("qwen3_moe").save_pretrained(tmp_path / "q")
    monkeypatch.setattr(hf_export, "export_model", fail)
    code = cli.main(["export", "--hf", str(tmp_path / "q"), "-o", str(tmp_path / "m.onnx")])
    lines = _error_lines(capsys)
    assert code == 2 and len(lines) == 1, lines
    assert "could not export the model (try --layers for the MoE layers alone)" in lines[0], lines
    assert lines[0].endswith("OnnxExporterError: Failed to export the model with torch.export."), lines


def test_dense_qwen3_moe_config_exports_as_the_dense_model(tmp_path, capsys):
    """``num_experts: 0`` is a dense model in transformers: nothing to patch, and it exports whole."""
    import onnxruntime as ort

    model = hf_cases.model("qwen3_moe", num_experts=0)
    assert hf.patch(model, quiet=True) == []
    ids, ref, out, code, text = _cli_export_checkpoint(model, tmp_path, capsys)
    assert code == 0 and "no MoE layer" in text.out and "0 MoeGatingTopKHash node(s)" in text.out, text.err
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    assert _rel(session.run(None, {"input_ids": ids.numpy()})[0], ref) <= 1e-4


def test_gpt_oss_experts_run_as_routed_rows_in_every_torch_formulation():
    """gpt-oss's experts (interleaved gate/up rows, biases, clamped g sigmoid(1.702 g) (u + 1)) are
    patched to the routed-rows formulation and equal HF's in ``ort`` and ``padded``; the formulations
    and targets without biases refuse them by name."""
    import copy

    from onnx import helper

    from ascend_moe_onnx.exporters import experts_graph
    from ascend_moe_onnx.models import experts as formulations
    from tests import hf_families

    model = hf_families.model("gpt_oss")
    with torch.no_grad():
        for name, p in model.named_parameters():  # biases large enough to matter
            if name.endswith(("gate_up_proj_bias", "down_proj_bias")):
                p.copy_(torch.randn(p.shape, generator=torch.Generator().manual_seed(p.numel())) * 0.5)
    reference = copy.deepcopy(model)
    assert hf_export.patch(model, quiet=True)
    experts = model.model.layers[0].mlp.experts
    assert experts.experts_formulation == formulations.DEFAULT  # patched: not left to HF
    x = torch.randn(1, 9, model.config.hidden_size, generator=torch.Generator().manual_seed(4))
    def first(out):
        return out[0] if isinstance(out, tuple) else out

    with torch.no_grad():
        ref = first(reference.model.layers[0].mlp(x))
        for formulation in ("ort", "padded"):
            with formulations.using(model, formulation):
                got = first(model.model.layers[0].mlp(x))
            assert _rel(got, ref) <= 1e-5, formulation
    node = helper.make_node(experts_graph.OP_ROUTED, [f"i{j}" for j in range(9)], ["y"],
                            domain=experts_graph.DOMAIN, formulation="onnx", biased=1, alpha=1.702, beta=1.0)
    for formulation, target in (("onnx", "cpu"), ("ort", "ge")):
        expand = experts_graph.expansion(experts_graph.OP_ROUTED, formulation, target, quantized=False)
        with pytest.raises(formulations.ExpertsError, match="without biases and with SiLU"):
            expand(experts_graph.Builder("t_", {}, None, {}), node)
