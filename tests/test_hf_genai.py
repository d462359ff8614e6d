"""``export --hf DIR --genai``: tiny random checkpoints exported as onnxruntime-genai folders generate
HF's greedy tokens (float32), through onnxruntime-genai and the project's own ORT loop, at batch 1
and batch 2 with prompts of different lengths; int4 experts agree with the dequantized torch model."""

from __future__ import annotations

import json
import shutil

import onnx
import pytest
import torch

from tests import hf_families  # skips the module without transformers

# isort: split

from ascend_moe_onnx.cli import main as cli  # noqa: E402
from ascend_moe_onnx.hf import export as hf_export  # noqa: E402
from ascend_moe_onnx.hf import genai, generate  # noqa: E402
from ascend_moe_onnx.onnx_schemas._common import walk_graphs  # noqa: E402

PROMPT, NEW = 16, 32
# families exported for generation by default; the others with --all-families
FAMILIES = ("qwen3_moe", "deepseek_v3", "gpt_oss", "llama4")
MORE_FAMILIES = ("mixtral", "deepseek_v2", "qwen3_5_moe-hybrid", "qwen3_next-hybrid", "deepseek_v4-kinds")


def _prompts(seed: int = 1) -> list[list[int]]:
    """A 16-token and a 9-token prompt without the pad id (0) or BOS / EOS (1, 2)."""
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, hf_families.TINY["vocab_size"], (n,), generator=g).tolist() for n in (PROMPT, 9)]


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """{family: (folder, HF reference model)}, each family exported once through the CLI."""
    cache = {}

    def get(family: str):
        if family not in cache:
            root = tmp_path_factory.mktemp(family)
            hf_families.model(family).save_pretrained(root / "hf")
            assert cli.main(["export", "--hf", str(root / "hf"), "--genai", "-o", str(root / "genai")]) == 0
            cache[family] = (root / "genai", hf_export.load(root / "hf"))
        return cache[family]

    return get


def _nodes(path, op_type: str) -> int:
    model = onnx.load(str(path), load_external_data=False)
    return sum(n.op_type == op_type for g in walk_graphs(model.graph) for n in g.node)


def _hash_routed(path) -> int:
    """MoeGatingTopKHash nodes whose token-id input is the graph's input_ids (reshaped)."""
    model = onnx.load(str(path), load_external_data=False)
    nodes = [n for g in walk_graphs(model.graph) for n in g.node]
    made = {o: n for n in nodes for o in n.output}
    ids = {genai.INPUT_IDS} | {o for n in nodes if n.op_type in ("Reshape", "Cast") and n.input[0] == genai.INPUT_IDS
                                for o in n.output}
    return sum(n.op_type == "MoeGatingTopKHash" and len(n.input) > 2 and
               (n.input[2] in ids or (n.input[2] in made and made[n.input[2]].input[0] in ids)) for n in nodes)


@pytest.mark.parametrize("family", [*FAMILIES, *(pytest.param(f, marks=pytest.mark.all_families)
                                                   for f in MORE_FAMILIES)])
def test_genai_folder_generates_hf_tokens(family, exported):
    og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai not installed (pip install '.[genai]')")
    folder, reference = exported(family)
    config = json.loads((folder / "genai_config.json").read_text())
    library = config["model"]["decoder"]["session_options"]["custom_ops_library"]
    assert (folder / library).is_file()
    patched = hf_export.load(folder.parent / "hf")
    moe_layers = len(hf_export.patch(patched, quiet=True))
    assert moe_layers >= 1
    assert _nodes(folder / genai.GRAPH_FILE, "MoeGatingTopKHash") == moe_layers
    assert _nodes(folder / genai.GRAPH_FILE, "MoeRoutedExperts") == moe_layers  # routed rows, never padded

    hash_layers = getattr(reference.config, "mlp_layer_types", None) or []
    if "hash_moe" in hash_layers:  # DeepSeek-V4: the hash layers' routing reads the token ids
        assert _hash_routed(folder / genai.GRAPH_FILE) == hash_layers.count("hash_moe")

    model = og.Model(str(folder))
    prompts = _prompts()
    expected = generate.generate_hf(reference, prompts, NEW)
    assert generate.generate_genai(folder, prompts[:1], NEW, model=model) == expected[:1]
    assert generate.generate_genai(folder, prompts, NEW, model=model) == expected  # batch 2, right-padded
    if "linear_attention" in config["model"]["decoder"].get("layer_types", ()) or family.startswith("deepseek_v4"):
        # hybrid or position-placed rows: the own loop (left padding) too
        assert _nodes(folder / genai.GRAPH_FILE, "LinearAttention") == config["model"]["decoder"].get(
            "layer_types", []).count("linear_attention")
        assert generate.generate_ort(folder, prompts, NEW) == expected


def test_mla_attends_over_the_packed_latent(exported):
    """DeepSeek-V3's MLA layers score and read the packed cache halves as they are (absorbed
    projections): no node joins a layer's key and value halves back into the latent."""
    folder, _ = exported("deepseek_v3")
    graph = onnx.load(str(folder / genai.GRAPH_FILE), load_external_data=False).graph
    halves = {genai.PRESENT_KEY % 0, genai.PRESENT_VALUE % 0}
    users = [n for g in walk_graphs(graph) for n in g.node if halves & set(n.input)]
    assert not [n.op_type for n in users if halves <= set(n.input)]
    assert "MatMul" in {n.op_type for n in users}  # the attention reads the latent from the cache itself


@pytest.mark.parametrize("family", ["deepseek_v3", "deepseek_v2", "glm4_moe_lite"])
def test_absorbed_mla_computes_the_expanded_attention(family):
    """The decoder with the absorbed MLA attention returns the logits and cache of the one that
    expands the latent through kv_b_proj as HF does (prefill and decode shapes, batch 2)."""
    model = hf_families.model(family).eval()
    hf_export.patch(model, quiet=True)
    genai._use_attention(model)
    decoder = genai.GenAIDecoder(model, genai.cache_layout(model))
    assert sorted(decoder.mla) == list(range(model.config.num_hidden_layers))
    for sequence in (3, 1):
        example = decoder.example_inputs(batch=2, sequence=sequence, past=5)
        with torch.no_grad():
            absorbed = decoder(*example)
            mla, decoder.mla = decoder.mla, {}
            expanded = decoder(*example)
            decoder.mla = mla
        for a, b in zip(absorbed, expanded, strict=True):
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)


def test_genai_timing_runs_past_the_end_of_sequence_token(exported, tmp_path):
    """The benchmark's genai decode timing keeps stepping when the model emits its EOS token
    (genai ends a finished sequence; a further step used to fail on the present's shape)."""
    og = pytest.importorskip("onnxruntime_genai", reason="onnxruntime-genai not installed (pip install '.[genai]')")
    from ascend_moe_onnx.benchmarks import genai_decode

    folder, _ = exported("gpt_oss")
    vocab, context = hf_families.TINY["vocab_size"], 16
    model = og.Model(str(folder))
    params = og.GeneratorParams(model)
    params.set_search_options(do_sample=False, max_length=context + 2, min_length=context + 2)
    gen = og.Generator(model, params)
    gen.append_tokens(genai_decode.genai_prompt(context, vocab))
    tokens = []
    for _ in range(2):
        gen.generate_next_token()
        tokens.append(int(gen.get_next_tokens()[0]))
    copy = tmp_path / "eos"
    shutil.copytree(folder, copy)
    config = json.loads((copy / "genai_config.json").read_text())
    config["model"]["eos_token_id"] = tokens[1]  # the second decoded token ends the sequence
    (copy / "genai_config.json").write_text(json.dumps(config))
    assert genai_decode.genai_decode_run(copy, context, 4, vocab)() > 0


@pytest.mark.parametrize("family", FAMILIES[:1])
def test_own_loop_generates_hf_tokens(family, exported):
    folder, reference = exported(family)
    prompts = _prompts(2)
    assert generate.generate_ort(folder, prompts, NEW) == generate.generate_hf(reference, prompts, NEW)


def test_int4_experts_generate_the_dequantized_models_tokens(tmp_path):
    root = tmp_path
    hf_families.model("qwen3_moe").save_pretrained(root / "hf")
    assert cli.main(["verify", "--hf", str(root / "hf"), "--generate", "16", "--weights-quant", "int4", "--quant-block-size", "16",
                     "--runtime", "ort", "-o", str(root / "genai")]) == 0
    assert _nodes(root / "genai" / genai.GRAPH_FILE, "MoeRoutedExperts") >= 1
    graph = onnx.load(str(root / "genai" / genai.GRAPH_FILE), load_external_data=False).graph
    tensors = [t for g in walk_graphs(graph) for t in g.initializer]
    tensors += [a.t for g in walk_graphs(graph) for n in g.node if n.op_type == "Constant" for a in n.attribute
                if a.type == onnx.AttributeProto.TENSOR]
    packed = (onnx.TensorProto.INT4, onnx.TensorProto.UINT4, onnx.TensorProto.UINT8, onnx.TensorProto.INT8)
    assert any(t.data_type in packed for t in tensors)  # the experts' weights stored quantized


def test_genai_config_reads_generation_config(tmp_path):
    m = hf_families.model("qwen3_moe")
    (tmp_path / "generation_config.json").write_text(json.dumps({"eos_token_id": [2, 5], "bos_token_id": 1,
                                                                 "temperature": 0.7, "do_sample": True}))
    (tmp_path / "tokenizer.json").write_text("{}")
    hf_export.patch(m, quiet=True)
    layout = genai.CacheLayout((genai.LayerCache((2, 8), (2, 8)),) * 2)
    config = genai.genai_config(m, layout, tmp_path, "lib.so")
    assert config["model"]["eos_token_id"] == [2, 5]
    assert config["model"]["pad_token_id"] == 0
    assert config["search"]["temperature"] == 0.7 and config["search"]["do_sample"] is True
    assert config["search"]["past_present_share_buffer"] is False
    assert config["model"]["decoder"]["session_options"]["custom_ops_library"] == "lib.so"
    assert config["model"]["decoder"]["head_size"] == 8 and config["model"]["type"] == "qwen3"


def test_packed_cache_layout_holds_what_the_layer_caches():
    mla = genai.LayerCache((1, 16), (1, 8))  # DeepSeek-V3: latent 16 + rotary key 8
    assert mla.packed and mla.stored() == (1, 12)
    shared = genai.LayerCache((1, 16), (1, 16), shared=True)
    assert shared.stored() == (1, 8)
    assert genai.LayerCache((2, 8), (2, 8)).stored() == (2, 8)
    with pytest.raises(genai.GenAIExportError, match="one shape for every layer"):
        genai.CacheLayout((genai.LayerCache((2, 8), (2, 8)), genai.LayerCache((2, 16), (2, 16)))).check()


def test_genai_export_refuses_bad_arguments(tmp_path, capsys):
    assert cli.main(["export", "PRESET", "--genai", "-o", str(tmp_path / "x")]) == 2
    assert "--genai go with --hf" in capsys.readouterr().err
    assert cli.main(["verify", "--generate", "4"]) == 2
    assert "--hf DIR go together" in capsys.readouterr().err


@pytest.mark.parametrize("family, why", [("lfm2_moe", "gated DeltaNet states only")])
def test_families_genai_cannot_serve_are_refused_in_one_line(family, why, tmp_path):
    with pytest.raises(genai.GenAIExportError, match=why) as e:
        genai.export_genai(hf_families.model(family), tmp_path)
    assert "\n" not in str(e.value)


def test_gated_delta_rule_matches_transformers_and_exports_as_linear_attention(tmp_path):
    """The traced recurrence (torch op, and ORT's LinearAttention it exports as) equals transformers'
    chunked gated delta rule at prompt and decode lengths; padding tokens leave the state unchanged."""
    import onnxruntime as ort
    from transformers.models.qwen3_5_moe import modeling_qwen3_5_moe as hf_qwen

    from ascend_moe_onnx import exporters

    class Rule(torch.nn.Module):
        def forward(self, q, k, v, g, beta, state):
            return genai.gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True,
                                          use_qk_l2norm_in_kernel=True)

    gen = torch.Generator().manual_seed(0)

    def inputs(batch, length):  # 2 key heads, 4 value heads, head dims 8
        return (torch.randn(batch, length, 2, 8, generator=gen), torch.randn(batch, length, 2, 8, generator=gen),
                torch.randn(batch, length, 4, 8, generator=gen), -torch.rand(batch, length, 4, generator=gen),
                torch.rand(batch, length, 4, generator=gen), torch.randn(batch, 4, 8, 8, generator=gen))

    batch, length = torch.export.Dim("batch"), torch.export.Dim("length")
    exporters.export(Rule(), inputs(2, 3), tmp_path / "rule.onnx", dynamic_shapes=({0: batch, 1: length},) * 5
                     + ({0: batch},), input_names=["q", "k", "v", "g", "beta", "state"], output_names=["out", "final"])
    assert _nodes(tmp_path / "rule.onnx", "LinearAttention") == 1
    sess = ort.InferenceSession(str(tmp_path / "rule.onnx"))
    for n in (1, 7):
        args = inputs(2, n)
        out, final = hf_qwen.torch_chunk_gated_delta_rule(*args[:3], g=args[3], beta=args[4], initial_state=args[5],
                                                           output_final_state=True, use_qk_l2norm_in_kernel=True)
        got = Rule()(*args)
        torch.testing.assert_close(got[0], out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(got[1], final, atol=1e-5, rtol=1e-5)
        ran = sess.run(None, dict(zip(["q", "k", "v", "g", "beta", "state"], (a.numpy() for a in args))))
        torch.testing.assert_close(torch.from_numpy(ran[0]), out, atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(torch.from_numpy(ran[1]), final, atol=1e-5, rtol=1e-5)
    q, k, v, g, beta, state = inputs(1, 4)
    tokens = torch.tensor([[1, 1, 0, 0]])  # two padding tokens after two tokens
    _, padded = genai.gated_delta_rule(q, k, v, g, beta, initial_state=state, output_final_state=True, tokens=tokens)
    _, two = genai.gated_delta_rule(q[:, :2], k[:, :2], v[:, :2], g[:, :2], beta[:, :2], initial_state=state,
                                    output_final_state=True)
    torch.testing.assert_close(padded, two)


def test_compressed_attention_computes_hf_logits(tmp_path):
    """DeepSeek-V4's layers over their per-position cache rows (sliding window, CSA with the indexer's
    top-k, HCA) give the logits of HF's cached forward at the prompt and at each decode step, with
    windows completing in the prompt and between steps; batch 2, the shorter prompt right-padded
    as genai pads it (padding is no token of any window)."""
    from transformers import DynamicCache

    hf_families.model("deepseek_v4-kinds").save_pretrained(tmp_path)
    reference, model = hf_export.load(tmp_path), hf_export.load(tmp_path)
    hf_export.patch(model, quiet=True)
    genai._use_attention(model)
    layout = genai.cache_layout(model)
    assert {layer.stored() for layer in layout.attention} == {(1, 52)}  # sliding 8, CSA kv + gate 2 * 16, indexer 2 * 32: 104 halved
    decoder = genai.GenAIDecoder(model, layout)
    prompts, steps = _prompts(), 10
    g = torch.Generator().manual_seed(3)
    follow = torch.randint(3, hf_families.TINY["vocab_size"], (len(prompts), steps), generator=g)
    expected = []
    with torch.no_grad():
        for i, p in enumerate(prompts):
            cache = DynamicCache(config=reference.config)
            rows = [reference(input_ids=torch.tensor([p]), past_key_values=cache, use_cache=True).logits[0, -1]]
            for t in follow[i]:
                rows.append(reference(input_ids=t.view(1, 1), past_key_values=cache, use_cache=True).logits[0, -1])
            expected.append(torch.stack(rows))
        longest = max(map(len, prompts))
        ids = torch.zeros(len(prompts), longest, dtype=torch.int64)
        mask = torch.zeros_like(ids)
        for i, p in enumerate(prompts):
            ids[i, :len(p)], mask[i, :len(p)] = torch.tensor(p), 1
        positions = (mask.cumsum(1) - 1).clamp(min=0)
        past = [torch.zeros(len(prompts), 1, 0, layout.head_size) for _ in range(2 * len(layout.layers))]
        out = decoder(ids, mask, positions, *past)
        got = [[out[0][i, len(p) - 1]] for i, p in enumerate(prompts)]
        for step in range(steps):
            positions = mask.sum(1, keepdim=True)
            mask = torch.cat([mask, torch.ones(len(prompts), 1, dtype=torch.int64)], 1)
            out = decoder(follow[:, step:step + 1], mask, positions, *out[1:])
            for i in range(len(prompts)):
                got[i].append(out[0][i, 0])
    for i in range(len(prompts)):
        torch.testing.assert_close(torch.stack(got[i]), expected[i], rtol=1e-5, atol=1e-5)
