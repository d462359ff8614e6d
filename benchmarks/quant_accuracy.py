"""Accuracy of quantized experts (docs/quantization.md): each weight scheme against the float32
block on the model suite's blocks (benchmarks.model.BLOCKS, seeded random weights).

    python -m ascend_moe_onnx.benchmarks.quant_accuracy [--blocks ...] [--tokens 64] [--size full]

Per block and scheme, on ``tokens`` random token rows: ``max rel err`` = max |y_q - y| / max |y|
of the block output (routed + shared experts); ``rms rel err`` = ||y_q - y|| / ||y||; and the
next layer's router input: h = x + y (the residual stream), routed by a router of the block's
shape (the block's own router weights stand in for the next layer's): ``top-k same`` = the share
of tokens whose top-k expert set is unchanged, ``top-k overlap`` = the mean share of the k experts
kept. The quantized block computes with its dequantized weights (what the exported graph's kernel
computes, to float32 rounding: tests/ops/moe_routed_experts/test_quantized_experts.py). Random Gaussian weights have no
outlier channels; real checkpoints differ (per-group scales matter more there).
"""

from __future__ import annotations

import argparse

import torch

from . import model as model_suite

SCHEMES = (("int8", 0), ("int4", 0), ("int4", 128), ("int4", 64), ("int4", 32))


def _topk(block, h: torch.Tensor) -> torch.Tensor:
    logits = torch.nn.functional.linear(h.float(), block.gate.weight.float())
    return logits.topk(block.cfg.top_k, dim=-1).indices


def measure(name: str, size: str, tokens: int, schemes=SCHEMES) -> list[dict]:
    """One row per scheme: errors of the block output and agreement of the next router's top-k."""
    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
    from ascend_moe_onnx.models import quantize

    block = model_suite.build_block(name, size)
    x = block.example_inputs(tokens, seed=7)
    with torch.no_grad():
        y = block.forward_native(*x)[0].float()
        ref_top = _topk(block, x[0] + y)
    float_state = {k: v.clone() for k, v in block.state_dict().items()}
    rows = []
    for scheme, group in schemes:
        block.load_state_dict(float_state)
        wq = WeightsQuant.from_scheme(scheme, group)
        try:
            quantize.quantize_block(block, wq)
        except ValueError:  # the block size does not divide the block's widths
            continue
        with torch.no_grad():
            yq = block.forward_native(*x)[0].float()
            top = _topk(block, x[0] + yq)
        same = (top.sort(-1).values == ref_top.sort(-1).values).all(-1).float().mean().item()
        overlap = torch.tensor([len(set(a.tolist()) & set(b.tolist())) for a, b in zip(top, ref_top)],
                               dtype=torch.float32).mean().item() / block.cfg.top_k
        rows.append(dict(block=name, scheme=wq.name, max_rel=((yq - y).abs().max() / y.abs().max()).item(),
                         rms_rel=((yq - y).norm() / y.norm()).item(), topk_same=same, topk_overlap=overlap))
    return rows


def format_rows(rows: list[dict], tokens: int) -> str:
    """A Markdown table."""
    lines = [f"| block | scheme | max rel err | rms rel err | next router top-k same ({tokens} tokens) | "
             "top-k overlap |", "|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['block']} | {r['scheme']} | {r['max_rel']:.2e} | {r['rms_rel']:.2e} | "
                     f"{r['topk_same']:.3f} | {r['topk_overlap']:.4f} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--blocks", default=",".join(model_suite.BLOCKS))
    p.add_argument("--tokens", type=int, default=64)
    p.add_argument("--size", default="full", choices=("tiny", "full"))
    args = p.parse_args(argv)
    for i, name in enumerate(args.blocks.split(",")):
        table = format_rows(measure(name, args.size, args.tokens), args.tokens)
        print(table if i == 0 else table.split("\n", 2)[2], flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
