"""``patch(model)``: route every supported Hugging Face MoE block with MoeGatingTopKHash.

A patched block keeps its modules and weights; only its class changes, to a subclass whose
``forward`` computes the router logits as the HF router does, calls
``torch.ops.custom.npu_moe_gating_top_k`` once with the attributes ``configs.py`` derives from the
config, runs the experts with the project's formulation (``experts.routed_experts``) and adds the
shared expert(s) as HF does. ``unpatch`` restores the HF classes.
"""

from __future__ import annotations

import sys
from types import SimpleNamespace
from typing import cast

import torch
import torch.nn.functional as F

from ascend_moe_onnx import exporters  # noqa: F401  (defines torch.ops.custom.npu_moe_gating_top_k)
from ascend_moe_onnx.models import experts as routed
from ascend_moe_onnx.models import layers
from ascend_moe_onnx.models.hf_routing import ARCHITECTURES, HFConfigError, Routing

from . import blocks, routers
from . import experts as ex

# model_type -> HF class names of its MoE blocks.
BLOCK_CLASSES = {
    "deepseek_v2": ("DeepseekV2Moe",),
    "deepseek_v3": ("DeepseekV3MoE",),
    "glm4_moe": ("Glm4MoeMoE",),
    "qwen3_moe": ("Qwen3MoeSparseMoeBlock",),
    "qwen2_moe": ("Qwen2MoeSparseMoeBlock",),
    "mixtral": ("MixtralSparseMoeBlock",),
    "deepseek_v4": ("DeepseekV4SparseMoeBlock",),
}
_PATCHED: dict[type, type] = {}


def router_logits(gate: torch.nn.Module, x: torch.Tensor, r: Routing) -> torch.Tensor:
    """Router logits [T, E] with HF's dtype rule: float32 ``F.linear`` or in the model dtype
    (bfloat16 computed in float32 and rounded, as the project's blocks do)."""
    weight = cast(torch.Tensor, gate.weight)
    if r.logits_fp32:
        return F.linear(x.float(), weight.float())
    compute = layers.compute_dtype(x.dtype)
    w = weight.to(compute)
    logits = torch.matmul(x.to(compute), w.transpose(0, 1))
    return layers.rounded(logits, x.dtype).to(x.dtype)


def route(gate: torch.nn.Module, logits: torch.Tensor, r: Routing,
          input_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """One fused routing call -> (weights [T, k] in HF's dtype, expert_idx [T, k] int32)."""
    tid2eid = getattr(gate, "tid2eid", None)
    hashed = tid2eid is not None
    bias = getattr(gate, "e_score_correction_bias", None) if r.bias and not hashed else None
    # The op takes bias in the logits' type: widen (exactly) when HF adds a float32 bias.
    x = logits.float() if (r.weights_fp32 or bias is not None) else logits
    kw = {}
    if bias is not None:
        kw["bias"] = bias.float()
    if hashed:
        if input_ids is None:
            raise ValueError("a DeepSeek-V4 hash layer needs input_ids (the model passes them to its MoE blocks)")
        kw.update(input_ids=input_ids.reshape(-1), tid2eid=tid2eid)
    y, idx, scores = torch.ops.custom.npu_moe_gating_top_k(x, r.top_k, **kw, **r.op_attributes())
    if r.weights_from_scores:  # HF does not renormalise these scores: weights straight from them
        y = scores.gather(1, idx.long()) * r.routed_scaling_factor
    return (y if r.weights_fp32 else y.to(logits.dtype)), idx


def _shared(block: torch.nn.Module, x: torch.Tensor, r: Routing | SimpleNamespace):
    """The block's shared expert on ``x`` in the project's compute dtype (rounded), or None."""
    if r.shared == "plain":
        mlp = cast(torch.nn.Module, block.shared_experts)
        return ex.swiglu_mlp(x, mlp, r.swiglu_limit) if ex.plain_mlp(mlp) else mlp(x)
    if r.shared == "gated":
        mlp = cast(torch.nn.Module, block.shared_expert)
        out = ex.swiglu_mlp(x, mlp) if ex.plain_mlp(mlp) else mlp(x)
        compute = layers.compute_dtype(x.dtype)
        gate_weight = cast(torch.nn.Linear, block.shared_expert_gate).weight
        g = torch.matmul(x.to(compute), gate_weight.to(compute).transpose(0, 1))
        g = layers.rounded(torch.sigmoid(layers.rounded(g, x.dtype)), x.dtype)
        return layers.rounded(g * out.to(compute), x.dtype).to(x.dtype)
    return None


def logits_forward(self, hidden_states: torch.Tensor) -> tuple[torch.Tensor]:
    """Patched router forward: ``(router logits [T, E],)``, the first output of HF's router.

    The block calls its router module (rather than computing the logits beside it) so that the
    router's forward hooks still see them: transformers records the router logits
    (``output_router_logits``, the auxiliary loss) with a hook on output 0 of the router."""
    return (router_logits(self, hidden_states.reshape(-1, hidden_states.shape[-1]), self._ascend_router_routing),)


def fused_forward(self, hidden_states: torch.Tensor, input_ids: torch.Tensor | None = None):
    """Patched MoE block forward: HF router logits -> MoeGatingTopKHash -> project experts."""
    r: Routing = self._ascend_routing
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    (logits,) = self.gate(x)
    w, idx = route(self.gate, logits, r, input_ids)
    # The plain shared expert runs inside the experts' call where the formulation can (models.experts).
    fold = r.shared == "plain" and ex.folds_shared(self.experts_formulation, self.shared_experts)
    out = ex.routed_experts(x, w, idx, self.experts, r.swiglu_limit, self.experts_formulation,
                            self.shared_experts if fold else None)
    shared = None if fold else _shared(self, x, r)
    return _plus(out, shared).reshape(shape)


def _plus(out: torch.Tensor, shared: torch.Tensor | None) -> torch.Tensor:
    """``out + shared`` added in the compute dtype, rounded once (no bfloat16 Add on ORT's CPU)."""
    if shared is None:
        return out
    compute = layers.compute_dtype(out.dtype)
    return layers.rounded(out.to(compute) + shared.to(compute), out.dtype).to(out.dtype)


# Router-table blocks (HF's forward: routed experts + shared expert) whose forward is replaced once
# their router and experts are patched: block class -> how the shared expert is added, "plain"
# (shared_experts) or "gated" (shared_expert x sigmoid(shared_expert_gate(x)), Qwen2-MoE's rule).
# The plain one runs inside the experts' call where the formulation can (models.experts.folds_shared),
# a gated one in the compute dtype (its sigmoid gate scales the shared expert's output per token, which
# the fused call has no slot weight for); either way no bfloat16 Linear / Add is left to ORT's CPU.
SHARED_BLOCKS = {"Ernie4_5_MoeSparseMoeBlock": "plain", "Dots1MoE": "plain",
                 "Qwen3NextSparseMoeBlock": "gated", "Qwen3_5MoeSparseMoeBlock": "gated"}


def table_shared_forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
    """A SHARED_BLOCKS block: patched router -> routed rows (+ the shared expert)."""
    shape = hidden_states.shape
    x = hidden_states.reshape(-1, shape[-1])
    _, w, idx = self.gate(x)
    r = SimpleNamespace(shared=self._ascend_shared, swiglu_limit=0.0)
    formulation = self.experts.experts_formulation
    fold = r.shared == "plain" and ex.folds_shared(formulation, self.shared_experts)
    out = ex.routed_experts(x, w.to(x.dtype), idx.to(torch.int32), self.experts, 0.0, formulation,
                            self.shared_experts if fold else None)
    return _plus(out, None if fold else _shared(self, x, r)).reshape(shape)


def _shared_kind(block: torch.nn.Module) -> str:
    """The SHARED_BLOCKS kind of a block whose shared expert ``table_shared_forward`` can run, else ''."""
    kind = next((SHARED_BLOCKS[n] for n in routers.class_names(block) if n in SHARED_BLOCKS), "")
    mlp = getattr(block, "shared_experts" if kind == "plain" else "shared_expert", None)
    if not kind or not isinstance(mlp, torch.nn.Module) or not ex.plain_mlp(mlp):
        return ""
    gate = getattr(block, "shared_expert_gate", None)
    if kind == "gated" and not (isinstance(gate, torch.nn.Linear) and gate.bias is None):
        return ""
    return kind


def _patched_class(cls: type, forward=fused_forward) -> type:
    if cls not in _PATCHED:
        _PATCHED[cls] = type(f"Ascend{cls.__name__}", (cls,), {"forward": forward, "_ascend_original": cls})
    return _PATCHED[cls]


def _unsupported_reason(block: torch.nn.Module) -> str:
    gate = getattr(block, "gate", None)
    if gate is None or not isinstance(getattr(gate, "weight", None), torch.Tensor):
        return "no gate.weight router"
    if getattr(gate, "bias", None) is not None and isinstance(gate.bias, torch.Tensor):
        return "router with a bias"
    if not hasattr(block, "experts"):
        return "no experts module"
    return ex.fused_layout_ok(cast(torch.nn.Module, block.experts))


def _is_moe_block(module: torch.nn.Module) -> bool:
    return hasattr(module, "experts") and isinstance(module.experts, torch.nn.Module) and (
        hasattr(module, "gate") or hasattr(module, "router"))


def patch_block(block: torch.nn.Module, r: Routing) -> None:
    """Route one HF MoE block with the fused op (its class must be in ``BLOCK_CLASSES``)."""
    original = getattr(type(block), "_ascend_original", type(block))
    why = _unsupported_reason(block)
    if why:
        raise ValueError(f"{original.__name__}: cannot patch ({why})")
    block._ascend_routing = r
    # models.experts.using() / exporters.export(experts=...) switch it per export.
    block.experts_formulation = routed.DEFAULT
    block.__class__ = _patched_class(original)
    gate = cast(torch.nn.Module, block.gate)
    gate._ascend_router_routing = r  # not _ascend_routing: that attribute marks the patched blocks
    gate.__class__ = _patched_class(getattr(type(gate), "_ascend_original", type(gate)), logits_forward)


def _block_model_type(block: torch.nn.Module) -> str:
    """The BLOCK_CLASSES architecture of a block's class or one of its bases ('' when none)."""
    for name in routers.class_names(block):
        for model_type, names in BLOCK_CLASSES.items():
            if name in names:
                return model_type
    return ""


def _router_of(block: torch.nn.Module):
    for name in ("gate", "router"):
        m = getattr(block, name, None)
        if isinstance(m, torch.nn.Module):
            return m
    return None


def _patch_generic(block: torch.nn.Module, config) -> tuple[str, str]:
    """Router by its table row, experts by the routed-rows formulation -> (status, note)."""
    if not isinstance(getattr(block, "experts", None), torch.nn.Module):
        return "unfused", f"{type(block).__name__} has no experts module (not a transformers 5 MoE block)"
    try:
        if blocks.patch_block(block, routers.class_names(block)) is not None:
            return "fused", ""
    except HFConfigError as e:
        return "unfused", str(e)
    router = _router_of(block)
    try:
        why_router = "no gate / router module" if router is None else routers.patch_router(router, block, config)
    except HFConfigError as e:
        why_router = str(e)
    why_experts = routers.patch_experts(cast(torch.nn.Module, block.experts))
    experts = "HF experts (batched_mm): " + why_experts if why_experts else "routed-rows experts"
    if why_router:
        return "unfused", f"{why_router}; {experts}"
    kind = "" if why_experts else _shared_kind(block)
    if kind:
        block._ascend_shared = kind  # type: ignore[assignment]  # torch's stub: Module attributes are tensors or modules
        block.__class__ = _patched_class(getattr(type(block), "_ascend_original", type(block)), table_shared_forward)
    return "fused", "" if not why_experts else experts


_MOE_CLASS_ENDINGS = ("MoE", "Moe", "MoeBlock", "MoEBlock", "MoELayer")


def _is_moe_layer(module: torch.nn.Module) -> bool:
    """A module with an experts child (or a class named like an MoE block) that is not itself experts."""
    if "Attention" in type(module).__name__:  # JetMoE's mixture of attention heads is not an MoE FFN
        return False
    experts = getattr(module, "experts", None)
    if isinstance(experts, torch.nn.Module):
        return not isinstance(getattr(experts, "experts", None), torch.nn.Module)
    if not type(module).__name__.endswith(_MOE_CLASS_ENDINGS) or hasattr(module, "gate_up_proj"):
        return False
    # a wrapper of MoE blocks (ERNIE-4.5-VL's text and vision MoE) is not an MoE layer itself
    return not any(isinstance(getattr(c, "experts", None), torch.nn.Module) for c in module.children())


def patch(model: torch.nn.Module, *, quiet: bool = False) -> list[str]:
    """Route every supported MoE block of an HF model with the fused op, in place.

    Blocks of the ``BLOCK_CLASSES`` architectures (or subclasses) get the block-level patch; every
    other transformers 5 MoE block gets its router patched by its table row
    (``hf.router_rows``) and its stacked experts by the routed-rows formulation
    (``hf.routers``). Returns the names of the MoE blocks whose router is fused. A block left
    unfused gets one line on stderr (unless ``quiet``); ``layer_status(model)`` lists them all.
    Raises HFConfigError when the config asks for routing the op cannot reproduce.
    """
    config = getattr(model, "config", None)
    if config is None:
        raise ValueError("patch: the model has no .config (expected a transformers PreTrainedModel)")
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    patched, notes = [], []
    for name, module in model.named_modules():
        if getattr(module, "_ascend_status", None) is not None:
            patched += [name] if module._ascend_status == "fused" else []
            continue
        if not _is_moe_layer(module):
            continue
        model_type = _block_model_type(module)
        if model_type:
            why = _unsupported_reason(module)
            if why:
                status, note = "unfused", f"{type(module).__name__} ({why})"
            else:
                # by the block's class: configs of other model types using these classes (sarvam_*)
                patch_block(module, ARCHITECTURES[model_type](getattr(module, "config", None) or text))
                status, note = "fused", ""
        else:
            status, note = _patch_generic(module, getattr(module, "config", None) or text)
        module._ascend_status, module._ascend_note = status, note
        if status == "fused":
            patched.append(name)
        if note:
            notes.append(f"{name}: {status}: {note}")
    routers.exportable_experts(model)
    if not quiet:
        for line in notes:
            print(f"ascend_moe_onnx.hf: {line}", file=sys.stderr)
    return patched


def layer_status(model: torch.nn.Module) -> dict[str, tuple[str, str]]:
    """{module name: (fused | unfused, note)} of every MoE block ``patch`` has seen."""
    return {n: (m._ascend_status, m._ascend_note) for n, m in model.named_modules()
            if getattr(m, "_ascend_status", None) is not None}


def unpatch(model: torch.nn.Module) -> int:
    """Restore the HF classes of every patched block; returns how many were restored."""
    count = 0
    for module in model.modules():
        for attr in ("_ascend_status", "_ascend_note", "_ascend_row", "_ascend_shared", "experts_formulation"):
            if attr in vars(module):
                delattr(module, attr)
        original = getattr(type(module), "_ascend_original", None)
        if original is not None and type(module) is not original:
            module.__class__ = original
            if "_ascend_router_routing" in vars(module):  # the router of a patched block: counted with it
                del module._ascend_router_routing
                continue
            if "_ascend_routing" in vars(module):
                del module._ascend_routing
            count += 1
    return count
