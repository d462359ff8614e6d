"""The expert-parallel MoE layer at run time: ONNX Runtime sessions joined by all-to-alls.

Per call, on every rank (N ranks, E experts, L = E / N local experts, k experts per token):

1. route the rank's T tokens with the router graph (MoeGatingTopKHash) -> weights, expert_idx;
2. sort the T*k (token, slot) pairs by global expert id (= by destination rank, then local
   expert) and count them: ``[N, L]``;
3. all-to-all the counts (each rank learns its ``expert_token_num_per_rank``), then the token rows
   (int8 + float32 per-token scales with ``quant='int8'``);
4. run the expert graph on the A received rows (MoeReRouting -> experts -> received order);
5. all-to-all the A result rows back (the reverse splits) and combine the k rows of each token with
   its routing weights (float32 sum, as the single-process block does), plus the shared experts.

Collectives are ``torch.distributed.all_to_all_single`` on the default group; the group's
timeout bounds every wait, and a failed collective becomes an EPError that names the step.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import torch
import torch.distributed as dist

from .artefacts import EPError, Layout

INT8_MAX = 127.0


def quantise_int8(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-token int8: ``scale = max|x| / 127``, ``q = round(x / scale)`` -> (q int8, scale
    float32 [T]). A zero row gets scale 1 (q = 0). |x - q*scale| <= scale/2 per element."""
    amax = x.abs().amax(dim=1) if x.shape[0] else x.new_zeros(0)
    scale = torch.where(amax > 0, amax / INT8_MAX, torch.ones_like(amax)).to(torch.float32)
    q = torch.clamp(torch.round(x / scale[:, None]), -INT8_MAX, INT8_MAX).to(torch.int8)
    return q, scale


@dataclass
class Traffic:
    """Bytes one rank sent per all-to-all: all rows, rows to other ranks, and the ideal (each
    token once per remote rank it needs, i.e. deduplicated and without self-sends)."""

    dispatch: int = 0
    dispatch_remote: int = 0
    dispatch_ideal: int = 0
    combine: int = 0
    combine_remote: int = 0
    combine_ideal: int = 0
    counts: int = 0

    def add(self, other: Traffic) -> None:
        """Accumulate another call's bytes."""
        for k in self.__dataclass_fields__:
            setattr(self, k, getattr(self, k) + getattr(other, k))


@dataclass
class Result:
    """One call's output [T, H], the expert choices [T, k], the received-rows count and the traffic."""

    output: torch.Tensor
    expert_idx: torch.Tensor
    received: int
    traffic: Traffic = field(default_factory=Traffic)


def _to_torch(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a))


class EPLayer:
    """One MoE layer of rank ``rank`` out of ``layout.ranks``: its router and expert-side sessions."""

    def __init__(self, router, expert, layout: Layout, rank: int, group=None, device: str = "cpu"):
        self.router, self.expert, self.layout, self.rank, self.group = router, expert, layout, rank, group
        self.device = torch.device(device)  # where the collectives want their tensors (NPU for HCCL)
        self.router_inputs = [i.name for i in router.get_inputs()]
        self.router_outputs = [o.name for o in router.get_outputs()]
        self.expert_inputs = [i.name for i in expert.get_inputs()]

    # ---- collectives ------------------------------------------------------------------------------
    def _all_to_all(self, step: str, send: torch.Tensor, recv_rows: list[int], send_rows: list[int],
                    recv_shape_tail: tuple) -> torch.Tensor:
        """Rows of ``send`` (split ``send_rows`` by destination) -> rows received (``recv_rows``)."""
        send = send.contiguous().to(self.device)
        out = send.new_empty((sum(recv_rows), *recv_shape_tail))
        try:
            dist.all_to_all_single(out, send, recv_rows, send_rows, group=self.group)
        except Exception as e:  # gloo/HCCL raise RuntimeError or DistBackendError subclasses
            raise EPError(f"rank {self.rank}: all-to-all '{step}' failed: a peer rank died, timed out "
                          f"or disagrees on the layer ({type(e).__name__}: {str(e).strip()[:300]})") from e
        return out.cpu()  # the sessions take host memory (docs/expert-parallel.md, On Ascend)

    # ---- one call ---------------------------------------------------------------------------------
    def __call__(self, inputs: tuple) -> Result:
        """Run the layer on this rank's tokens (torch tensors in the router's input order)."""
        N, E, k, H = self.layout.ranks, self.layout.experts, self.layout.top_k, self.layout.hidden
        L = E // N
        feeds = {n: np.ascontiguousarray(t.numpy()) for n, t in zip(self.router_inputs, inputs)}
        outs = dict(zip(self.router_outputs, self.router.run(None, feeds)))
        x = inputs[0].to(torch.float32)
        T = x.shape[0]
        weights = _to_torch(outs["routing_weights"]).to(torch.float32)
        idx = _to_torch(outs["expert_idx"])
        flat = idx.reshape(-1).to(torch.int64)
        bad = flat[(flat < 0) | (flat >= E)]
        if bad.numel():
            raise EPError(f"rank {self.rank}: router chose expert {int(bad[0])} outside [0, {E})")
        order = torch.sort(flat, stable=True).indices  # (token, slot) pairs by expert = by rank, local expert
        token_of = order // k
        counts = torch.bincount(flat, minlength=E).reshape(N, L)

        traffic = Traffic()
        recv_counts = self._all_to_all("counts", counts, [1] * N, [1] * N, (L,))
        traffic.counts = counts.numel() * 8
        send_rows = counts.sum(1).tolist()
        recv_rows = recv_counts.sum(1).tolist()

        if self.layout.quant == "int8":
            q, scale = quantise_int8(x)
            rows, row_scales = q[token_of], scale[token_of]
        else:
            rows, row_scales = x[token_of], None
        row_bytes = H * rows.element_size() + (4 if row_scales is not None else 0)
        dest = flat // L
        remote = [r for r in range(N) if r != self.rank]
        traffic.dispatch = len(flat) * row_bytes
        traffic.dispatch_remote = sum(send_rows[r] for r in remote) * row_bytes
        pairs = torch.unique(torch.arange(T * k) // k * N + dest)  # distinct (token, destination rank)
        remote_pairs = int(((pairs % N) != self.rank).sum())
        traffic.dispatch_ideal = remote_pairs * row_bytes

        received = self._all_to_all("dispatch tokens", rows, recv_rows, send_rows, (H,))
        feeds = {"tokens": received.numpy(), "expert_token_num_per_rank": recv_counts.numpy()}
        if row_scales is not None:
            feeds["per_token_scales"] = self._all_to_all("dispatch scales", row_scales, recv_rows,
                                                         send_rows, ()).numpy()
        results = _to_torch(self.expert.run(["output"], feeds)[0])

        back = self._all_to_all("combine", results, send_rows, recv_rows, (H,))
        out_bytes = H * back.element_size()
        traffic.combine = sum(recv_rows) * out_bytes
        traffic.combine_remote = sum(recv_rows[r] for r in remote) * out_bytes
        # Ideal: each rank sums a token's weighted expert rows before sending one row back.
        traffic.combine_ideal = remote_pairs * out_bytes

        y = torch.empty_like(back)
        y[order] = back  # back to (token, slot) order
        # Weighted sum over the k slots in float32 (as the single-process block does).
        out = (y.to(torch.float32).reshape(T, k, H) * weights.reshape(T, k, 1)).sum(1)
        if "shared_output" in outs:
            out = out + _to_torch(outs["shared_output"]).to(torch.float32)
        return Result(out, idx, int(sum(recv_rows)), traffic)
