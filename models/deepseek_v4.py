"""DeepSeek-V4 MoE blocks: sqrt-softplus router, hash layers, image-token routing.

- Normal layers: ``s = sqrt(softplus(logits))`` (float32 logits), ``e_score_correction_bias`` for
  selection, top-k, weights ``s[idx] / sum * route_scale``.
- Hash layers (the first ``num_hash_layers``): the experts of a token are looked up,
  ``tid2eid[input_ids]`` (a ``[vocab, k]`` table kept as a buffer); ``input_ids`` is a graph input.
- Image tokens (``image_tokens`` presets): rows flagged by the ``additional_token_mask`` graph
  input are selected by top-k with ``additional_bias`` (a buffer) instead of the layer's bias or
  table (image tokens have no meaningful token id).
- Experts: SwiGLU with DeepSeek-V4's asymmetric clamp (``up`` to [-limit, limit], ``gate`` to at
  most ``limit``), activation in float32.

The optional tensors are module state or always-present graph inputs: an optional graph input
passed as None would stop the exporter from naming the token dimension.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .from_hf import moe_config
from .layers import MoEConfig, RoutedMoE


class DeepseekV4MoE(RoutedMoE):
    """DeepSeek-V4 MoE block (normal or hash layer, optionally with image-token routing)."""

    def __init__(self, cfg: MoEConfig, dtype: torch.dtype = torch.float32):
        super().__init__(cfg, dtype)
        names = ["hidden_states"]
        if cfg.hash:
            names.append("input_ids")
            self.gate.register_buffer("tid2eid", torch.zeros(cfg.vocab, cfg.top_k, dtype=torch.int64))
        if cfg.image_tokens:
            names.append("additional_token_mask")
            self.gate.register_buffer("additional_bias", torch.zeros(cfg.experts, dtype=torch.float32))
        self.input_names = tuple(names)

    def _tensors(self, inputs: dict) -> dict:
        g = self.gate
        return dict(bias=getattr(g, "e_score_correction_bias", None), input_ids=inputs.get("input_ids"),
                    tid2eid=getattr(g, "tid2eid", None), additional_bias=getattr(g, "additional_bias", None),
                    additional_token_mask=inputs.get("additional_token_mask"))

    def route(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Export path: the Ascend recipe's ``custom.npu_moe_gating_top_k`` with the hash inputs."""
        c = self.cfg
        y, idx, _ = torch.ops.custom.npu_moe_gating_top_k(
            logits, c.top_k, **self._tensors(inputs), norm_type=2,
            routed_scaling_factor=c.routed_scaling_factor)
        return y, idx

    def _choice(self, scores: torch.Tensor, t: dict) -> torch.Tensor:
        choice = scores if t["bias"] is None else scores + t["bias"]
        if t["additional_token_mask"] is not None:
            choice = torch.where(t["additional_token_mask"][:, None], scores + t["additional_bias"], choice)
        return choice

    def route_native(self, logits: torch.Tensor, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """Reference routing (DeepSeek-V4 ``Gate.forward``, plus the image-token rule)."""
        t = self._tensors(inputs)
        scores = F.softplus(logits.float()).sqrt()
        idx = self._choice(scores, t).topk(self.cfg.top_k, dim=-1).indices
        if t["tid2eid"] is not None:
            hashed = t["tid2eid"][t["input_ids"]].to(idx.dtype)
            mask = t["additional_token_mask"]
            idx = hashed if mask is None else torch.where(mask[:, None], idx, hashed)
        w = scores.gather(1, idx)
        return w / w.sum(dim=-1, keepdim=True) * self.cfg.routed_scaling_factor, idx

    def selection_scores(self, inputs: dict) -> torch.Tensor:
        """Biased scores; hash rows get 0, 1, 2, ... so a table mismatch is never taken for a tie."""
        t = self._tensors(inputs)
        b = self._choice(F.softplus(self.router_logits(inputs["hidden_states"])).sqrt(), t)
        if t["tid2eid"] is not None:
            hash_rows = torch.ones(b.shape[0], dtype=torch.bool)
            if t["additional_token_mask"] is not None:
                hash_rows = ~t["additional_token_mask"]
            distinct = torch.arange(b.shape[1], dtype=b.dtype).expand_as(b)
            b = torch.where(hash_rows[:, None], distinct, b)
        return b


# DeepSeek-V4-Flash config.json: hidden 4096, 256 experts, top-6, moe_intermediate 2048, 1 shared,
# route scale 1.5, swiglu_limit 10, vocab 129280, 3 hash layers (tid2eid [129280, 6]).
HF = dict(model_type="deepseek_v4", n_routed_experts=256, num_experts_per_tok=6, scoring_func="sqrtsoftplus",
          routed_scaling_factor=1.5, swiglu_limit=10.0, num_hidden_layers=43)
# The blocks follow DeepSeek's reference code: float32 router logits and SwiGLU activation.
_REFERENCE = dict(router_fp32=True, act_fp32=True)
_TINY = moe_config({**HF, "n_routed_experts": 16, "swiglu_limit": 0.75}, hidden=48, intermediate=24, shared=1,
                   vocab=64, **_REFERENCE)
_FULL = moe_config(HF, hidden=4096, intermediate=2048, shared=1, vocab=129280, **_REFERENCE)


def _variant(**changes) -> dict:
    return dict(hf=HF, tiny=_TINY.replace(**changes), full=_FULL.replace(**changes))


PRESETS = {
    "deepseek-v4": dict(cls=DeepseekV4MoE, doc="DeepSeek-V4 normal layer: sqrt-softplus + bias, top-6, rsf 1.5",
                        **_variant()),
    "deepseek-v4-hash": dict(cls=DeepseekV4MoE,
                             doc="DeepSeek-V4 hash layer: experts from tid2eid[input_ids], no bias",
                             **_variant(hash=True, bias=False)),
    "deepseek-v4-image": dict(cls=DeepseekV4MoE,
                              doc="DeepSeek-V4 normal layer; image tokens (mask input) use additional_bias",
                              **_variant(image_tokens=True)),
    "deepseek-v4-hash-image": dict(cls=DeepseekV4MoE,
                                   doc="DeepSeek-V4 hash layer; image tokens are top-k with additional_bias",
                                   **_variant(hash=True, bias=False, image_tokens=True)),
}
