"""Generic patching of transformers 5 MoE layers: the router through MoeGatingTopKHash by its table
row (``hf.router_rows``), the stacked experts through the project's routed-rows formulation.

transformers 5 MoE blocks call ``router(hidden) -> (logits, weights, indices)`` and
``experts(hidden, indices, weights)``. Both modules are patched in place (their class changes to a
subclass, weights untouched); the block's own forward (shared experts, gates, residuals) stays HF's,
except for the shared-expert blocks of ``patching.SHARED_BLOCKS``.
A router is patched only when a probe (seeded random hidden states) gives HF's choice and weights,
so a row that does not describe a router never exports silently different routing.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
import torch.nn.functional as F

from ascend_moe_onnx import exporters  # noqa: F401  (defines torch.ops.custom.npu_moe_gating_top_k)
from ascend_moe_onnx.hf.router_rows import RouterRow, row_for, scoring_of
from ascend_moe_onnx.models import experts as formulations
from ascend_moe_onnx.models import layers
from ascend_moe_onnx.models.hf_routing import HFConfigError, Routing
from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

from . import experts as ex

_PATCHED: dict[type, type] = {}
PROBE_TOKENS = 64
PROBE_TOLERANCE = 1e-5


def class_names(module: torch.nn.Module) -> list[str]:
    """The names of a module's (original, unpatched) class and its bases, MRO order."""
    cls = getattr(type(module), "_ascend_original", type(module))
    return [c.__name__ for c in cls.__mro__]


def router_linear(router: torch.nn.Module) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(weight [E, H], bias [E] or None) of a router: its own ``weight`` or its one Linear child."""
    w = getattr(router, "weight", None)
    if isinstance(w, torch.Tensor) and w.dim() == 2:
        b = getattr(router, "bias", None)
        return w, b if isinstance(b, torch.Tensor) else None
    linears = [m for m in router.children() if isinstance(m, torch.nn.Linear)]
    if len(linears) != 1:
        raise HFConfigError(f"{type(router).__name__}: no router weight (expected .weight or one Linear)")
    return linears[0].weight, linears[0].bias


def _read(router: torch.nn.Module, field: str):
    """A router attribute, else its config's field (None when neither has it)."""
    for holder in (router, getattr(router, "config", None)):
        if holder is not None and hasattr(holder, field):
            return getattr(holder, field)
    return None


def _number(router, field: str, value, minimum=None):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or abs(value) == float("inf"):
        raise HFConfigError(f"{type(router).__name__}: {field}={value!r} must be a finite number")
    if minimum is not None and value < minimum:
        raise HFConfigError(f"{type(router).__name__}: {field}={value!r} must be >= {minimum}")
    return value


def routing_of(router: torch.nn.Module, row: RouterRow, config: Any = None) -> Routing:
    """The op's attributes for one router module from its row (fields refused by name)."""
    name = type(router).__name__
    def read(f):
        return (_read(router, f) if _read(router, f) is not None else getattr(config, f, None))
    weight, _ = router_linear(router)
    experts = weight.shape[0]
    top_k = read("top_k")
    if top_k is None:
        top_k = read("num_experts_per_tok")
    top_k = _number(router, "top_k", top_k, 1)
    if experts > spec.MAX_EXPERTS or top_k > min(spec.MAX_K, experts):
        raise HFConfigError(f"{name}: {experts} experts, top_k={top_k}: MoeGatingTopKHash takes "
                            f"<= {spec.MAX_EXPERTS} experts and 1 <= k <= min({spec.MAX_K}, experts)")
    for field in row.zero_fields:
        if read(field):
            raise HFConfigError(f"{name}: {field}={read(field)!r}: MoeGatingTopKHash has no counterpart (only 0)")
    norm = scoring_of(row, read)
    renorm = bool(read(row.renorm)) if isinstance(row.renorm, str) else row.renorm
    scale = 1.0 if row.scale is None else float(_number(router, row.scale, read(row.scale)))
    groups = {}
    if row.groups is not None:
        n_group = read("num_group") or read("n_group") or 1
        topk_group = read("topk_group") or 1
        n_group = int(_number(router, "n_group", n_group, 1))
        topk_group = int(_number(router, "topk_group", topk_group, 1))
        if experts % n_group or topk_group > n_group or top_k > topk_group * (experts // n_group):
            raise HFConfigError(f"{name}: n_group={n_group}, topk_group={topk_group} do not group {experts} "
                                f"experts for top_k={top_k}")
        if n_group > 1 and row.groups == 1 and experts // n_group < 2:
            raise HFConfigError(f"{name}: n_group={n_group}: groups of one expert; the top-2 group score needs >= 2")
        if n_group > 1:
            groups = dict(group_count=n_group, k_group=topk_group, group_select_mode=row.groups)
    # The op always renormalises sigmoid / sqrt-softplus weights: without renorm, take the scores.
    from_scores = norm != spec.NORM_SOFTMAX and not renorm
    return Routing(name, experts, top_k, norm_type=norm, renorm=int(renorm), routed_scaling_factor=scale,
                   bias=row.bias is not None, logits_fp32=row.logits_fp32, weights_fp32=row.weights == "float32",
                   weights_from_scores=from_scores, **groups)


def _selection_bias(router, row: RouterRow, args) -> torch.Tensor | None:
    if row.bias is None:
        return None
    if row.bias == "arg":
        return args[0] if args else None
    return operator.attrgetter(row.bias)(router)


def fused_router_forward(self, hidden_states: torch.Tensor, *args, **kwargs):
    """Patched router: HF logits -> one MoeGatingTopKHash -> (logits, weights [T, k], indices [T, k])."""
    if self.training:  # jitter / noise at training only: HF's own forward
        return self._ascend_original.forward(self, hidden_states, *args, **kwargs)
    r: Routing = self._ascend_routing
    row: RouterRow = self._ascend_row
    weight, lin_bias = router_linear(self)
    x = hidden_states.reshape(-1, weight.shape[1])
    if r.logits_fp32:
        logits = F.linear(x.float(), weight.float(), None if lin_bias is None else lin_bias.float())
    else:
        compute = layers.compute_dtype(x.dtype)
        logits = F.linear(x.to(compute), weight.to(compute), None if lin_bias is None else lin_bias.to(compute))
        logits = layers.rounded(logits, x.dtype).to(x.dtype)
    if row.logit_scale is not None:
        logits = logits * float(_read(self, row.logit_scale))
    bias = _selection_bias(self, row, args or tuple(kwargs.values()))
    kw = {} if bias is None else {"bias": bias.reshape(-1).float()}
    gate_in = logits.float() if (bias is not None or r.weights_fp32) else logits
    y, idx, scores = torch.ops.custom.npu_moe_gating_top_k(gate_in, r.top_k, **kw, **r.op_attributes())
    if r.weights_from_scores:
        y = scores.gather(1, idx.long()) * r.routed_scaling_factor
    target = {"float32": torch.float32, "hidden": hidden_states.dtype, "logits": logits.dtype}[row.weights]
    return logits, y.to(target), idx.long()


def _patched(cls: type, forward) -> type:
    if cls not in _PATCHED:
        _PATCHED[cls] = type(f"Ascend{cls.__name__}", (cls,), {"forward": forward, "_ascend_original": cls})
    return _PATCHED[cls]


def _same_routing(a, b) -> bool:
    (_, wa, ia), (_, wb, ib) = a, b
    if wa.numel() != wb.numel() or ia.numel() != ib.numel():
        return False
    k = ia.shape[-1]
    wa, wb, ia, ib = wa.reshape(-1, k), wb.reshape(-1, k), ia.reshape(-1, k), ib.reshape(-1, k)
    oa, ob = ia.long().sort(-1), ib.long().sort(-1)
    if not torch.equal(oa.values, ob.values):
        return False
    wa, wb = wa.float().gather(-1, oa.indices), wb.float().gather(-1, ob.indices)
    return bool(((wa - wb).abs() <= PROBE_TOLERANCE * wb.abs().max().clamp_min(1e-30)).all())


def patch_router(router: torch.nn.Module, block: torch.nn.Module, config: Any = None) -> str:
    """Route ``router`` with the fused op when its class has a row and a probe agrees with HF.
    Returns '' when patched, else one line saying why not."""
    name, row, refused = row_for(class_names(router))
    cls = type(router).__name__
    if refused:
        return f"router {cls}: {refused}"
    if row is None:
        return f"router {cls} has no router-table row"
    try:
        return _patch_router_checked(router, block, row, name, config)
    except HFConfigError:
        raise
    except Exception as e:  # a router this row does not fit: left to HF, said in one line
        original = getattr(type(router), "_ascend_original", None)
        if original is not None:
            router.__class__ = original
        return f"router {cls}: row {name} does not fit it ({type(e).__name__}: {str(e).splitlines()[0][:120]})"


def _patch_router_checked(router, block, row: RouterRow, name: str, config) -> str:
    cls = type(router).__name__
    r = routing_of(router, row, config)
    args: tuple[torch.Tensor, ...] = ()
    if row.bias == "arg":
        bias = _block_bias(block)
        if bias is None:
            return f"router {cls}: the block passes no selection bias (e_score_correction_bias / expert_bias)"
        args = (bias.float(),)
    if not _probe_agrees(router, r, row, args):
        return f"router {cls}: the fused op does not reproduce it on a probe (row {name} does not describe this config)"
    router._ascend_routing, router._ascend_row = r, row
    router.__class__ = _patched(type(router), fused_router_forward)
    return ""


def _probe_agrees(router, r: Routing, row: RouterRow, args) -> bool:
    """Whether HF's router and the fused one choose the same experts with the same weights on
    seeded random tokens. The probe runs on a float32 copy of the router: it checks the rule the
    row describes, which a bfloat16 router's rounding near ties (two logits equal in bfloat16,
    HF's bfloat16 softmax) would blur."""
    probe = copy.deepcopy(router).float()
    weight, _ = router_linear(probe)
    x = torch.randn(PROBE_TOKENS, weight.shape[1], generator=torch.Generator().manual_seed(1234))
    with torch.no_grad():
        x = x * (1.0 / max(float(weight.detach().norm(dim=1).mean()), 1e-6))  # logits of order 1: no ties
        try:  # [T, H] as most blocks pass it; [1, T, H] for routers that read batch and sequence
            ref = type(probe).forward(probe, x, *args)
        except (ValueError, RuntimeError):
            x = x[None]
            ref = type(probe).forward(probe, x, *args)
        probe._ascend_routing, probe._ascend_row = r, row
        probe.__class__ = _patched(type(probe), fused_router_forward)
        got = probe(x, *args)
    return isinstance(ref, tuple) and len(ref) == 3 and _same_routing(got, ref)


def _block_bias(block) -> torch.Tensor | None:
    for field in ("e_score_correction_bias", "expert_bias"):
        t = getattr(block, field, None)
        if isinstance(t, torch.Tensor):
            return t
    return None


def _silu_reason(act) -> str:
    if isinstance(act, torch.nn.SiLU) or type(act).__name__ in ("SiLUActivation", "SiLU"):
        return ""
    return f"activation {type(act).__name__} (the formulation is SwiGLU with SiLU)"


def _step3p7_reason(experts: torch.nn.Module) -> str:
    """Step3p7Experts: HF's stacked layout (gate rows first, as ``chunk(2)``) behind a loop over the
    experts hit; the SwiGLU clamp (``swiglu_limits``) comes after the SiLU, the formulation's before."""
    limit = float(getattr(experts, "limit", float("inf")))
    if limit != float("inf"):
        return (f"swiglu_limits={limit:g}: Step3p7Experts clamps silu(gate) (the formulation clamps the "
                "gate before its SiLU)")
    return _silu_reason(getattr(experts, "act_fn", None))


# Experts modules that loop over the experts hit (data-dependent shapes, no export) yet hold HF's
# stacked tensors (gate_up_proj [E, 2I, H], down_proj [E, H, I]): class name -> why the routed-rows
# formulation cannot run one ('' when it can).
LOOPED_STACKED = {"Step3p7Experts": _step3p7_reason}


def experts_reason(experts: torch.nn.Module) -> str:
    """'' when the stacked experts module is SwiGLU the routed-rows formulation runs, else why not."""
    from transformers.integrations import moe as hf_moe

    looped = LOOPED_STACKED.get(type(experts).__name__)
    if looped is not None:
        return looped(experts) or ex.fused_layout_ok(experts)
    if not all(hasattr(experts, a) for a in ("gate_up_proj", "down_proj", "has_gate")):
        return f"{type(experts).__name__} is not a transformers stacked-experts module"
    known = ex.known_gate(experts) is not None  # its own gate, biases and row order are computed
    for flag, why in (("has_bias", "expert biases"), ("has_post_expert_norm", "a norm after each expert")):
        if getattr(experts, flag, False) and not (known and flag == "has_bias"):
            return why
    if not experts.has_gate:
        return "ungated experts (no gate_up_proj)"
    if known:
        return ex.fused_layout_ok(experts)
    if not getattr(experts, "is_concatenated", True):
        return "interleaved gate/up rows"
    if getattr(type(experts), "_apply_gate", hf_moe._default_apply_gate) is not hf_moe._default_apply_gate:
        return f"a custom gate ({type(experts).__name__}._apply_gate)"
    return _silu_reason(getattr(experts, "act_fn", None)) or ex.fused_layout_ok(experts)


def routed_experts_forward(self, hidden_states: torch.Tensor, top_k_index: torch.Tensor,
                           top_k_weights: torch.Tensor) -> torch.Tensor:
    """Patched experts: the project's routed-rows formulation on HF's stacked weights."""
    out = ex.routed_experts(hidden_states, top_k_weights.to(hidden_states.dtype), top_k_index.to(torch.int32),
                            self, 0.0, self.experts_formulation)
    return out


def patch_experts(experts: torch.nn.Module) -> str:
    """Run a stacked experts module with the routed-rows formulation; '' when patched, else why not
    (a transformers stacked-experts module left to HF then computes bfloat16 in float32)."""
    why = experts_reason(experts)
    original = getattr(type(experts), "_ascend_original", type(experts))
    if why:
        own_tensors_only = all(next(c.parameters(), None) is None for c in experts.children())
        if hasattr(experts, "has_gate") and own_tensors_only:  # (a norm module after each expert: left as is)
            experts.__class__ = _patched(original, float32_experts_forward)
        return why
    experts.experts_formulation = formulations.DEFAULT
    experts.__class__ = _patched(original, routed_experts_forward)
    return ""


class _Float32View:
    """An experts module seen with its floating tensors widened to float32 (exactly) and its own
    methods bound to the view, so that HF's experts code runs unchanged in float32 on it."""

    def __init__(self, module: torch.nn.Module):
        object.__setattr__(self, "_module", module)

    def __getattr__(self, name: str):
        value = getattr(self._module, name)
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            return value.float()
        if getattr(value, "__self__", None) is self._module and hasattr(value, "__func__"):
            return value.__func__.__get__(self)
        return value


def float32_experts_forward(self, hidden_states: torch.Tensor, *args) -> torch.Tensor:
    """HF's experts (kept: biases, a custom gate, ...) in the project's compute dtype: a bfloat16
    module runs in float32 and its output is rounded once, as the project's blocks compute
    bfloat16 (ONNX Runtime's CPU provider has no bfloat16 MatMul)."""
    forward = self._ascend_original.forward
    dtype = hidden_states.dtype
    compute = layers.compute_dtype(dtype)
    if compute == dtype:
        return forward(self, hidden_states, *args)
    wide = [a.to(compute) if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    out = forward(_Float32View(self), hidden_states.to(compute), *wide)
    return out.to(dtype)


def exportable_experts(model: torch.nn.Module) -> None:
    """HF's experts that stay HF's run with ``batched_mm`` (torch.onnx cannot convert ``grouped_mm``)."""
    for cfg in {id(c): c for c in _configs(model)}.values():
        if getattr(cfg, "_experts_implementation", None) == "grouped_mm":
            cfg._experts_implementation = "batched_mm"


def _configs(model):
    for m in model.modules():
        c = getattr(m, "config", None)
        if c is not None and hasattr(c, "_experts_implementation"):
            yield c
