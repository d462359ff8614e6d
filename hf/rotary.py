"""Rotary embeddings computed with complex numbers (Llama 4, DeepSeek-V2: ``torch.polar``,
``view_as_complex``), as real pairs while a model is exported.

torch.onnx has no complex tensors past a few ops, so :func:`real_rotary` swaps, for the duration of
an export, the family's rotary embedding (which returns ``cis(position * inv_freq) * scaling``) for
one returning the same numbers as ``[..., dim / 2, 2]`` (cos, sin) pairs, and its
``apply_rotary_emb`` for the same complex product written on the pairs:
``(a + ib)(c + is) = (ac - bs) + i(as + bc)``. Everything is restored on exit.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Callable, Iterator

import torch

# module of a family's modeling code -> (its rotary embedding class, how apply_rotary_emb adds the
# head axis to the per-position rotations: [b, s, d/2] -> [b, s, 1, d/2] or [b, 1, s, d/2])
COMPLEX_ROTARY: dict[str, tuple[str, Callable[[torch.Tensor], torch.Tensor]]] = {
    "transformers.models.llama4.modeling_llama4": ("Llama4TextRotaryEmbedding", lambda f: f[:, :, None]),
    "transformers.models.deepseek_v2.modeling_deepseek_v2": ("DeepseekV2RotaryEmbedding", lambda f: f.unsqueeze(1)),
}


def _real_forward(self, x: torch.Tensor, position_ids: torch.Tensor) -> torch.Tensor:
    freqs = position_ids[..., None].float() * self.inv_freq.to(device=x.device, dtype=torch.float)
    return torch.stack((freqs.cos(), freqs.sin()), -1) * self.attention_scaling


def _rotate(x: torch.Tensor, rotation: torch.Tensor) -> torch.Tensor:
    pairs = x.float().reshape(*x.shape[:-1], -1, 2)
    a, b = pairs[..., 0], pairs[..., 1]
    c, s = rotation[..., 0], rotation[..., 1]
    return torch.stack((a * c - b * s, a * s + b * c), -1).flatten(3).type_as(x)


def _real_apply(head_axis: Callable[[torch.Tensor], torch.Tensor]):
    def apply_rotary_emb(xq: torch.Tensor, xk: torch.Tensor, freqs_cis: torch.Tensor):
        rotation = head_axis(freqs_cis).to(xq.device)
        return _rotate(xq, rotation), _rotate(xk, rotation)

    return apply_rotary_emb


def uses_complex_rotary(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds a rotary embedding of :data:`COMPLEX_ROTARY`."""
    return any(type(m).__module__ in COMPLEX_ROTARY and type(m).__name__ == COMPLEX_ROTARY[type(m).__module__][0]
               for m in model.modules())


@contextlib.contextmanager
def real_rotary(model: torch.nn.Module) -> Iterator[None]:
    """While inside, the complex rotary embeddings of ``model``'s families compute on real pairs."""
    from transformers.modeling_rope_utils import dynamic_rope_update

    saved = []
    try:
        for name in {type(m).__module__ for m in model.modules()} & set(COMPLEX_ROTARY):
            module = importlib.import_module(name)
            cls_name, head_axis = COMPLEX_ROTARY[name]
            cls = getattr(module, cls_name)
            functions = module.__dict__  # the module's globals: its modelling code reads them by name
            saved += [(cls, "forward", cls.__dict__["forward"]),
                      (module, "apply_rotary_emb", functions["apply_rotary_emb"])]
            cls.forward = dynamic_rope_update(_real_forward)
            functions["apply_rotary_emb"] = _real_apply(head_axis)
        yield
    finally:
        for owner, attr, value in reversed(saved):
            setattr(owner, attr, value)
