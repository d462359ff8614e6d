"""MoeGatingTopKHash attributes from a Hugging Face config, one function per architecture (used by
the presets, the checkpoint loader and ``hf``; it needs no transformers, so it lives below ``hf``).

Each function reads the config fields the architecture's transformers router reads, with the same
defaults, and returns a :class:`Routing`: the op's attributes plus how the model computes its
router logits and weights. A field whose value the op (or the project's expert path) cannot
reproduce is an :class:`HFConfigError` naming the field and the value, never a silent difference.

The functions take a ``transformers`` config object or a plain ``config.json`` dict (transformers
is optional): both give the same answer, ``DEFAULTS`` holds the config classes' defaults for the
fields read here (a test checks them against transformers).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any

from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec


class HFConfigError(ValueError):
    """A Hugging Face config the fused router cannot reproduce (message names field and value)."""


@dataclass(frozen=True)
class Routing:
    """How one architecture routes: the op's attributes and the dtype rules around it."""

    model_type: str
    experts: int
    top_k: int
    # the op's attributes: defaults from the schema
    norm_type: int = spec.DEFAULTS["norm_type"]
    renorm: int = spec.DEFAULTS["renorm"]
    group_count: int = spec.DEFAULTS["group_count"]
    k_group: int = spec.DEFAULTS["k_group"]
    group_select_mode: int = spec.DEFAULTS["group_select_mode"]
    routed_scaling_factor: float = spec.DEFAULTS["routed_scaling_factor"]
    bias: bool = False  # e_score_correction_bias steers selection
    hash_layers: tuple = ()  # layer indices routed by tid2eid[input_ids]
    logits_fp32: bool = True  # router logits F.linear in float32 (else in the model dtype)
    weights_fp32: bool = True  # routing weights stay float32 (else cast to the logits dtype)
    # Sigmoid/sqrt-softplus routers that do not renormalise: the op always renormalises those
    # scores, so the weights are gathered from its normalised scores (out_flag=1) instead.
    weights_from_scores: bool = False
    swiglu_limit: float = 0.0  # expert clamp (DeepSeek-V4)
    shared: str = ""  # "", "plain" (added) or "gated" (Qwen2-MoE: sigmoid(shared_expert_gate) *)

    def op_attributes(self) -> dict:
        """Keyword attributes of ``torch.ops.custom.npu_moe_gating_top_k`` (k passed separately)."""
        return dict(k_group=self.k_group, group_count=self.group_count,
                    group_select_mode=self.group_select_mode, renorm=self.renorm,
                    norm_type=self.norm_type, routed_scaling_factor=self.routed_scaling_factor,
                    out_flag=self.weights_from_scores)

    def replace(self, **changes: Any) -> Routing:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


# Defaults of the transformers config classes for the fields read below (tests compare them).
DEFAULTS: dict[str, dict[str, Any]] = {
    "deepseek_v2": dict(topk_method="greedy", n_group=None, topk_group=None, routed_scaling_factor=1.0,
                        hidden_act="silu", n_shared_experts=2, n_routed_experts=64,
                        num_experts_per_tok=None, norm_topk_prob=False),
    "deepseek_v3": dict(n_group=8, topk_group=4, norm_topk_prob=True, routed_scaling_factor=2.5,
                        hidden_act="silu", n_shared_experts=1, n_routed_experts=256, num_experts_per_tok=8),
    "glm4_moe": dict(n_group=1, topk_group=1, norm_topk_prob=True, routed_scaling_factor=1.0,
                     hidden_act="silu", n_shared_experts=1, n_routed_experts=128, num_experts_per_tok=8),
    "qwen3_moe": dict(norm_topk_prob=False, hidden_act="silu", num_experts=128, num_experts_per_tok=8),
    "qwen2_moe": dict(norm_topk_prob=False, hidden_act="silu", num_experts=60, num_experts_per_tok=4),
    "mixtral": dict(hidden_act="silu", num_local_experts=8, num_experts_per_tok=2),
    "deepseek_v4": dict(scoring_func="sqrtsoftplus", routed_scaling_factor=1.5, hidden_act="silu",
                        swiglu_limit=10.0, n_routed_experts=256, num_experts_per_tok=6,
                        n_shared_experts=1, num_hidden_layers=43),
}
DEFAULT_HASH_LAYERS = 3  # DeepseekV4Config.default_num_hash_layers
# An HF config: a transformers PretrainedConfig or its config.json dict (fields read by name).
Config = Any
# Config files that name another architecture's modelling code.
ALIASES = {"kimi_k2": "deepseek_v3"}


class _Fields:
    """Reads config fields from a transformers config or a config.json dict, with defaults."""

    def __init__(self, config, model_type: str):
        self.config, self.model_type = config, model_type
        self.defaults = DEFAULTS[model_type]

    def __call__(self, name: str, *aliases: str):
        for key in (name, *aliases):
            if isinstance(self.config, dict):
                if key in self.config:
                    return self.config[key]
            elif hasattr(self.config, key):
                return getattr(self.config, key)
        return self.defaults.get(name)

    def error(self, field: str, value, why: str) -> HFConfigError:
        return HFConfigError(f"{self.model_type} config: {field}={value!r}: {why}")


def _int_field(f: _Fields, name: str, *aliases: str, minimum: int = 1) -> int:
    value = f(name, *aliases)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise f.error(name, value, f"must be an integer >= {minimum}")
    return value


def _scale(f: _Fields) -> float:
    value = f("routed_scaling_factor")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise f.error("routed_scaling_factor", value, "must be a finite number")
    return float(value)


def _silu(f: _Fields) -> None:
    act = f("hidden_act")
    if act not in ("silu", "swish"):
        raise f.error("hidden_act", act, "the expert path is SwiGLU with SiLU; no other activation")


def _experts_and_k(f: _Fields, experts_field: str, *aliases: str) -> tuple[int, int]:
    experts = _int_field(f, experts_field, *aliases)
    top_k = _int_field(f, "num_experts_per_tok")
    if experts > spec.MAX_EXPERTS:
        raise f.error(experts_field, experts, f"MoeGatingTopKHash takes at most {spec.MAX_EXPERTS} experts")
    if top_k > min(spec.MAX_K, experts):
        raise f.error("num_experts_per_tok", top_k,
                      f"MoeGatingTopKHash takes 1 <= k <= min({spec.MAX_K}, experts={experts})")
    return experts, top_k


def _groups(f: _Fields, experts: int, top_k: int, mode: int) -> dict:
    """n_group / topk_group as the op's grouping attributes (the routers view E as n_group blocks)."""
    n_group = _int_field(f, "n_group")
    topk_group = _int_field(f, "topk_group")
    if experts % n_group:
        raise f.error("n_group", n_group, f"must divide the expert count {experts}")
    if topk_group > n_group:
        raise f.error("topk_group", topk_group, f"must be <= n_group={n_group}")
    size = experts // n_group
    if mode == 1 and size < 2:
        raise f.error("n_group", n_group, f"groups of {size} expert: the top-2 group score needs >= 2")
    if top_k > topk_group * size:
        raise f.error("num_experts_per_tok", top_k,
                      f"more than the {topk_group * size} experts of the kept groups (topk_group={topk_group})")
    # One group is no grouping: the score mode is then irrelevant, 0 is the op's default.
    return dict(group_count=n_group, k_group=topk_group, group_select_mode=mode if n_group > 1 else 0)


def deepseek_v2(config: Config) -> Routing:
    """DeepSeek-V2: float32 softmax; ``greedy`` or ``group_limited_greedy`` (group max); never
    renormalised (the V2 router ignores ``norm_topk_prob``); times ``routed_scaling_factor``."""
    f = _Fields(config, "deepseek_v2")
    _silu(f)
    experts, top_k = _experts_and_k(f, "n_routed_experts", "num_experts")
    method = f("topk_method")
    if method == "greedy":
        groups = {}
    elif method == "group_limited_greedy":
        groups = _groups(f, experts, top_k, mode=0)
    else:
        raise f.error("topk_method", method, "the DeepSeek-V2 router knows 'greedy' and 'group_limited_greedy'")
    return Routing("deepseek_v2", experts, top_k, norm_type=spec.NORM_SOFTMAX, renorm=0,
                   routed_scaling_factor=_scale(f), shared="plain", **groups)


def _sigmoid_grouped(config, model_type: str) -> Routing:
    f = _Fields(config, model_type)
    _silu(f)
    experts, top_k = _experts_and_k(f, "n_routed_experts", "num_local_experts")
    groups = _groups(f, experts, top_k, mode=1)
    renormalise = bool(f("norm_topk_prob"))
    return Routing(model_type, experts, top_k, norm_type=spec.NORM_SIGMOID, bias=True,
                   routed_scaling_factor=_scale(f), weights_from_scores=not renormalise,
                   shared="plain", **groups)


def deepseek_v3(config: Config) -> Routing:
    """DeepSeek-V3 / R1 and Kimi-K2: float32 sigmoid + ``e_score_correction_bias``; groups ranked by
    the sum of their two best biased scores (whatever ``n_group``); renormalised only when
    ``norm_topk_prob``; times ``routed_scaling_factor``."""
    return _sigmoid_grouped(config, "deepseek_v3")


def glm4_moe(config: Config) -> Routing:
    """GLM-4.5 / 4.6: the DeepSeek-V3 router (sigmoid, bias, top-2-sum groups, ``norm_topk_prob``)."""
    return _sigmoid_grouped(config, "glm4_moe")


def _softmax_topk(config, model_type: str, experts_field: str, renorm: bool | None, shared: str) -> Routing:
    f = _Fields(config, model_type)
    _silu(f)
    experts, top_k = _experts_and_k(f, experts_field, "num_local_experts", "num_experts")
    if renorm is None:
        renorm = bool(f("norm_topk_prob"))
    # Qwen: weights cast back to the logits' dtype; Mixtral keeps them float32.
    return Routing(model_type, experts, top_k, norm_type=spec.NORM_SOFTMAX, renorm=int(renorm),
                   logits_fp32=False, weights_fp32=model_type == "mixtral", shared=shared)


def qwen3_moe(config: Config) -> Routing:
    """Qwen3-MoE: logits in the model dtype, float32 softmax, top-k, renormalised when
    ``norm_topk_prob``, weights cast to the logits' dtype."""
    return _softmax_topk(config, "qwen3_moe", "num_experts", None, "")


def qwen2_moe(config: Config) -> Routing:
    """Qwen2-MoE: the Qwen3-MoE router plus a shared expert scaled by ``sigmoid(shared_expert_gate)``."""
    return _softmax_topk(config, "qwen2_moe", "num_experts", None, "gated")


def mixtral(config: Config) -> Routing:
    """Mixtral: logits in the model dtype, float32 softmax, top-k, always renormalised, float32 weights."""
    return _softmax_topk(config, "mixtral", "num_local_experts", True, "")


_V4_SCORING = {"sqrtsoftplus": spec.NORM_SQRT_SOFTPLUS, "sigmoid": spec.NORM_SIGMOID}


def deepseek_v4(config: Config) -> Routing:
    """DeepSeek-V4: ``scoring_func`` (sqrt-softplus or sigmoid) on logits in the model dtype, bias
    for selection, always renormalised, times ``routed_scaling_factor``; ``hash_moe`` layers look
    their experts up in ``tid2eid``; SwiGLU experts clamped at ``swiglu_limit``."""
    f = _Fields(config, "deepseek_v4")
    _silu(f)
    experts, top_k = _experts_and_k(f, "n_routed_experts", "num_local_experts")
    scoring = f("scoring_func")
    if scoring not in _V4_SCORING:
        raise f.error("scoring_func", scoring, f"MoeGatingTopKHash normalises with {', '.join(_V4_SCORING)} only")
    limit = f("swiglu_limit")
    if isinstance(limit, bool) or not isinstance(limit, (int, float)) or not limit > 0 or not math.isfinite(limit):
        raise f.error("swiglu_limit", limit, "the expert path clamps at a positive finite limit only")
    kinds = f("mlp_layer_types")
    if kinds is None:  # the config class's rule: the first num_hash_layers (3) layers are hash layers
        layers, n_hash = _int_field(f, "num_hidden_layers"), f("num_hash_layers")
        n_hash = DEFAULT_HASH_LAYERS if n_hash is None else n_hash
        kinds = ["hash_moe"] * min(layers, n_hash) + ["moe"] * max(0, layers - n_hash)
    unknown = sorted({k for k in kinds if k not in ("moe", "hash_moe")})
    if unknown:
        raise f.error("mlp_layer_types", unknown, "layer kinds other than 'moe' and 'hash_moe'")
    return Routing("deepseek_v4", experts, top_k, norm_type=_V4_SCORING[scoring], bias=True,
                   routed_scaling_factor=_scale(f), logits_fp32=False, weights_fp32=False,
                   hash_layers=tuple(i for i, k in enumerate(kinds) if k == "hash_moe"),
                   swiglu_limit=float(limit), shared="plain")


ARCHITECTURES = {
    "deepseek_v2": deepseek_v2,
    "deepseek_v3": deepseek_v3,
    "glm4_moe": glm4_moe,
    "qwen3_moe": qwen3_moe,
    "qwen2_moe": qwen2_moe,
    "mixtral": mixtral,
    "deepseek_v4": deepseek_v4,
}


def model_type_of(config: Config) -> str:
    """The architecture a config names (``text_config`` of a multimodal config; aliases resolved)."""
    if isinstance(config, dict):
        config = config.get("text_config") or config
        model_type = config.get("model_type")
    else:
        config = getattr(config, "text_config", None) or config
        model_type = getattr(config, "model_type", None)
    return ALIASES.get(model_type, model_type)


def routing(config: Config) -> Routing:
    """The Routing of any supported config (dict or transformers config); HFConfigError otherwise."""
    model_type = model_type_of(config)
    if isinstance(config, dict):
        config = config.get("text_config") or config
    else:
        config = getattr(config, "text_config", None) or config
    if model_type not in ARCHITECTURES:
        raise HFConfigError(f"config: model_type={model_type!r} has no fused-router mapping "
                            f"(supported: {', '.join(ARCHITECTURES)}, kimi_k2)")
    return ARCHITECTURES[model_type](config)
