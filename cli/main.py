"""``moe-onnx``: export, verify and inspect MoE blocks that use the ascend.moe operators.

    moe-onnx export PRESET [--size tiny|full] [--weights PATH] [--dtype D] [--tokens N] -o model.onnx
    moe-onnx export --hf DIR [--layers N-M | --whole-model] [--dtype D] -o model.onnx
    moe-onnx export --hf DIR --genai [--weights-quant int8|int4] -o FOLDER   (onnxruntime-genai model folder)
    moe-onnx export PRESET | --hf DIR --weights-quant int8|int4 [--quant-block-size N] -o model.onnx
    moe-onnx export PRESET --ep-ranks N [--quant int8] -o DIR   (expert parallel: docs/expert-parallel.md)
    moe-onnx verify PRESET... | --all [--size ...] [--dtype D] [--weights PATH] [--provider cpu|cann]
    moe-onnx verify --hf DIR --generate N [-o FOLDER] [--runtime genai|ort]   (greedy tokens vs transformers)
    moe-onnx info model.onnx
    moe-onnx bench [--quick | --smoke] [--suites gating,rerouting,model,ascend_layer]   (docs/benchmarks.md)
    moe-onnx cann plugin build|install [--ascend-home DIR] [--opp-path DIR | --custom-opp-path DIR]

Subcommands live in ``SUBCOMMANDS`` (name -> (help, add_arguments, run)); a new one (e.g. ``bench``)
is one more entry. Exit codes: 0 success, 1 verification failure, 2 usage or input error (one line
on stderr, no traceback).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
import traceback
from pathlib import Path

# torch_npu, if installed, breaks `import torch` without CANN
os.environ.setdefault("TORCH_DEVICE_BACKEND_AUTOLOAD", "0")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
# Modules of the optional extras (torch, models); the core install has none of them.
OPTIONAL_MODULES = {"torch", "onnxscript", "safetensors", "tqdm"}


class CLIError(Exception):
    """A user-facing error: printed as one line, exit code 2."""


def _progress(total: int, desc: str):
    from tqdm import tqdm

    # disable=None: a bar on a terminal, nothing in logs and pipes.
    return tqdm(total=total, desc=desc, unit="step", file=sys.stderr, disable=None, leave=False)


# ---- shared options ----------------------------------------------------------------------------

def _add_block_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--size", default="tiny", choices=("tiny", "full"),
                   help="tiny (tests, seconds) or full (published sizes)")
    p.add_argument("--dtype", choices=("float32", "bfloat16", "float16"),
                   help="activation/weight dtype (default: the preset's, float32 for most)")
    p.add_argument("--weights", metavar="PATH",
                   help="safetensors file or directory with a Hugging Face-style MoE layer")
    p.add_argument("--layer", metavar="N|PREFIX",
                   help="which MoE layer of --weights (number or key prefix) when it holds several")
    p.add_argument("--intermediate", type=int, metavar="N",
                   help="expert FFN width (default: published; full presets shrink it to fit 1 GiB)")
    p.add_argument("--tokens", type=int, default=8, metavar="N",
                   help="token count of the export example (>= 2; the token dimension stays dynamic)")
    p.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    p.add_argument("--weights-quant", choices=("int8", "int4", "bfloat16"),
                   help="store the expert weights quantized (symmetric, round half to even; int8 per channel, "
                        "int4 per group of 32): W8A16 / W4A16 in the library's kernel; or bfloat16 (round to "
                        "nearest even, no scales): bfloat16 products (docs/quantization.md)")
    p.add_argument("--quant-block-size", type=int, metavar="N",
                   help="with --weights-quant: one scale per N inputs of a row (0 = per channel; int4 "
                        "default 32, even; must divide the hidden size and the expert width)")
    p.add_argument("--act-quant", choices=("int8",),
                   help="with --weights-quant: int8 activations too, quantized per token inside the op "
                        "(W8A8 / W4A8, Ascend's dynamic quantization; integer dot products; docs/quantization.md)")
    p.add_argument("--experts", default=None, metavar="ort|onnx|padded",
                   help="expert formulation in the graph: ort (com.microsoft.MoE, ONNX Runtime >= 1.23; "
                        "default), onnx (standard ops, any runtime), padded (E x C buckets); docs/models.md")


def _weights_quant(args):
    """The --weights-quant scheme (exporters.weights_quant.WeightsQuant), or None."""
    if getattr(args, "weights_quant", None) is None:
        if getattr(args, "quant_block_size", None) is not None:
            raise CLIError("--quant-block-size goes with --weights-quant")
        if getattr(args, "act_quant", None) is not None:
            raise CLIError("--act-quant goes with --weights-quant")
        return None
    if getattr(args, "act_quant", None) is not None and getattr(args, "target", "cpu") != "cpu":
        raise CLIError(f"--act-quant runs in the library's MoeRoutedExperts (--target cpu), not --target {args.target}")
    if args.experts not in (None, "ort"):
        raise CLIError(f"--weights-quant runs in the ort expert formulation, not --experts {args.experts}")
    if args.weights_quant == "bfloat16" and getattr(args, "target", "cpu") != "cpu":
        raise CLIError(f"--weights-quant bfloat16 runs in the library's MoeRoutedExperts (--target cpu), "
                       f"not --target {args.target}")
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant

    try:
        return WeightsQuant.from_scheme(args.weights_quant, args.quant_block_size, getattr(args, "act_quant", None))
    except ValueError as e:
        raise CLIError(f"--weights-quant: {e}") from None


def _check_block_args(args) -> None:
    from ascend_moe_onnx.models import presets

    if args.tokens < 2:
        raise CLIError(f"--tokens must be >= 2 (a 1-token example fixes the token dimension), got {args.tokens}")
    if args.intermediate is not None and args.intermediate < 1:
        raise CLIError(f"--intermediate must be >= 1, got {args.intermediate}")
    if args.weights is not None and not Path(args.weights).exists():
        raise CLIError(f"weights: no such file or directory: {args.weights}")
    if args.experts is not None:
        from ascend_moe_onnx.models import experts

        try:
            experts.check(args.experts)
        except experts.ExpertsError as e:
            raise CLIError(f"--experts: {e}") from None
    for name in getattr(args, "presets", None) or [getattr(args, "preset", None)]:
        if name is not None:
            presets.preset(name)


# ---- export ------------------------------------------------------------------------------------

def _export_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("preset", nargs="?", help="preset name (moe-onnx verify --list shows them); omit with --hf")
    _add_block_options(p)
    hf = p.add_argument_group("Hugging Face checkpoint (docs/huggingface.md)")
    hf.add_argument("--hf", metavar="DIR", help="a local transformers checkpoint directory (config.json + weights)")
    which = hf.add_mutually_exclusive_group()
    which.add_argument("--layers", metavar="N-M", help="export the MoE blocks of layers N..M (default: whole model)")
    which.add_argument("--whole-model", action="store_true", help="export the causal LM's prefill graph (default)")
    which.add_argument("--genai", action="store_true",
                       help="export an onnxruntime-genai model folder (decoder with a key/value cache, "
                            "genai_config.json, the library, the tokenizer); -o names the folder")
    p.add_argument("-o", "--output", required=True, metavar="model.onnx", help="where to write the model")
    p.add_argument("--target", default="cpu", choices=("cpu", "cann", "ge"),
                   help="runtime the graph is for: cpu (ONNX Runtime's CPU EP; default), cann (the CANN EP "
                        "on Ascend NPUs with enable_cann_graph=0: opset 18, MoeRoutedExperts at every size) or "
                        "ge (CANN's graph engine: atc --framework=5, or the CANN EP with enable_cann_graph=1, "
                        "with the parser plugin installed; docs/ascend.md)")
    p.add_argument("--ep-ranks", type=int, metavar="N",
                   help="expert parallel: write a router graph, one expert graph per rank and ep.json "
                        "into the directory -o (docs/expert-parallel.md)")
    p.add_argument("--quant", choices=("int8",), help="with --ep-ranks: the expert graphs take int8 "
                   "tokens with per-token scales")


def _cmd_export_ep(args) -> int:
    from ascend_moe_onnx.ep import artefacts
    from ascend_moe_onnx.models import presets

    if args.ep_ranks < 1:
        raise CLIError(f"--ep-ranks must be >= 1, got {args.ep_ranks}")
    block = presets.build(args.preset, args.size, args.dtype, weights=args.weights, layer=args.layer,
                          intermediate=args.intermediate, seed=args.seed)
    try:
        manifest = artefacts.export_layer(block, args.ep_ranks, args.output, args.quant or "", args.tokens)
    except artefacts.EPError as e:
        raise CLIError(str(e)) from None
    lay = manifest["layout"]
    print(f"wrote {args.output}: router + {args.ep_ranks} expert graphs ({lay['experts'] // args.ep_ranks} "
          f"local experts each) + {artefacts.MANIFEST}: preset {args.preset}, size {args.size}, "
          f"quant {args.quant or 'none'}")
    return EXIT_OK


def _cmd_export_hf(args) -> int:
    """``export --hf DIR``: patch the HF model's MoE blocks, export the prefill graph or MoE layers."""
    import torch

    try:
        from ascend_moe_onnx.hf import export as hf_export
        from ascend_moe_onnx.models.hf_routing import HFConfigError
    except ImportError as e:
        raise CLIError(f"--hf needs transformers (pip install 'ascend-moe-onnx[hf]'): {e}") from None
    if args.preset or args.weights:
        raise CLIError("--hf takes the model from DIR: give no PRESET and no --weights")
    if args.tokens < 2:
        raise CLIError(f"--tokens must be >= 2 (a 1-token example fixes the token dimension), got {args.tokens}")
    if args.genai:
        return _cmd_export_genai(args)
    out = Path(args.output)
    if out.parent and not out.parent.exists():
        raise CLIError(f"output directory does not exist: {out.parent}")
    try:
        layers = hf_export.parse_layers(args.layers) if args.layers else None
    except ValueError as e:
        raise CLIError(str(e)) from None
    dtype = getattr(torch, args.dtype or "float32")
    wq = _weights_quant(args)
    with _progress(3, "export --hf") as bar:
        bar.set_postfix_str("loading the checkpoint")
        try:
            model = hf_export.load(args.hf, dtype)
        except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as e:
            raise CLIError(f"--hf {args.hf}: {e}".splitlines()[0]) from None
        bar.update(1)
        bar.set_postfix_str("patching and torch.onnx.export")
        try:
            if getattr(model, "_ascend_w8a8", None):  # an Ascend w8a8 checkpoint: its integers as stored
                from ascend_moe_onnx.hf import w8a8

                wq = w8a8.quantized_export(model, wq)
            elif wq is not None:
                from ascend_moe_onnx.hf.quantize import quantize_hf_model

                hf_export.patch(model)
                quantize_hf_model(model, wq)
            proto, wrapper = hf_export.export_model(model, out, layers=layers, tokens=args.tokens, weights_quant=wq)
        except (HFConfigError, ValueError) as e:
            raise CLIError(str(e)) from None
        except Exception as e:  # torch.onnx cannot convert some part of the model: one line, no traceback
            hint = "" if layers is not None else " (try --layers for the MoE layers alone)"
            raise CLIError(f"--hf {args.hf}: torch.onnx could not export the model{hint}: "
                           f"{type(e).__name__}: {hf_export.first_line(e)}") from None
        bar.update(2)
    nodes = sum(n.op_type == "MoeGatingTopKHash" for n in proto.graph.node)
    if not hf_export.moe_blocks(model):
        print(f"note: {model.config.model_type} config with no MoE layer: exported as the dense model it is")
    what = "prefill graph" if layers is None else f"MoE layers {', '.join(map(str, wrapper.layer_ids))}"
    for line in hf_export.layer_summary(model):
        print(line)
    print(f"wrote {out} ({out.stat().st_size / 2**20:.1f} MiB): {model.config.model_type} {what}, "
          f"{nodes} MoeGatingTopKHash node(s), inputs {', '.join(wrapper.input_names)}, "
          f"outputs {', '.join(wrapper.output_names)}")
    return EXIT_OK


def _load_hf(args, dtype):
    from ascend_moe_onnx.hf import export as hf_export

    try:
        return hf_export.load(args.hf, dtype)
    except (OSError, ValueError, KeyError, TypeError, AttributeError, ImportError) as e:
        raise CLIError(f"--hf {args.hf}: {e}".splitlines()[0]) from None


def _genai_folder(args, model, out: Path, wq=None) -> dict:
    """Export ``model`` as a genai folder at ``out``; user errors as CLIError."""
    from ascend_moe_onnx.hf import export as hf_export
    from ascend_moe_onnx.hf import genai
    from ascend_moe_onnx.models.hf_routing import HFConfigError

    try:
        if getattr(model, "_ascend_w8a8", None):
            from ascend_moe_onnx.hf import w8a8

            wq = w8a8.quantized_export(model, wq)
        elif wq is not None:
            from ascend_moe_onnx.hf.quantize import quantize_hf_model

            hf_export.patch(model)
            quantize_hf_model(model, wq)
        return genai.export_genai(model, out, checkpoint=args.hf, weights_quant=wq)
    except (HFConfigError, ValueError) as e:
        raise CLIError(f"--hf {args.hf}: {e}") from None
    except Exception as e:  # torch.onnx cannot convert some part of the model: one line, no traceback
        raise CLIError(f"--hf {args.hf}: torch.onnx could not export the decoder: "
                       f"{type(e).__name__}: {hf_export.first_line(e)}") from None


def _cmd_export_genai(args) -> int:
    """``export --hf DIR --genai -o FOLDER``: the onnxruntime-genai model folder."""
    import torch

    from ascend_moe_onnx.hf import export as hf_export

    out = Path(args.output)
    if out.exists() and not out.is_dir():
        raise CLIError(f"--genai writes a folder: -o {out} is a file")
    if args.dtype not in (None, "float32"):
        raise CLIError(f"--genai exports float32 (ONNX Runtime's CPU provider has no bfloat16 attention), "
                       f"got --dtype {args.dtype}")
    wq = _weights_quant(args)
    with _progress(2, "export --hf --genai") as bar:
        bar.set_postfix_str("loading the checkpoint")
        model = _load_hf(args, torch.float32)
        bar.update(1)
        bar.set_postfix_str("patching and torch.onnx.export")
        config = _genai_folder(args, model, out, wq)
        bar.update(1)
    for line in hf_export.layer_summary(model):
        print(line)
    dec = config["model"]["decoder"]
    size = sum(f.stat().st_size for f in out.iterdir() if f.is_file())
    linear = dec.get("layer_types", []).count("linear_attention")
    states = f" ({linear} linear-attention layers: convolution and recurrent state)" if linear else ""
    print(f"wrote {out}/ ({size / 2**20:.1f} MiB): {model.config.model_type} decoder for onnxruntime-genai, "
          f"{dec['num_hidden_layers']} layers, cache [batch, {dec['num_key_value_heads']}, sequence, "
          f"{dec['head_size']}]{states}, files {', '.join(sorted(f.name for f in out.iterdir()))}")
    return EXIT_OK


def _cmd_export(args) -> int:
    from ascend_moe_onnx.exporters.experts_graph import ExpertsError
    from ascend_moe_onnx.exporters.targets import TargetError
    from ascend_moe_onnx.models import presets

    from . import verify

    if args.target != "cpu" and (args.hf or args.ep_ranks is not None):
        raise CLIError(f"--target {args.target} applies to PRESET exports; --hf and --ep-ranks export for the CPU EP")
    if args.hf:
        return _cmd_export_hf(args)
    if args.layers or args.whole_model or args.genai:
        raise CLIError("--layers, --whole-model and --genai go with --hf DIR")
    if not args.preset:
        raise CLIError("export: name a PRESET, or pass --hf DIR")
    _check_block_args(args)
    if args.ep_ranks is not None:
        return _cmd_export_ep(args)
    if args.quant:
        raise CLIError("--quant needs --ep-ranks")
    with _progress(3, f"export {args.preset}") as bar:
        bar.set_postfix_str("building the block")
        try:
            block = presets.build(args.preset, args.size, args.dtype, weights=args.weights, layer=args.layer,
                                  intermediate=args.intermediate, seed=args.seed, weights_quant=_weights_quant(args))
        except ValueError as e:
            raise CLIError(str(e)) from None
        # Past protobuf's 2 GiB limit the weights go to a file beside the model (external data).
        external = presets.weight_bytes(block.cfg, block.dtype_name) >= presets.PROTOBUF_LIMIT * 0.9
        bar.update(1)
        bar.set_postfix_str("torch.onnx.export")
        out = Path(args.output)
        if out.parent and not out.parent.exists():
            raise CLIError(f"output directory does not exist: {out.parent}")
        try:
            verify.export_block(block, args.tokens, path=out, external_data=external, experts=args.experts,
                                target=args.target)
        except (TargetError, ExpertsError) as e:  # e.g. quantized experts for the CANN target
            raise CLIError(str(e)) from None
        bar.update(2)
    if block.note:
        print(f"note: {block.note}")
    written = out.stat().st_size + (out.with_name(out.name + ".data").stat().st_size if external else 0)
    where = f" + {out.name}.data" if external else ""
    print(f"wrote {out}{where} ({written / 2**20:.1f} MiB): preset {args.preset}, size {args.size}, "
          f"dtype {block.dtype_name}, experts {args.experts or block.experts_formulation}, target {args.target}"
          f"{_quant_note(block)}, inputs {', '.join(block.input_names)}, "
          f"outputs {', '.join(block.output_names)}")
    return EXIT_OK


def _quant_note(block) -> str:
    wq = getattr(block, "weights_quant", None)
    return "" if wq is None else f" ({wq.name} weights)"


# ---- verify ------------------------------------------------------------------------------------

def _verify_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("presets", nargs="*", metavar="PRESET", help="presets to verify")
    p.add_argument("--all", action="store_true", help="verify every preset")
    p.add_argument("--list", action="store_true", help="list the presets and exit")
    _add_block_options(p)
    p.add_argument("--token-counts", metavar="N,N,...",
                   help="token counts to run (default: 1,5,33,128 tiny; 1,16,128 full)")
    p.add_argument("--provider", default="cpu", choices=("cpu", "cann"),
                   help="execution provider of the library run: cpu, or cann (onnxruntime-cann on an "
                        "Ascend host; docs/ascend.md)")
    gen = p.add_argument_group("generation (Hugging Face checkpoint)")
    gen.add_argument("--hf", metavar="DIR", help="a local transformers checkpoint directory")
    gen.add_argument("--generate", type=int, metavar="N",
                     help="export DIR for onnxruntime-genai and compare N greedy tokens with transformers' generate")
    gen.add_argument("--prompt-tokens", type=int, default=16, metavar="N", help="length of the seeded random prompt")
    gen.add_argument("--runtime", choices=("genai", "ort"),
                     help="genai (onnxruntime-genai; default when installed) or ort (the project's own loop)")
    gen.add_argument("-o", "--output", metavar="FOLDER", help="keep the exported folder here (default: temporary)")


def _token_counts(text: str | None):
    if not text:
        return None
    try:
        counts = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise CLIError(f"--token-counts must be comma-separated integers, got '{text}'") from None
    if not counts or any(c < 0 for c in counts):
        raise CLIError(f"--token-counts must be non-negative integers, got '{text}'")
    return counts


def _cmd_verify_generate(args) -> int:
    """``verify --hf DIR --generate N``: greedy tokens of the exported folder against transformers."""
    import tempfile

    import torch

    from ascend_moe_onnx.hf import generate

    if args.presets or args.all:
        raise CLIError("--hf takes the model from DIR: give no PRESET and no --all")
    if not args.generate or args.generate < 1:
        raise CLIError(f"--generate must be >= 1 (tokens to generate), got {args.generate}")
    if args.prompt_tokens < 1:
        raise CLIError(f"--prompt-tokens must be >= 1, got {args.prompt_tokens}")
    if args.runtime == "genai" and not generate.genai_installed():
        raise CLIError("--runtime genai needs onnxruntime-genai (pip install 'ascend-moe-onnx[genai]')")
    wq = _weights_quant(args)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.output) if args.output else Path(tmp) / "genai"
        model = _load_hf(args, torch.float32)
        reference = _load_hf(args, torch.float32)
        _genai_folder(args, model, out, wq)
        if wq is not None:  # the reference computes with the same quantized weights, dequantized
            from ascend_moe_onnx.hf import export as hf_export
            from ascend_moe_onnx.hf.quantize import quantize_hf_model

            hf_export.patch(reference, quiet=True)
            quantize_hf_model(reference, wq)
        vocab = model.config.get_text_config().vocab_size
        special = {model.config.get_text_config().pad_token_id, 0}
        g = torch.Generator().manual_seed(args.seed)
        prompt = [t for t in torch.randint(0, vocab, (4 * args.prompt_tokens,), generator=g).tolist()
                  if t not in special][:args.prompt_tokens]
        c = generate.compare(out, reference, [prompt], args.generate, runtime=args.runtime)
    same = sum(a == b for a, b in zip(c.tokens[0], c.hf_tokens[0]))
    print(f"{args.generate} greedy tokens from a {len(prompt)}-token prompt: {same}/{args.generate} equal "
          f"({c.runtime}: {c.ms_per_token:.2f} ms/token, transformers: {c.hf_ms_per_token:.2f} ms/token)")
    if not c.equal:
        print(f"first difference at token {c.first_difference[0]}: {c.runtime} {c.tokens[0]}, "
              f"transformers {c.hf_tokens[0]}")
    return EXIT_OK if c.equal else EXIT_FAILED


def _cmd_verify(args) -> int:
    from ascend_moe_onnx.models import presets

    from . import verify

    if args.hf or args.generate is not None:
        if not args.hf or args.generate is None:
            raise CLIError("--generate N and --hf DIR go together")
        return _cmd_verify_generate(args)

    if args.list:
        for name, entry in presets.PRESETS.items():
            print(f"{name:24s} {entry['doc']}")
        return EXIT_OK
    names = list(presets.PRESETS) if args.all else args.presets
    if not names:
        raise CLIError("verify: name at least one PRESET, or pass --all")
    if args.weights and len(names) > 1:
        raise CLIError("verify: --weights needs exactly one PRESET")
    _check_block_args(args)
    if args.provider == "cann":
        from ascend_moe_onnx.ort_custom_ops.cann import cann_unavailable_reason

        reason = cann_unavailable_reason()
        if reason:
            raise CLIError(f"--provider cann: {reason}")
    counts = _token_counts(args.token_counts)
    started = time.perf_counter()
    checks, notes = [], []
    total = len(names) * verify.steps(args.size, counts, args.tokens)
    with _progress(total, "verify") as bar:
        for name in names:
            try:
                checks += verify.verify_preset(
                    name, args.size, args.dtype, weights=args.weights, layer=args.layer,
                    intermediate=args.intermediate, export_tokens=args.tokens, token_counts=counts,
                    seed=args.seed, progress=bar, provider=args.provider, experts=args.experts,
                    weights_quant=_weights_quant(args))
            except ValueError as e:
                raise CLIError(f"{name}: {e}") from None
            if checks[-1].info:
                notes.append(f"note: {name}: {checks[-1].info}")
    print(verify.format_table(checks))
    for line in verify.describe_near_ties(checks) + notes:
        print(line)
    failed = [c for c in checks if not c.passed and not c.note.startswith("skipped")]
    print(f"{len(checks) - len(failed)}/{len(checks)} checks passed for {len(names)} block(s) in "
          f"{time.perf_counter() - started:.1f} s")
    return EXIT_FAILED if failed else EXIT_OK


# ---- info --------------------------------------------------------------------------------------

def _info_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("model", help="an ONNX model file")


def _cmd_info(args) -> int:
    from .info import describe, load_model

    try:
        model = load_model(args.model)
    except ValueError as e:
        raise CLIError(str(e)) from None
    print(describe(model, args.model))
    return EXIT_OK


# ---- bench -------------------------------------------------------------------------------------

def _benchmarks_runner():
    """benchmarks.runner from the source tree next to models/ (not part of the wheel), or None."""
    try:
        from ascend_moe_onnx.benchmarks import runner
    except ImportError:
        root = Path(__file__).resolve().parent.parent
        if not (root / "benchmarks" / "runner.py").is_file():
            return None
        sys.path.insert(0, str(root))
        from ascend_moe_onnx.benchmarks import runner
    return runner


def _bench_arguments(p: argparse.ArgumentParser) -> None:
    runner = _benchmarks_runner()
    if runner is not None:
        runner.add_arguments(p)


def _cmd_bench(args) -> int:
    runner = _benchmarks_runner()
    if runner is None:
        raise CLIError("bench needs the benchmarks/ package of a source checkout")
    return runner.run(args)


# ---- cann plugin ------------------------------------------------------------------------------

def _cann_arguments(p: argparse.ArgumentParser) -> None:
    sub = p.add_subparsers(dest="cann_command", required=True, metavar="WHAT")
    plugin = sub.add_parser("plugin", help="the graph engine's ONNX parser plugin (docs/ascend.md)")
    action = plugin.add_subparsers(dest="plugin_command", required=True, metavar="ACTION")
    build = action.add_parser("build", help="build it against the installed CANN")
    install = action.add_parser("install", help="build it (unless --library) and install it as a vendor package")
    for q in (build, install):
        q.add_argument("--ascend-home", metavar="DIR", help="CANN toolkit (default: $ASCEND_TOOLKIT_HOME)")
        q.add_argument("--build-dir", metavar="DIR", default="build-ge-plugin", help="CMake build folder")
        q.add_argument("--jobs", type=int, default=2, help="parallel compile jobs")
    install.add_argument("--library", metavar="SO", help="an already built plugin to install")
    install.add_argument("--opp-path", metavar="DIR", help="CANN's OPP folder (default: $ASCEND_OPP_PATH)")
    install.add_argument("--vendor", default="ascend_moe", help="vendor folder name under <opp>/vendors")
    install.add_argument("--custom-opp-path", metavar="DIR",
                         help="install into DIR/framework/onnx instead (list DIR in $ASCEND_CUSTOM_OPP_PATH)")


def _cmd_cann(args) -> int:
    from ascend_moe_onnx import ge_plugin

    try:
        library = (Path(args.library) if getattr(args, "library", None) else
                   ge_plugin.build(args.build_dir, args.ascend_home, args.jobs))
        if args.plugin_command == "build":
            print(f"built {library}")
            return EXIT_OK
        installed = ge_plugin.install(library, args.opp_path, args.vendor, args.custom_opp_path)
    except ge_plugin.PluginError as e:
        raise CLIError(str(e)) from None
    print(f"installed {installed}")
    if args.custom_opp_path:
        print(f"export ASCEND_CUSTOM_OPP_PATH={Path(args.custom_opp_path).resolve()}:$ASCEND_CUSTOM_OPP_PATH")
    return EXIT_OK


# name -> (help, add_arguments, run)
SUBCOMMANDS = {
    "export": ("export a preset's MoE block to ONNX", _export_arguments, _cmd_export),
    "verify": ("export, run in ONNX Runtime next to torch, compare", _verify_arguments, _cmd_verify),
    "info": ("list a model's ascend.moe nodes and where they would run", _info_arguments, _cmd_info),
    "bench": ("benchmark the ops against their baselines (docs/benchmarks.md)", _bench_arguments, _cmd_bench),
    "cann": ("build / install the graph engine's ONNX parser plugin (docs/ascend.md)", _cann_arguments, _cmd_cann),
}


def build_parser() -> argparse.ArgumentParser:
    """The argument parser with one subparser per SUBCOMMANDS entry."""
    parser = argparse.ArgumentParser(prog="moe-onnx", description=__doc__.split("\n")[0])
    parser.add_argument("-v", "--verbose", action="store_true",
                        help="log each step, keep torch's warnings, print tracebacks of errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, (text, add_arguments, run) in SUBCOMMANDS.items():
        p = sub.add_parser(name, help=text, description=text)
        add_arguments(p)
        p.set_defaults(run=run)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``moe-onnx`` console script; returns the exit code."""
    args = build_parser().parse_args(argv)
    if args.verbose:
        logging.basicConfig(level=logging.INFO, format="%(name)s: %(message)s")
        logging.getLogger("ascend_moe_onnx").setLevel(logging.INFO)
    try:
        from ascend_moe_onnx.models.presets import PresetError
        from ascend_moe_onnx.models.weights import WeightsError

        user_errors: tuple = (CLIError, PresetError, WeightsError)
    except ImportError:  # a core install (no torch extras): `info` still works
        user_errors = (CLIError,)

    try:
        return args.run(args)
    except user_errors as e:
        message = str(e)
    except ModuleNotFoundError as e:
        if e.name not in OPTIONAL_MODULES:
            raise
        message = f"'{args.command}' needs {e.name}: pip install 'ascend-moe-onnx[models]'"
    except FileNotFoundError as e:
        message = str(e) if not e.filename else f"no such file: {e.filename}"
    except KeyboardInterrupt:
        message = "interrupted"
    if args.verbose:
        traceback.print_exc()
    print(f"moe-onnx: error: {message}", file=sys.stderr)
    return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
