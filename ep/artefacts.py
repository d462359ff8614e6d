"""The exported graphs of one expert-parallel MoE layer and their manifest.

A layer of a routed preset (``models.presets``) split over N ranks gives:

- ``router.onnx`` (the source side, identical on every rank): router logits -> MoeGatingTopKHash
  -> ``routing_weights`` [T, k] and ``expert_idx`` [T, k] int32, plus ``shared_output`` [T, H]
  when the layer has shared experts (they run on the token's own rank);
- ``expert_rank{r}.onnx`` (the expert side of rank r): ``models.expert_parallel``'s
  ``ExpertParallelBlock`` holding experts ``[r*L, (r+1)*L)``, ``L = E / N``: MoeReRouting ->
  (dequantise) -> experts -> received order;
- ``ep.json``: preset, size, dtype, quant, ranks, sizes and each graph's sha256.

Rank r needs only ``router.onnx``, its own expert graph and the manifest, so hosts need not share a
file system. ``describe`` summarises what a rank loaded; the launcher compares the summaries of all
ranks at start-up (``check_consistent``).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import torch

MANIFEST = "ep.json"
ROUTER = "router.onnx"
QUANTS = ("", "int8")


def expert_file(rank: int) -> str:
    """File name of rank ``rank``'s expert-side graph."""
    return f"expert_rank{rank}.onnx"


class EPError(RuntimeError):
    """An expert-parallel layer that cannot run as asked (message says which rank and why)."""


@dataclass
class Layout:
    """How a layer is split: N ranks, E experts, L = E / N local experts each, top-k, hidden H."""

    ranks: int
    experts: int
    top_k: int
    hidden: int
    quant: str = ""

    @property
    def local_experts(self) -> int:
        """Experts per rank (rank r owns global experts ``[r*L, (r+1)*L)``)."""
        return self.experts // self.ranks


class SourceSide(torch.nn.Module):
    """The router (and shared experts) of a routed block: what every rank runs on its own tokens.

    Uses the block's own export-path router (``router_logits`` + ``route``: one MoeGatingTopKHash
    node) and shared expert, so it is exactly the block's routing.
    """

    def __init__(self, block):
        super().__init__()
        self.block = block
        self.input_names = tuple(block.input_names)
        self.output_names = ("routing_weights", "expert_idx") + (
            ("shared_output",) if block.shared_experts is not None else ())

    def forward(self, *inputs):
        """Export path -> (routing_weights [T, k], expert_idx [T, k] int32[, shared_output [T, H]])."""
        b = self.block
        named = dict(zip(self.input_names, inputs))
        x = named["hidden_states"]
        w, idx = b.route(b.router_logits(x), named)
        if b.shared_experts is None:
            return w, idx
        return w, idx, b.shared_experts(x.to(b.compute)).to(b.dtype)

    def example_inputs(self, tokens: int, seed: int = 0) -> tuple:
        """The block's example inputs."""
        return self.block.example_inputs(tokens, seed)

    def dynamic_shapes(self) -> tuple:
        """The block's dynamic shapes (token dimension)."""
        return self.block.dynamic_shapes()


def check_preset(block, ranks: int) -> None:
    """Raise EPError when ``block`` cannot be split over ``ranks`` expert-parallel ranks."""
    cfg = block.cfg
    name = getattr(block, "preset", type(block).__name__)
    if cfg.ranks or not hasattr(block, "gate"):
        raise EPError(f"preset '{name}' is an expert-side block; expert parallelism needs a routed "
                      "layer preset (e.g. mixtral, qwen3-moe, deepseek-v3)")
    if cfg.swiglu_limit or cfg.act_fp32:
        raise EPError(f"preset '{name}': its experts clamp SwiGLU / compute the activation in float32, "
                      "which the expert-side block (models.expert_parallel) does not do")
    if ranks < 1 or cfg.experts % ranks:
        raise EPError(f"preset '{name}' has {cfg.experts} experts: --ep-ranks/--nproc-per-node {ranks} "
                      "must divide them")
    if block.dtype != torch.float32:
        raise EPError(f"dtype {block.dtype_name}: the expert-parallel runtime supports float32 blocks")


def expert_side(block, rank: int, ranks: int, quant: str = ""):
    """Rank ``rank``'s ExpertParallelBlock: the slice ``[rank*L, (rank+1)*L)`` of ``block``'s experts."""
    from ascend_moe_onnx.models.expert_parallel import ExpertParallelBlock

    if quant not in QUANTS:
        raise EPError(f"quant must be one of {QUANTS}, got '{quant}'")
    L = block.cfg.experts // ranks
    cfg = block.cfg.replace(experts=L, ranks=ranks, quant=quant, idx_type=0, shared=0)
    side = ExpertParallelBlock(cfg, block.dtype).eval().requires_grad_(False)
    # Every stacked expert tensor is [E, ...]: rank r keeps its rows (whatever the tensors are called).
    state = {k: v[rank * L:(rank + 1) * L] for k, v in block.experts.state_dict().items()}
    side.experts.load_state_dict(state)
    return side


def sha256_file(path) -> str:
    """Hex sha256 of a file's bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def export_layer(block, ranks: int, out_dir, quant: str = "", tokens: int = 8,
                 only_rank: int | None = None, cache_key: tuple | None = None) -> dict:
    """Write the router graph, the expert graph of every rank (or only ``only_rank``) and the
    manifest into ``out_dir``; return the manifest. ``cache_key`` (naming the block's weights)
    lets one process reuse its earlier exports (``models.runtime.export_block``)."""
    from ascend_moe_onnx.models.runtime import export_block

    check_preset(block, ranks)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    key = (lambda *k: None) if cache_key is None else (lambda *k: ("ep", *cache_key, *k))
    export_block(SourceSide(block), tokens, path=out / ROUTER, cache_key=key("router"))
    files = {"router": ROUTER}
    for r in range(ranks) if only_rank is None else [only_rank]:
        # An example of >= 2 rows per rank keeps the received-token dimension dynamic.
        export_block(expert_side(block, r, ranks, quant), max(tokens, 2 * ranks), path=out / expert_file(r),
                     cache_key=key("expert", r, ranks, quant))
        files[f"expert_rank{r}"] = expert_file(r)
    cfg = block.cfg
    manifest = dict(preset=getattr(block, "preset", ""), size=getattr(block, "size", ""),
                    dtype=getattr(block, "dtype_name", "float32"), quant=quant,
                    layout=asdict(Layout(ranks, cfg.experts, cfg.top_k, cfg.hidden, quant)),
                    shared=cfg.shared, files=files,
                    sha256={k: sha256_file(out / f) for k, f in files.items()})
    (out / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def read_manifest(out_dir) -> dict:
    """The manifest of an exported layer directory (EPError when missing or unreadable)."""
    path = Path(out_dir) / MANIFEST
    if not path.is_file():
        raise EPError(f"{path}: no manifest (write the layer with `moe-onnx export PRESET --ep-ranks N`)")
    try:
        return json.loads(path.read_text())
    except ValueError as e:
        raise EPError(f"{path}: not a readable manifest ({e})") from None


def describe(router, expert, layout: Layout, router_sha: str) -> dict:
    """What one rank loaded, from its ORT sessions: the fields every rank must agree on."""
    ins = {i.name: i for i in expert.get_inputs()}
    counts = ins.get("expert_token_num_per_rank")
    tokens = ins.get("tokens")
    if counts is None or tokens is None:
        raise EPError("expert graph: inputs 'tokens' and 'expert_token_num_per_rank' expected, got "
                      f"{sorted(ins)}")
    rout = {o.name: o for o in router.get_outputs()}
    return dict(
        router_sha256=router_sha,
        router_inputs=[(i.name, i.type) for i in router.get_inputs()],
        router_outputs=[(o.name, o.type) for o in router.get_outputs()],
        top_k=rout["expert_idx"].shape[-1],
        counts_shape=list(counts.shape),
        token_type=tokens.type,
        hidden=tokens.shape[-1],
        scales="per_token_scales" in ins,
        outputs=[(o.name, o.type) for o in expert.get_outputs()],
        layout=asdict(layout),
    )


def check_consistent(descriptions: list[dict]) -> None:
    """Raise EPError naming the first field where a rank disagrees with rank 0 (all ranks' graphs
    must belong to one layer: same router, expert counts, dtypes, quantisation)."""
    first = descriptions[0]
    L = first["layout"]["experts"] // first["layout"]["ranks"]
    want_counts = [first["layout"]["ranks"], L]
    for r, d in enumerate(descriptions):
        if d["counts_shape"] != want_counts:
            raise EPError(f"rank {r}: its expert graph takes counts of shape {d['counts_shape']}, "
                          f"the layer needs [ranks, local experts] = {want_counts}")
        for key in first:
            if d[key] != first[key]:
                raise EPError(f"rank {r}: exported graphs differ from rank 0's in {key}: {d[key]} != "
                              f"{first[key]} (all ranks must load graphs of the same layer)")
