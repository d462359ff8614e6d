"""Argument checks and normalisation shared by the torch_npu stand-in functions."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, NoReturn

import torch

EXPERT_PARALLEL_DOC = "docs/expert-parallel.md"


class ArgumentError(ValueError, RuntimeError):
    """A bad argument: a ValueError here, and a RuntimeError as torch_npu's ``TORCH_CHECK`` raises it,
    so code written against torch_npu catches it as it would there."""


def fail(fn: str, arg: str, requirement: str | Callable[[], str], value: Any) -> NoReturn:
    """Raise the stand-in's one error form: ``<fn>: argument '<arg>' <requirement>, got <value>``.

    ``requirement`` may be a callable and tensors in ``value`` are described here: messages are
    only formatted on failure, since formatting a symbolic size while exporting would fix it.
    """
    text = requirement() if callable(requirement) else requirement
    raise ArgumentError(f"{fn}: argument '{arg}' {text}, got {describe(value)}")


def unsupported(fn: str, arg: str, value: Any, why: str) -> NoReturn:
    """Raise NotImplementedError for an argument value the ONNX export has no operator for."""
    raise NotImplementedError(f"{fn}: argument '{arg}'={describe(value)} is not supported: {why}")


def require(ok: bool, fn: str, arg: str, requirement: str | Callable[[], str], value: Any) -> None:
    """:func:`fail` unless ``ok``."""
    if not ok:
        fail(fn, arg, requirement, value)


def describe(t: Any) -> str:
    """Short description of an argument for messages (tensors: dtype and shape)."""
    if isinstance(t, torch.Tensor):
        return f"{str(t.dtype).replace('torch.', '')}{list(t.shape)}"
    if isinstance(t, (list, tuple)):
        return "[" + ", ".join(describe(v) for v in t) + "]"
    return repr(t)


def require_none(fn: str, **args) -> None:
    """Reject the quantisation / tuning arguments the stand-in does not export (any non-None)."""
    for name, value in args.items():
        if value is not None:
            unsupported(fn, name, value, "quantised and tuned variants have no ONNX operator here; "
                        "pass None (docs/ascend-code.md)")


def single_tensor(fn: str, arg: str, value) -> torch.Tensor:
    """The one tensor of a ``Tensor[]`` argument the MoE paths pass as ``[t]`` (a bare tensor works too)."""
    if isinstance(value, torch.Tensor):
        return value
    if isinstance(value, Sequence) and len(value) == 1 and isinstance(value[0], torch.Tensor):
        return value[0]
    fail(fn, arg, "must be one tensor or a list of one tensor", value)


def tensor_list(fn: str, arg: str, value) -> list[torch.Tensor]:
    """A ``Tensor[]`` argument as a non-empty list (a bare tensor is a list of one)."""
    tensors = [value] if isinstance(value, torch.Tensor) else list(value) if isinstance(value, Sequence) else []
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        fail(fn, arg, "must be a tensor or a non-empty list of tensors", value)
    return tensors


def stacked_weight(fn: str, value) -> torch.Tensor:
    """``weight`` of npu_grouped_matmul as one ``[E, K, N]`` tensor: ``[W]`` (3-D) or E 2-D ``[K, N]``."""
    tensors = [value] if isinstance(value, torch.Tensor) else list(value) if isinstance(value, Sequence) else None
    if not tensors or not all(isinstance(t, torch.Tensor) for t in tensors):
        fail(fn, "weight", "must be a list of tensors", value)
    if len(tensors) == 1 and tensors[0].dim() == 3:
        return tensors[0]
    if all(t.dim() == 2 for t in tensors) and len({tuple(t.shape) for t in tensors}) == 1:
        return torch.stack(tensors)
    fail(fn, "weight", "must be [W] with W of shape [E, K, N], or E tensors of one shape [K, N]",
         tensors)


def stacked_bias(fn: str, value, experts: int) -> torch.Tensor | None:
    """``bias`` of npu_grouped_matmul as one ``[E, N]`` tensor (``[B]`` with B [E, N], or E tensors [N])."""
    if value is None:
        return None
    tensors = [value] if isinstance(value, torch.Tensor) else list(value)
    if len(tensors) == 1 and tensors[0].dim() == 2:
        return tensors[0]
    if len(tensors) == experts and all(t.dim() == 1 for t in tensors):
        return torch.stack(tensors)
    fail(fn, "bias", lambda: f"must be [B] with B of shape [E, N] or {experts} tensors [N]", tensors)


def group_list_tensor(fn: str, group_list, device) -> torch.Tensor:
    """``group_list`` as an int64 tensor: torch_npu takes a tensor or (the ``.List`` overload) ints."""
    if group_list is None:
        fail(fn, "group_list", "is required for grouped (group_type=0) matmul", None)
    if isinstance(group_list, torch.Tensor):
        require(group_list.dim() == 1, fn, "group_list", "must be 1-D (per-expert counts or cumsum)", group_list)
        return group_list
    values = list(group_list)
    require(all(isinstance(v, int) for v in values), fn, "group_list", "must be a tensor or a list of ints", values)
    return torch.tensor(values, dtype=torch.int64, device=device)


def has_values(t: torch.Tensor) -> bool:
    """Whether ``t`` holds values to check (eager), not a tracer's stand-in (export)."""
    from torch._subclasses.fake_tensor import is_fake

    return not is_fake(t)


# an index no ScatterElements / Gather accepts: an invalid entry fails the exported graph too
_OUT_OF_RANGE = 2**62


def key_value_counts(fn: str, arg: str, kv: torch.Tensor, groups: int) -> torch.Tensor:
    """int64 counts [groups] from (group, count) rows [n, 2] (init routing's expert_tokens_num_type=2:
    the non-empty groups in ascending order, then (0, 0) rows).

    A group id outside [0, groups), a negative count or non-empty groups out of ascending order are
    refused, eagerly by value and in an exported graph by an index its ScatterElements rejects.
    """
    require(kv.dim() == 2 and kv.shape[1] == 2, fn, arg, "must be (expert, count) rows [n, 2] in key-value mode", kv)
    kv = kv.to(torch.int64)
    ids, counts = kv[:, 0], kv[:, 1]
    n = kv.shape[0]
    earlier = torch.arange(n, device=kv.device)[:, None] > torch.arange(n, device=kv.device)[None, :]
    # row i is in order when every earlier non-empty row has a smaller group id
    in_order = ~(earlier & (counts[None, :] > 0) & (ids[None, :] >= ids[:, None])).any(1) | (counts == 0)
    valid = (ids >= 0) & (ids < groups) & (counts >= 0) & in_order
    if has_values(kv) and not bool(valid.all()):
        bad = int(torch.nonzero(~valid)[0, 0])
        group, count = int(ids[bad]), int(counts[bad])
        if not 0 <= group < groups:
            fail(fn, arg, f"must hold group ids in [0, {groups}) in column 0", f"{group} in row {bad}")
        if count < 0:
            fail(fn, arg, "must hold non-negative counts in column 1", f"{count} in row {bad}")
        fail(fn, arg, "must list its non-empty groups in ascending group order (the rows of x are sorted by "
             "group)", f"group {group} in row {bad} after a group >= {group}")
    zeros = torch.zeros(groups, dtype=torch.int64, device=kv.device)
    return zeros.scatter_add(0, torch.where(valid, ids, _OUT_OF_RANGE), counts)


def per_expert_rows(fn: str, arg: str, value, experts: int) -> torch.Tensor:
    """A per-expert ``[E, N]`` argument (``scale``) as one tensor: ``[S]`` with S ``[E, N]``, or E
    tensors ``[N]`` (one per expert, as op-plugin's w8a8 tests pass it); a bare tensor works too."""
    tensors = [value] if isinstance(value, torch.Tensor) else list(value) if isinstance(value, Sequence) else None
    if tensors and all(isinstance(t, torch.Tensor) for t in tensors):
        if len(tensors) == 1 and tensors[0].dim() == 2:
            return tensors[0]
        if len(tensors) == experts and all(t.dim() == 1 for t in tensors) and len({t.shape for t in tensors}) == 1:
            return torch.stack(tensors)
    fail(fn, arg, lambda: f"must be [S] with S of shape [E, N], or {experts} tensors [N]", value)
