"""npu_grouped_matmul's forms beside the MoE one (one x grouped by rows, one stacked weight):

- ``group_type=-1``: no grouping, x and weight are lists and ``y[i] = x[i] @ weight[i] (+ bias[i])``,
  one output per weight (``split_item`` 0 / 1); x tensors of 2–6 dims;
- ``group_type=0`` with several x tensors: the same products, concatenated into one output
  (``split_item`` 2 / 3); a ``group_list`` given must count each x tensor's rows;
- ``group_type=2``: the K axis split into groups, ``y[e] = x[:, K_e] @ weight[K_e, :]`` stacked
  into ``[E, M, N]`` (``split_item`` 2 / 3, one x ``[M, K]``, one weight ``[K, N]``).

op-plugin's ``GroupedMatmulKernelNpuOpApi.cpp`` and the torch_npu docs define the forms. They take
float weights only (torch_npu quantizes the M-grouped form alone) and export as standard ONNX
(MatMul, Add, Concat; the K groups as masks, so the graph's shapes do not depend on group_list).
16-bit inputs are multiplied in float32 and rounded once, as the MoE form is.
"""

from __future__ import annotations

import torch

from ._args import has_values, require

FN = "npu_grouped_matmul"


def _product(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None) -> torch.Tensor:
    y = x.float() @ w.float()
    if b is not None:
        y = y + b.float()
    return y.to(x.dtype)


def _check_pair(i: int, x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None, x_dims: tuple[int, int]) -> None:
    lo, hi = x_dims
    require(lo <= x.dim() <= hi, FN, "x", lambda: f"tensor {i} must have {lo} to {hi} dims", x)
    require(w.dim() == 2, FN, "weight", lambda: f"tensor {i} must be 2-D [K, N] in this form", w)
    require(x.dtype.is_floating_point and w.dtype == x.dtype, FN, "weight",
            lambda: f"tensor {i} must have x's float dtype {x.dtype} (quantized weights take the M-grouped form)", w)
    require(x.shape[-1] == w.shape[0], FN, "weight", lambda: f"tensor {i} must have K = {x.shape[-1]} rows", w)
    require(b is None or (b.dim() == 1 and b.shape[0] == w.shape[1]), FN, "bias",
            lambda: f"tensor {i} must be [{w.shape[1]}]", b)


def _bias_list(bias, n: int) -> list[torch.Tensor | None]:
    if bias is None:
        return [None] * n
    tensors = [bias] if isinstance(bias, torch.Tensor) else list(bias)
    require(len(tensors) == n, FN, "bias", lambda: f"must hold one tensor per weight ({n})", tensors)
    return tensors


def ungrouped(xs: list[torch.Tensor], ws: list[torch.Tensor], bias, group_list, split_item: int) -> list[torch.Tensor]:
    """``group_type=-1``: one independent product per (x, weight) pair."""
    require(group_list is None, FN, "group_list", "must be None with group_type=-1 (no grouping)", group_list)
    require(split_item in (0, 1), FN, "split_item", "must be 0 or 1 with group_type=-1 (one output per weight)",
            split_item)
    require(len(xs) == len(ws), FN, "weight", lambda: f"must hold one tensor per x tensor ({len(xs)})", ws)
    bs = _bias_list(bias, len(ws))
    for i, (x, w, b) in enumerate(zip(xs, ws, bs)):
        _check_pair(i, x, w, b, (2, 6))
    return [_product(x, w, b) for x, w, b in zip(xs, ws, bs)]


def concatenated(xs: list[torch.Tensor], ws: list[torch.Tensor], bias, group_list, group_list_type: int,
                 split_item: int) -> list[torch.Tensor]:
    """``group_type=0`` with several x tensors: the pairs' products in one ``[sum M_i, N]`` output."""
    require(split_item in (2, 3), FN, "split_item", "must be 2 or 3 with several x tensors and group_type=0 "
            "(one output; 0 / 1 need group_type=-1)", split_item)
    require(len(xs) == len(ws), FN, "weight", lambda: f"must hold one tensor per x tensor ({len(xs)})", ws)
    require(len({w.shape[-1] for w in ws}) == 1, FN, "weight", "tensors must share N to be concatenated", ws)
    bs = _bias_list(bias, len(ws))
    for i, (x, w, b) in enumerate(zip(xs, ws, bs)):
        _check_pair(i, x, w, b, (2, 2))
    rows = [x.shape[0] for x in xs]
    if group_list is not None and all(isinstance(r, int) for r in rows):
        counts = torch.tensor(rows)
        expected = counts if group_list_type == 1 else counts.cumsum(0)
        given = torch.as_tensor(group_list)
        if has_values(given):
            require(given.shape == expected.shape and bool((given.cpu() == expected).all()), FN, "group_list",
                    lambda: f"must {'count' if group_list_type == 1 else 'cumulate'} the rows of the x tensors "
                    f"({expected.tolist()})", group_list)
    return [torch.cat([_product(x, w, b) for x, w, b in zip(xs, ws, bs)])]


def k_split(x: torch.Tensor, ws: list[torch.Tensor], bias, group_list, group_list_type: int,
            split_item: int) -> list[torch.Tensor]:
    """``group_type=2``: ``y[e] = x[:, K_e] @ w[K_e, :]`` for the K ranges of group_list, ``[E, M, N]``."""
    require(split_item in (2, 3), FN, "split_item", "must be 2 or 3 with group_type=2 (one [E, M, N] output)",
            split_item)
    require(len(ws) == 1, FN, "weight", "must be one [K, N] tensor with group_type=2", ws)
    require(bias is None, FN, "bias", "must be None with group_type=2 (K-split partial products)", bias)
    require(isinstance(group_list, torch.Tensor) and group_list.dim() == 1, FN, "group_list",
            "must be a 1-D tensor of K group sizes (group_list_type=1) or their cumsum (0) with group_type=2",
            group_list)
    require(group_list_type in (0, 1), FN, "group_list_type", "must be 0 (cumsum) or 1 (sizes) with group_type=2",
            group_list_type)
    w = ws[0]
    _check_pair(0, x, w, None, (2, 2))
    k = x.shape[1]
    sizes = group_list.to(torch.int64)
    ends = sizes.cumsum(0) if group_list_type == 1 else sizes
    starts = torch.cat([ends.new_zeros(1), ends[:-1]])
    if has_values(ends):
        ok = bool((ends[1:] >= ends[:-1]).all()) and int(ends[0]) >= 0 and int(ends[-1]) == k
        require(ok, FN, "group_list", lambda: f"must split K = {k} into ordered groups (last end {k})", group_list)
    cols = torch.arange(k, device=x.device)
    masks = ((cols[None, :] >= starts[:, None]) & (cols[None, :] < ends[:, None])).float()  # [E, K]
    y = (x.float()[None, :, :] * masks[:, None, :]) @ w.float()
    return [y.to(x.dtype)]


__all__ = ["concatenated", "k_split", "ungrouped"]
