"""One table row per Hugging Face router behaviour, keyed by the transformers router class.

transformers 5 gives most MoE families one router interface, ``router(hidden) -> (logits,
weights [T, k], indices [T, k])``; the routers differ in a few well-defined ways, each a field of
:class:`RouterRow`. ``ROUTERS`` maps a router class name to its row (``hf.routers`` walks the class's
MRO, so subclasses are found too); ``REFUSED`` names the router classes whose behaviour the op cannot
reproduce, with the reason. A value a row reads from the router (or its config) that the op cannot
reproduce is an :class:`HFConfigError` naming the field.

Needs no transformers: rows are data, the class names are strings.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ascend_moe_onnx.models.hf_routing import HFConfigError
from ascend_moe_onnx.onnx_schemas import moe_gating_top_k_hash as spec

SCORINGS = {"softmax": spec.NORM_SOFTMAX, "sigmoid": spec.NORM_SIGMOID, "sqrtsoftplus": spec.NORM_SQRT_SOFTPLUS}


@dataclass(frozen=True)
class RouterRow:
    """How one router class turns logits into (weights, indices).

    A ``str`` value of ``renorm`` / ``scale`` / ``scoring_field`` names the router attribute (or
    config field) that holds it. Top-k on the logits followed by a softmax over the k is
    ``softmax`` with ``renorm=True`` (the same weights and choice).
    """

    scoring: str = "softmax"  # softmax | sigmoid | sqrtsoftplus
    scoring_field: str | None = None  # a field naming the scoring at run time ("softmax"/"sigmoid"/...)
    renorm: bool | str = False  # weights divided by their sum over the k
    scale: str | None = None  # field of a factor the weights are multiplied by
    bias: str | None = None  # where the selection-only bias lives: a router attribute path or "arg"
    groups: int | None = None  # group_select_mode when the router ranks n_group groups (n_group, topk_group)
    logits_fp32: bool = False  # logits computed in float32 (else the model dtype)
    weights: str = "logits"  # dtype the weights come back in: logits | float32 | hidden
    logit_scale: str | None = None  # field of a factor the logits are multiplied by before scoring
    zero_fields: tuple = ()  # fields the op has no counterpart for: refused unless 0 / None / False


_SOFTMAX_TOPK = RouterRow()
_SOFTMAX_RENORM = RouterRow(renorm=True)
_SOFTMAX_NORM_FIELD = RouterRow(renorm="norm_topk_prob")
_TOPK_SOFTMAX = RouterRow(renorm=True, weights="hidden")  # top-k of logits, softmax over the k
_DEEPSEEK_V3 = RouterRow(scoring="sigmoid", renorm="norm_topk_prob", scale="routed_scaling_factor",
                         bias="e_score_correction_bias", groups=1, logits_fp32=True, weights="float32")
_SOFTMAX_GROUP_MAX_SCALED = RouterRow(scale="routed_scaling_factor", groups=0, logits_fp32=True, weights="float32")
_SIGMOID_BIAS_RENORM = RouterRow(scoring="sigmoid", renorm=True, bias="arg", weights="float32")

# router class name -> row (transformers 5.24; subclasses inherit their base's row).
ROUTERS: dict[str, RouterRow] = {
    # softmax, top-k, always renormalised
    "MixtralTopKRouter": dataclasses.replace(_SOFTMAX_RENORM, weights="float32"),
    "MiniMaxTopKRouter": dataclasses.replace(_SOFTMAX_RENORM, weights="float32"),
    "Qwen3_5MoeTopKRouter": _SOFTMAX_RENORM,
    "Qwen3VLMoeTextTopKRouter": _SOFTMAX_RENORM,
    "Qwen3OmniMoeTextTopKRouter": _SOFTMAX_RENORM,
    "HunYuanMoEV1Gate": RouterRow(renorm=True, logits_fp32=True),
    # softmax, top-k, renormalised when norm_topk_prob
    "Qwen2MoeTopKRouter": _SOFTMAX_NORM_FIELD,
    "Qwen3MoeTopKRouter": _SOFTMAX_NORM_FIELD,
    "Qwen3NextTopKRouter": _SOFTMAX_NORM_FIELD,
    "Qwen3OmniMoeThinkerTextTopKRouter": _SOFTMAX_NORM_FIELD,
    "Qwen3OmniMoeTalkerTextTopKRouter": _SOFTMAX_NORM_FIELD,
    "Qwen4ExpTextTopKRouter": _SOFTMAX_NORM_FIELD,
    "OlmoeTopKRouter": _SOFTMAX_NORM_FIELD,
    "FlexOlmoTopKRouter": _SOFTMAX_NORM_FIELD,
    "MellumTopKRouter": _SOFTMAX_NORM_FIELD,
    # softmax, top-k, never renormalised
    "JambaTopKRouter": RouterRow(weights="hidden"),
    # top-k on the logits, softmax over the k (gpt-oss with a router bias)
    "GptOssTopKRouter": RouterRow(renorm=True),
    "GraniteMoeTopKRouter": _TOPK_SOFTMAX,
    "GraniteMoeSharedTopKRouter": _TOPK_SOFTMAX,
    "GraniteMoeHybridTopKRouter": _TOPK_SOFTMAX,
    "GraniteMoeSWATopKRouter": _TOPK_SOFTMAX,
    "AriaTextTopKRouter": _TOPK_SOFTMAX,
    # top-k on the logits, then softmax or sigmoid (+ renorm) over the k, by a config field
    "Cohere2MoeTopKRouter": RouterRow(scoring_field="expert_selection_fn", renorm=True, weights="hidden"),
    # softmax, bias for selection, renormalised (ERNIE-4.5: the bias in moe_statics)
    "Ernie4_5_MoeTopKRouter": RouterRow(renorm=True, bias="moe_statics.e_score_correction_bias",
                                        logits_fp32=True, weights="hidden"),
    # softmax, bias for selection, not renormalised, scaled (LongCat-Flash)
    "LongcatFlashTopkRouter": RouterRow(scale="routed_scaling_factor", bias="e_score_correction_bias",
                                        logits_fp32=True),
    # sigmoid, bias for selection passed by the block, renormalised
    "MiniMaxM2TopKRouter": _SIGMOID_BIAS_RENORM,
    "HYV3TopKRouter": dataclasses.replace(_SIGMOID_BIAS_RENORM, scale="router_scaling_factor", logits_fp32=True),
    "AfmoeTokenChoiceRouter": dataclasses.replace(_SIGMOID_BIAS_RENORM, scale="route_scale", logits_fp32=True),
    # the DeepSeek-V3 router: sigmoid, bias, top-2-sum groups, norm_topk_prob, scaled
    "DeepseekV3TopkRouter": _DEEPSEEK_V3,
    "DeepseekV32TopkRouter": _DEEPSEEK_V3,
    "Glm4MoeTopkRouter": _DEEPSEEK_V3,
    "Glm4MoeLiteTopkRouter": _DEEPSEEK_V3,
    "Glm4vMoeTextTopkRouter": _DEEPSEEK_V3,
    "GlmMoeDsaTopkRouter": _DEEPSEEK_V3,
    "Dots1TopkRouter": _DEEPSEEK_V3,
    "Mistral4TopkRouter": _DEEPSEEK_V3,
    "SolarOpenTopkRouter": _DEEPSEEK_V3,
    "ExaoneMoeTopkRouter": _DEEPSEEK_V3,
    "MiMoV2FlashTopkRouter": _DEEPSEEK_V3,
    "AXK1TopkRouter": _DEEPSEEK_V3,
    "AXK2TopkRouter": _DEEPSEEK_V3,
    "KimiLinearTopkRouter": _DEEPSEEK_V3,
    "NemotronHTopkRouter": _DEEPSEEK_V3,
    "BailingHybridTopkRouter": _DEEPSEEK_V3,
    "Glm5NextTextTopkRouter": _DEEPSEEK_V3,
    "Dots3NoteTextTopkRouter": _DEEPSEEK_V3,
    "BeamTopKRouter": _DEEPSEEK_V3,
    "HYV4TopkRouter": _DEEPSEEK_V3,
    "HYV4VLTopkRouter": _DEEPSEEK_V3,
    # DeepSeek-V2-like: float32 softmax, group max (group_limited_greedy), not renormalised, scaled
    "UnlimitedOcrTextTopkRouter": _SOFTMAX_GROUP_MAX_SCALED,
    "DeepseekOcr2TextTopkRouter": _SOFTMAX_GROUP_MAX_SCALED,
    # sigmoid, top-k, renormalised when norm_topk_prob (a block-held selection bias for LFM2-MoE)
    "FlintTopKRouter": RouterRow(scoring="sigmoid", renorm="norm_topk_prob", weights="hidden"),
    "Lfm2MoeTopKRouter": RouterRow(scoring="sigmoid", renorm="norm_topk_prob", scale="routed_scaling_factor",
                                   bias="arg", weights="float32"),
    "Step3p7TopKRouter": RouterRow(scoring="sigmoid", renorm=True, bias="e_score_correction_bias",
                                   weights="float32"),
    "Ernie4_5_VLMoeMoeTopKRouter": RouterRow(renorm=True, bias="moe_statics.e_score_correction_bias",
                                             logits_fp32=True, weights="hidden"),
    "OpenAIPrivacyFilterTopKRouter": RouterRow(renorm=True, logits_fp32=True, weights="float32"),
    # softmax, top-2-sum groups without bias, always renormalised, scaled (Mistral-Large-4)
    "MistralLarge4TextTopkRouter": RouterRow(renorm=True, scale="routed_scaling_factor", groups=1,
                                             logits_fp32=True, weights="float32"),
    # sigmoid, bias for selection (router's own), renormalised (and scaled)
    "MiniMaxM3VLTopKRouter": RouterRow(scoring="sigmoid", renorm=True, bias="e_score_correction_bias",
                                       weights="float32"),
    "LagunaTopKRouter": RouterRow(scoring="sigmoid", renorm=True, bias="e_score_correction_bias",
                                  logits_fp32=True, weights="hidden", zero_fields=("router_logit_softcapping",)),
    "Inkling2TopKRouter": RouterRow(scoring_field="scoring_func", renorm=True, scale="routed_scaling_factor",
                                    bias="e_score_correction_bias", logits_fp32=True, weights="float32"),
    "MuseSparkTopkRouter": RouterRow(scoring="sigmoid", renorm=True, scale="routed_scaling_factor",
                                     bias="e_score_correction_bias", logits_fp32=True, weights="float32",
                                     logit_scale="output_multiplier"),
    # softmax in float32, top-k, renormalised when norm_topk_prob, weights in the hidden dtype
    "LaraMiniTopKRouter": RouterRow(renorm="norm_topk_prob", logits_fp32=True, weights="hidden"),
}

# router class name -> why the op cannot reproduce it (the layer exports unfused).
REFUSED: dict[str, str] = {
    "PhimoeTopKRouter": "sparsemixer routing (each pick masks the logits by a jitter threshold and "
                        "softmaxes the rest), which MoeGatingTopKHash has no mode for",
    "ZayaRouter": "an MLP router over recurrent router states with probability-space balancing biases",
    "Gemma4TextRouter": "a normalised, rescaled router input and per-expert output scales (per_expert_scale)",
    "DiffusionGemmaTextRouter": "a normalised, rescaled router input and per-expert output scales (per_expert_scale)",
    "InklingTopkRouter": "shared experts' logits joined to the chosen ones' log-sigmoid normalisation",
    "Kolibri1TopKRouter": "selection bias added to the logits before the sigmoid (the op adds it to the scores)",
}


def row_for(class_names: Iterable[str]) -> tuple[str, RouterRow | None, str]:
    """(matched class name, row or None, refusal reason) for a router's class and base names (MRO order)."""
    for name in class_names:
        if name in ROUTERS:
            return name, ROUTERS[name], ""
        if name in REFUSED:
            return name, None, REFUSED[name]
    return "", None, ""


def scoring_of(row: RouterRow, read: Callable[[str], Any]) -> int:
    """The op's norm_type for a row; ``read(field)`` reads a router/config field."""
    scoring = row.scoring
    if row.scoring_field is not None:
        scoring = read(row.scoring_field)
    if scoring not in SCORINGS:
        field = row.scoring_field or "scoring"
        raise HFConfigError(f"{field}={scoring!r}: MoeGatingTopKHash scores with {', '.join(SCORINGS)} only")
    return SCORINGS[scoring]
