"""Export a block, run it in ONNX Runtime next to torch, and compare (used by the CLI and tests).

Paths compared for every token count:
- ``ort``: ONNX Runtime with the custom-op library (its CPU kernels); ``ort-cann`` with
  ``--provider cann``: the same on the CANN execution provider (its CANN kernels);
- ``ort-functions``: plain ONNX Runtime, no library: the attached pure-ONNX function bodies;
- ``torch``: the block's export path in eager torch (the custom torch ops);
- ``reference``: the block's plain-torch reference (no custom ops).

Expert indices must agree exactly, except rows where the experts that differ are tied within
rounding in the selection scores (a *near-tie*; counted and listed, never hidden). Outputs are
compared on the rows whose experts agree: ``max_rel`` = max |got - ref| / max |ref|, which must stay
within the dtype's tolerance (``TOLERANCES``).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import numpy.typing as npt
import torch

from ascend_moe_onnx.models import experts as routed_experts
from ascend_moe_onnx.models import presets
from ascend_moe_onnx.models.runtime import EXPORT_TOKENS, export_block, run_ort, run_torch, sessions, to_numpy  # noqa: F401

if TYPE_CHECKING:
    from tqdm import tqdm

    from ascend_moe_onnx.exporters.weights_quant import WeightsQuant
    from ascend_moe_onnx.models.layers import RoutedMoE

# Output tolerance on max|err| / max|ref|, per dtype. float32: matmul rounding differences are
# ~1e-7 relative (tiny) to ~1e-6 (hidden 7168). float16 / bfloat16: one rounding of the output
# dtype is 2^-11 / 2^-8 relative; a different summation order flips roundings inside the expert
# (gate/up/act/down/combine), which can reach a few units of the last place.
TOLERANCES = {"float32": 2e-5, "float16": 4e-3, "bfloat16": 3e-2}
# int8 activations (--act-quant int8) against the torch block, which computes with the same
# dequantized weights and float activations: two per-token int8 roundings per expert add ~1 % rms,
# a few % at the largest output.
ACT_QUANT_TOLERANCE = 5e-2
# bfloat16 products (--weights-quant bfloat16) against the torch block, which computes with the same
# (bfloat16-valued) weights and float32 rows: the x and SwiGLU rows rounded to bfloat16, 2^-9
# relative each, give ~3e-3 at the largest output (measured 2.4-2.8e-3 on the tiny presets).
BF16_PRODUCTS_TOLERANCE = 1e-2
# Near-tie tolerance on the selection scores. Scores from float32 logits differ between runtimes
# by ~1e-6 at most; logits rounded to float16 / bfloat16 (Qwen3 / Mixtral in those dtypes) can be
# one unit of the last place apart, so two logits within 2 ulp are a tie.
TIE_TOLERANCES = {"float32": 1e-5, "float16": 2.0**-9, "bfloat16": 2.0**-6}
TOKEN_COUNTS = {"tiny": (1, 5, 33, 128), "full": (1, 16, 128)}
PATHS = (("ort", "torch"), ("ort", "reference"), ("ort-functions", "torch"))


def paths(provider: str = "cpu") -> tuple:
    """The (got, ref) pairs compared; ``ort`` becomes ``ort-cann`` on the CANN EP."""
    if provider == "cpu":
        return PATHS
    return tuple(("ort-cann" if g == "ort" else g, r) for g, r in PATHS)


@dataclass
class Check:
    """One comparison (got vs ref) of one block, over all token counts."""

    preset: str
    dtype: str
    got: str
    ref: str
    tokens: list = field(default_factory=list)
    agreement: float = 1.0  # fraction of rows with identical expert indices (worst token count)
    near_ties: list = field(default_factory=list)  # (tokens, row, experts, score spread)
    mismatches: list = field(default_factory=list)  # rows that differ beyond a near-tie
    max_abs: float = 0.0
    max_rel: float = 0.0
    tol: float = 0.0
    compared: int = 0  # token counts actually compared
    note: str = ""  # "error: ..." (fails) or "skipped: ..." (path not available)
    experts: str = ""  # expert formulation of the exported block (models.experts)
    info: str = ""  # how the block was built (e.g. a shrunk expert width)

    @property
    def passed(self) -> bool:
        """Compared at least once, no real index mismatch, output error within tolerance, nothing
        failed to run."""
        return (self.compared > 0 and not self.mismatches and self.max_rel <= self.tol
                and not self.note.startswith("error"))


def tie_tolerance(block: RoutedMoE) -> float:
    """Near-tie tolerance of a block: its selection scores' dtype decides."""
    cfg = block.cfg
    return TIE_TOLERANCES["float32" if cfg.router_fp32 else block.dtype_name]


def classify_rows(got_idx: npt.ArrayLike, ref_idx: npt.ArrayLike, scores: np.ndarray | None,
                  tie_tol: float) -> tuple[list[tuple[int, list[int], float]], list[tuple[int, list[int], float]]]:
    """Rows whose expert indices differ -> (near-ties, mismatches), each a list of
    (row, experts, score spread); a near-tie's differing experts are within ``tie_tol`` (relative
    to max(1, |score|)) of each other."""
    got, ref = np.asarray(got_idx), np.asarray(ref_idx)
    ties: list[tuple[int, list[int], float]] = []
    bad: list[tuple[int, list[int], float]] = []
    for r in np.flatnonzero((got != ref).any(axis=1)):
        diff = sorted(set(got[r].tolist()) ^ set(ref[r].tolist()))
        if not diff:  # same experts, different order
            diff = sorted(set(got[r][got[r] != ref[r]].tolist()))
        if scores is None:
            bad.append((int(r), diff, float("nan")))
            continue
        vals = scores[r, diff]
        spread = float(vals.max() - vals.min())
        (ties if spread <= tie_tol * max(1.0, float(np.abs(vals).max())) else bad).append((int(r), diff, spread))
    return ties, bad


def _compare(check: Check, T: int, got: list, ref: list, scores, tie_tol: float, routed: bool) -> None:
    check.compared += 1
    out_g, out_r = got[0].astype(np.float64), ref[0].astype(np.float64)
    rows = np.ones(out_r.shape[0], dtype=bool)
    if routed:
        ties, bad = classify_rows(got[1], ref[1], scores, tie_tol)
        check.near_ties += [(T, *t) for t in ties]
        check.mismatches += [(T, *m) for m in bad]
        rows[[t[0] for t in ties + bad]] = False
        agree = 1.0 - (len(ties) + len(bad)) / max(1, out_r.shape[0])
    else:  # expert-parallel block: expert_token_num must be identical
        agree = float(np.array_equal(got[1], ref[1]))
        if agree < 1:
            check.mismatches.append((T, "expert_token_num", got[1].tolist(), ref[1].tolist()))
    check.agreement = min(check.agreement, agree)
    if out_g.shape != out_r.shape:
        check.note = f"error: output shape {out_g.shape} != {out_r.shape}"
        return
    if rows.any():
        err = float(np.abs(out_g[rows] - out_r[rows]).max()) if out_r.size else 0.0
        scale = float(np.abs(out_r).max()) if out_r.size else 0.0
        check.max_abs = max(check.max_abs, err)
        check.max_rel = max(check.max_rel, err / scale if scale else err)


def verify_block(block: RoutedMoE, token_counts: Sequence[int] | None = None, export_tokens: int = EXPORT_TOKENS,
                 cache_key: tuple | None = None, progress: tqdm | None = None, path: str | os.PathLike | None = None,
                 provider: str = "cpu", experts: str | None = None, target: str | None = None) -> list[Check]:
    """Export ``block`` (expert formulation ``experts``, models.experts; None: the block's own) for
    ``target`` (exporters.targets; None: the graph ``provider`` is given), run every path at each
    token count, compare; one Check per path pair.

    The default token counts leave out the export example's (the interesting case is a count the
    graph was not traced with); counts given by the caller all run.
    """
    with routed_experts.using(block, experts):
        checks = _verify_block(block, token_counts, export_tokens, cache_key, progress, path, provider, target)
    for c in checks:
        c.experts = block.experts_formulation if experts is None else experts
    return checks


def _verify_block(block, token_counts, export_tokens, cache_key, progress, path, provider,
                  target=None) -> list[Check]:
    token_counts = _token_counts(block, token_counts, export_tokens)
    name, dtype = block.preset, block.dtype_name
    tol = TOLERANCES[dtype]
    if getattr(getattr(block, "weights_quant", None), "act_quant", 0):
        tol = max(tol, ACT_QUANT_TOLERANCE)
    if getattr(getattr(block, "weights_quant", None), "bfloat16", False):
        tol = max(tol, BF16_PRODUCTS_TOLERANCE)
    checks = [Check(name, dtype, g, r, tol=tol) for g, r in paths(provider)]
    step = progress.set_postfix_str if progress is not None else (lambda s: None)
    step(f"{name}: export")
    try:
        if target is None:  # the graph the CANN EP is given (exporters.targets)
            target = "cann" if provider == "cann" else "cpu"
        data = export_block(block, export_tokens, path=path, cache_key=cache_key, target=target)
        sess = sessions(data, provider)
    except Exception as e:  # a failed export/session is one failing row per path, not a traceback
        for c in checks:
            c.note = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        return checks
    if progress is not None:
        progress.update(1)
    routed = hasattr(block, "selection_scores")
    tie_tol = tie_tolerance(block) if routed else 0.0
    for T in token_counts:
        step(f"{name}: {T} tokens")
        inputs = block.example_inputs(T, seed=T)
        results, like = run_torch(block, inputs)
        scores = None
        if routed:
            with torch.no_grad():
                scores = block.selection_scores(dict(zip(block.input_names, inputs))).double().numpy()
        for path_name, s in sess.items():
            if isinstance(s, str):
                continue
            try:
                results[path_name] = run_ort(s, block, inputs, like)
            except Exception as e:
                results[path_name] = f"error: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
        for c in checks:
            c.tokens.append(T)
            got = results.get(c.got, sess.get(c.got))
            if isinstance(got, str):
                c.note = got if got.startswith("error") else f"skipped: {got}"
                continue
            _compare(c, T, got, results[c.ref], scores, tie_tol, routed)
        if progress is not None:
            progress.update(1)
    return checks


def verify_preset(name: str, size: str = "tiny", dtype: str | None = None, *,
                  weights: str | os.PathLike | dict | None = None, layer: str | None = None,
                  intermediate: int | None = None, export_tokens: int = EXPORT_TOKENS,
                  token_counts: Sequence[int] | None = None, seed: int = 0, progress: tqdm | None = None,
                  path: str | os.PathLike | None = None, provider: str = "cpu", experts: str | None = None,
                  weights_quant: WeightsQuant | None = None, target: str | None = None) -> list[Check]:
    """Build a preset's block (random or checkpoint weights) and verify it (expert formulation
    ``experts``, default the block's own; ``weights_quant``: its experts quantized, models.quantize,
    the torch reference then computing with the dequantized weights)."""
    dtype = dtype or presets.default_dtype(name)
    block = presets.build(name, size, dtype, weights=weights, layer=layer, intermediate=intermediate,
                          seed=seed, weights_quant=weights_quant)
    quant = None if weights_quant is None else weights_quant.name
    key = None if weights is not None else (name, size, dtype, intermediate, seed, quant)
    checks = verify_block(block, token_counts, export_tokens, cache_key=key, progress=progress, path=path,
                          provider=provider, experts=experts, target=target)
    for c in checks:
        c.info = block.note
    return checks


def _token_counts(block_or_size, token_counts, export_tokens: int) -> list[int]:
    if token_counts:
        return list(token_counts)
    size = block_or_size if isinstance(block_or_size, str) else getattr(block_or_size, "size", "tiny")
    return [t for t in TOKEN_COUNTS[size] if t != export_tokens]


def steps(size: str = "tiny", token_counts: Sequence[int] | None = None, export_tokens: int = EXPORT_TOKENS) -> int:
    """Progress steps of one verify_block call (export + each token count)."""
    return 1 + len(_token_counts(size, token_counts, export_tokens))


# ---- table -------------------------------------------------------------------------------------

def format_table(checks: list[Check]) -> str:
    """A fixed-width table of checks: per block and path, the token counts compared, index agreement,
    errors, tolerance, result."""
    head = ("block", "dtype", "experts", "compared", "tokens", "index agree", "near-ties", "max abs err", "max rel err",
            "tolerance", "result")
    rows = []
    for c in checks:
        skipped = c.note.startswith("skipped")
        result = "skip" if skipped else ("PASS" if c.passed else "FAIL")
        rows.append((c.preset, c.dtype, c.experts, f"{c.got} vs {c.ref}", ",".join(map(str, c.tokens)) or "-",
                     "-" if skipped else f"{c.agreement:.4f}", str(len(c.near_ties)),
                     "-" if skipped else f"{c.max_abs:.2e}", "-" if skipped else f"{c.max_rel:.2e}",
                     f"{c.tol:.0e}", result + (f"  ({c.note})" if c.note else "")))
    widths = [max(len(str(r[i])) for r in rows + [head]) for i in range(len(head) - 1)]
    lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths)) + "  " + head[-1]]
    lines.append("  ".join("-" * w for w in widths) + "  " + "-" * 6)
    for r in rows:
        lines.append("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) + "  " + r[-1])
    return "\n".join(lines)


def describe_near_ties(checks: list[Check], limit: int = 5) -> list[str]:
    """One line per check with near-ties (or mismatches), listing the first few rows."""
    lines = []
    for c in checks:
        for label, items in (("near-ties", c.near_ties), ("MISMATCHES", c.mismatches)):
            if items:
                shown = "; ".join(f"T={i[0]} row {i[1]} experts {i[2]} spread {i[3]:.2g}"
                                  if isinstance(i[3], float) else str(i) for i in items[:limit])
                more = f" (+{len(items) - limit} more)" if len(items) > limit else ""
                lines.append(f"{c.preset} [{c.dtype}] {c.got} vs {c.ref}: {label}: {shown}{more}")
    return lines
