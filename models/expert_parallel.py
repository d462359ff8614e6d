"""Expert-parallel expert-side block: what a rank does with the tokens it received.

After the dispatch all-to-all a rank holds A tokens grouped by source rank, then by local expert,
with the ``[ranks, local_experts]`` counts. The block regroups them by expert with MoeReRouting,
dequantises them (int8 tokens x float32 per-token scales; the plain variant takes the tokens as
they are), runs every expert on its segment (``expert_token_num`` gives the segment lengths; the
formulation is chosen per export, ``models.experts.segments``; ``padded`` runs the segments as
padded buckets), and puts the results back
into received order with ``permute_token_idx``: idx_type 0 (gather index, Ascend's only mode) by
a scatter, idx_type 1 (scatter index, an extension) by a gather. The combine step (routing weights)
happens on the source rank after the return all-to-all and is not part of this block.
"""

from __future__ import annotations

import torch

from . import experts as routed_experts
from .layers import GroupedExperts, MoEConfig, compute_dtype, rounded


class ExpertParallelBlock(torch.nn.Module):
    """Expert side of an expert-parallel MoE layer: re-route, dequantise, experts, un-permute.

    Inputs: ``tokens`` [A, H] (int8 or the block dtype), ``expert_token_num_per_rank`` [N, E]
    int64, and for int8 ``per_token_scales`` [A] float32. Outputs: ``output`` [A, H] in received
    order and ``expert_token_num`` [E].
    """

    output_names = ("output", "expert_token_num")
    experts_formulation: str = routed_experts.DEFAULT  # models.experts.FORMULATIONS

    def __init__(self, cfg: MoEConfig, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.cfg, self.dtype, self.compute = cfg, dtype, compute_dtype(dtype)
        self.experts = GroupedExperts(cfg.experts, cfg.hidden, cfg.intermediate, dtype)
        self.input_names = ("tokens", "expert_token_num_per_rank") + (
            ("per_token_scales",) if cfg.quant == "int8" else ())

    def forward(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Export path: MoeReRouting -> dequantise -> experts on their segments -> received order."""
        named = dict(zip(self.input_names, inputs))
        tokens, counts = named["tokens"], named["expert_token_num_per_rank"]
        pt, ps, idx, etn = torch.ops.npu.npu_moe_re_routing(
            tokens, counts, per_token_scales=named.get("per_token_scales"), expert_token_num_type=1,
            idx_type=self.cfg.idx_type)
        x = pt.to(self.compute)
        if self.cfg.quant == "int8":
            x = rounded(x * ps.to(self.compute)[:, None], self.dtype)
        if self.experts_formulation == "padded":
            y = self._padded_experts(x, etn)
        else:
            y = routed_experts.segments(self.experts, x, etn, self.experts_formulation)
        if self.cfg.idx_type == 0:  # permute_tokens[i] = tokens[idx[i]]  ->  out[idx[i]] = y[i]
            out = torch.index_put(torch.zeros_like(y), (idx.to(torch.int64),), y)
        else:  # idx[j] = where received row j went
            out = y[idx.to(torch.int64)]
        return out.to(self.dtype), etn

    def _padded_experts(self, x, etn):
        """The ``padded`` formulation: segments as [E, C, H] buckets."""
        rows = torch.arange(x.shape[0])
        ends = torch.cumsum(etn.to(torch.int64), 0)
        expert = (rows[:, None] >= ends[None, :]).to(torch.int64).sum(1)  # segment of each row
        pos = rows - (ends - etn.to(torch.int64))[expert]
        capacity = etn.max().item()
        torch._check(capacity >= 0)
        return self.experts(x, expert, pos, capacity)

    def forward_native(self, *inputs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Plain-torch reference: each (source rank, expert) block straight through its expert, in
        received order (no permutation at all)."""
        named = dict(zip(self.input_names, inputs))
        tokens, counts = named["tokens"], named["expert_token_num_per_rank"]
        scales = named.get("per_token_scales")
        out = torch.zeros(tokens.shape, dtype=self.dtype)
        start = 0
        for r in range(counts.shape[0]):
            for e in range(counts.shape[1]):
                n = int(counts[r, e])
                rows = slice(start, start + n)
                x = tokens[rows]
                if scales is not None:
                    x = (x.float() * scales[rows, None].float()).to(self.dtype)
                out[rows] = self.experts.expert_native(e, x)
                start += n
        return out, counts.sum(0)

    def example_inputs(self, tokens: int, seed: int = 0) -> tuple:
        """Random received tokens with random per-(rank, expert) counts summing to ``tokens``
        (some blocks empty)."""
        g = torch.Generator().manual_seed(seed)
        N, E = self.cfg.ranks, self.cfg.experts
        weight = torch.rand(N * E, generator=g) * (torch.rand(N * E, generator=g) > 0.2)
        weight[0] += 1e-3  # at least one block may receive tokens
        blocks = torch.multinomial(weight, tokens, replacement=True, generator=g) if tokens else \
            torch.zeros(0, dtype=torch.int64)
        counts = torch.bincount(blocks, minlength=N * E).reshape(N, E).to(torch.int64)
        if self.cfg.quant == "int8":
            q = torch.randint(-127, 128, (tokens, self.cfg.hidden), generator=g).to(torch.int8)
            scales = 0.004 + 0.012 * torch.rand(tokens, generator=g)
            return q, counts, scales
        return torch.randn(tokens, self.cfg.hidden, generator=g).to(self.dtype), counts

    def dynamic_shapes(self) -> tuple:
        """``dynamic_shapes`` for export: the received-token dimension A is dynamic."""
        tokens = torch.export.Dim("tokens")
        specs = [{0: tokens}, None] + ([{0: tokens}] if self.cfg.quant == "int8" else [])
        return (tuple(specs),)


PRESETS = {
    "ep-int8": dict(
        cls=ExpertParallelBlock,
        doc="EP expert side, int8 tokens + float32 per-token scales (DeepSeek-V3 on 32 ranks: 8 local experts)",
        tiny=MoEConfig(hidden=64, experts=4, top_k=1, intermediate=32, ranks=3, quant="int8", idx_type=0),
        full=MoEConfig(hidden=7168, experts=8, top_k=1, intermediate=2048, ranks=32, quant="int8",
                       idx_type=0),
    ),
    "ep-bf16": dict(
        cls=ExpertParallelBlock,
        default_dtype="bfloat16",
        doc="EP expert side, bfloat16 tokens without scales, scatter index (gpt-oss sizes on 8 ranks)",
        tiny=MoEConfig(hidden=48, experts=6, top_k=1, intermediate=24, ranks=2, idx_type=1),
        full=MoEConfig(hidden=2880, experts=16, top_k=1, intermediate=2880, ranks=8, idx_type=1),
    ),
}
